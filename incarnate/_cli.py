"""The ``incarnate`` console script's entry point: :func:`incarnate.cli.main`.

The command line lives in :mod:`incarnate.cli`; this module keeps the
entry point ``incarnate._cli:main`` (and ``python -m incarnate._cli``) and
the names scripts import from it: the exit statuses and the errors.
"""

from __future__ import annotations

from incarnate._command import (
    BROKEN_PIPE,
    BUG,
    DEBUG_VARIABLE,
    INTERRUPTED,
    OPERATION_FAILED,
    USAGE_ERROR,
    hide,
    load_chart,
    load_object,
    parse_json_option,
    redact,
)
from incarnate.cli import main, root
from incarnate.errors import CommandError, CommandFailed

__all__ = [
    "BROKEN_PIPE",
    "BUG",
    "DEBUG_VARIABLE",
    "INTERRUPTED",
    "OPERATION_FAILED",
    "USAGE_ERROR",
    "CommandError",
    "CommandFailed",
    "hide",
    "load_chart",
    "load_object",
    "main",
    "parse_json_option",
    "redact",
    "root",
]

if __name__ == "__main__":
    raise SystemExit(main())
