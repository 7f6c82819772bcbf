"""``python -m incarnate``: the ``incarnate`` command line."""

from incarnate.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
