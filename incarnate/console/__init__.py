"""The operator's web console, ``incarnate console`` (Starlette, Jinja2, uvicorn: the ``console`` extra)."""

from incarnate.console._app import create_app
from incarnate.console._cli import command

__all__ = ["create_app", "command"]
