"""The ``incarnate`` command line, built with click: one module per group of commands.

:func:`main` runs it and returns the exit status (the console script and
``python -m incarnate`` call it); :data:`root` is the click group, from
which :mod:`incarnate.cli.reference` renders the reference of every command.
"""

from incarnate.cli._main import main, root

__all__ = ["main", "root"]
