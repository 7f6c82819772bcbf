"""The ``incarnate`` command line, built with click: one module per group of commands.

:func:`main` runs it and returns the exit status (the console script,
``incarnate.cli:main``, and ``python -m incarnate`` call it); :data:`root`
is the click group, from which :mod:`incarnate.cli.reference` renders the
reference of every command. What the commands share (exit statuses,
loaders, JSON options, secrets) is in ``_common``; how they print, in
``_output``; the store options, in ``_store``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from incarnate.cli._main import main, root

__all__ = ["main", "root"]


def __getattr__(name: str) -> Any:
    # Lazy, so that the console can import ``incarnate.cli._common`` and the shared option
    # helpers of ``incarnate.cli._store`` without building the whole command tree.
    if name in __all__:
        from incarnate.cli import _main

        return getattr(_main, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
