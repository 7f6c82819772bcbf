"""``python -m engine``: the ``incarnate`` command line."""

from engine._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
