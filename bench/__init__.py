"""Benchmarks, run as modules: ``python -m bench.interpreter``. See ``bench/README.md``."""
