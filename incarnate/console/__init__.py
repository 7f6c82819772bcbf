"""The operator's web console, ``incarnate console`` (Starlette, Jinja2, uvicorn: the ``console`` extra).

The command is always importable, so ``incarnate --help`` lists it; serving
needs the extra (``pip install 'incarnate[console]'``), and the command says
so when it is missing. :func:`create_app` imports the web libraries on first
use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from incarnate.console._serve import command

if TYPE_CHECKING:
    from incarnate.console._app import create_app

__all__ = ["create_app", "command"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from incarnate.console._app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
