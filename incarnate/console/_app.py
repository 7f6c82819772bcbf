"""The console's web application: :func:`create_app` wires the pages and actions to one engine.

Every response passes the :class:`~incarnate.console._security.Guard`: the
Host or the token, the read-only and same-origin rules, and the security
headers. A page whose read failed on the store's connection is read again
(:meth:`~incarnate.console._console.Console.read`); when the store stays
unreachable the console answers 503.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from incarnate._storage import Storage
from incarnate.cli._common import hide, redact
from incarnate.console._actions import (
    cancel_action,
    migrate_action,
    resolve_action,
    send_action,
    terminate_action,
)
from incarnate.console._console import Console, connection_failed, environment
from incarnate.console._host import HostRule
from incarnate.console._pages import (
    chart_diagram,
    chart_page,
    charts_page,
    instance_page,
    instances_page,
    instances_table,
    migrate_page,
)
from incarnate.console._security import Guard, Refused, Secrets, token_problem
from incarnate.errors import ConfigurationError
from statechart import Chart

_HERE = Path(__file__).parent


def create_app(
    storage: Storage | str,
    *,
    charts: Iterable[Chart[Any]] = (),
    read_only: bool = False,
    token: str | None = None,
    host: str = "127.0.0.1",
    allowed_hosts: Iterable[str] = (),
) -> Starlette:
    """The console over ``storage`` (a :class:`Storage` or a SQLite path or URL).

    ``charts`` are the charts the instances were started with (optional:
    without them the console draws the shapes the store recorded, and shows
    no decoded ResumePlan). With ``read_only`` no action is offered and
    every POST is refused; with ``token`` (at least 16 characters) every
    request must carry it. Without a token only requests whose ``Host`` is
    a loopback name, an IP address, ``host`` (the address the server
    listens on) or one of ``allowed_hosts`` (``NAME`` or ``NAME:PORT``) are
    answered. The engine opens when the application starts (its lifespan)
    and closes when it stops.
    """
    problem = token_problem(token)
    if problem is not None:
        raise ConfigurationError(problem)
    hosts = HostRule(host, allowed_hosts)
    if isinstance(storage, str):
        storage = Storage.from_url(storage)
    hide(storage.postgres_password)
    secrets = Secrets(token)
    console = Console(storage, list(charts), read_only=read_only, secrets=secrets)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(console.open)
        try:
            yield
        finally:
            await run_in_threadpool(console.close)

    async def refused(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Refused)
        return PlainTextResponse(exc.message + "\n", status_code=exc.status, headers=exc.headers)

    async def failed(request: Request, exc: Exception) -> Response:
        # The server's log keeps the traceback; the page says what failed, never a password.
        what = f"{type(exc).__name__}: {redact(str(exc))}"
        if connection_failed(exc):
            message = (
                f"the console could not reach its store ({what}); check that the database is up "
                "and reachable, then reload the page"
            )
            return PlainTextResponse(message + "\n", status_code=503, headers={"retry-after": "5"})
        return PlainTextResponse(f"the console failed: {what}\n", status_code=500)

    routes = [
        Route("/", instances_page),
        Route("/instances/table", instances_table),
        Route("/instances/{id}", instance_page),
        Route("/instances/{id}/send", send_action, methods=["POST"]),
        Route("/instances/{id}/cancel", cancel_action, methods=["POST"]),
        Route("/instances/{id}/terminate", terminate_action, methods=["POST"]),
        Route("/instances/{id}/resolve", resolve_action, methods=["POST"]),
        Route("/charts", charts_page),
        Route("/charts/{name}", chart_page),
        Route("/charts/{name}/diagram", chart_diagram),
        Route("/charts/{name}/migrate", migrate_page, methods=["GET"]),
        Route("/charts/{name}/migrate", migrate_action, methods=["POST"]),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={Refused: refused, Exception: failed}
    )
    app.state.console = console
    app.state.templates = environment()
    app.add_middleware(Guard, secrets=secrets, read_only=read_only, hosts=hosts)
    return app
