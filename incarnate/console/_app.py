"""The console's web application: :func:`create_app` wires the pages and actions to one engine.

Every response passes the :class:`~incarnate.console._security.Guard`: the
Host or the token, the read-only and same-origin rules, and the security
headers. A page whose read failed on the store's connection is read again
(:meth:`~incarnate.console._console.Console.read`); when the store stays
unreachable the console answers 503.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable, Mapping
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from incarnate._hosts import HostRule
from incarnate._storage import Storage
from incarnate.cli._common import hide, redact
from incarnate.console._actions import (
    cancel_action,
    migrate_action,
    resolve_action,
    send_action,
    terminate_action,
)
from incarnate.console._bulk import bulk_action, bulk_page
from incarnate.console._console import Console, connection_failed, environment
from incarnate.console._fleet import workers_page
from incarnate.console._pages import (
    chart_diagram,
    chart_page,
    charts_page,
    instance_page,
    instances_page,
    instances_table,
    migrate_page,
)
from incarnate.console._security import (
    Guard,
    Refused,
    Secrets,
    error_answer,
    token_problem,
    wants_json_answer,
)
from incarnate.console._travel import fork_action, redrive_action, travel_page
from incarnate.errors import ConfigurationError, StoreUnreachable
from statechart import Chart
from statechart.errors import IncarnateError

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
    hide(storage)
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
        return _answer(request, exc.status, exc.code, exc.message, exc.headers)

    async def unrouted(request: Request, exc: Exception) -> Response:
        # Starlette's own refusals: an address no route serves (404), a method it does not take (405).
        assert isinstance(exc, HTTPException)
        return await refused(request, Refused(exc.status_code, exc.detail, exc.headers))

    async def failed(request: Request, exc: Exception) -> Response:
        # The server's log keeps the traceback; the page says what failed, never a password.
        what = f"{type(exc).__name__}: {redact(str(exc))}"
        if connection_failed(exc):
            message = (
                f"the console could not reach its store ({what}); check that the database is up "
                "and reachable, then reload the page"
            )
            return _answer(request, 503, StoreUnreachable.code, message, {"retry-after": "5"})
        code = type(exc).code if isinstance(exc, IncarnateError) else "internal-error"
        return _answer(request, 500, code, f"the console failed: {what}")

    routes = [
        Route("/", instances_page),
        Route("/instances/table", instances_table),
        Route("/instances/{id}", instance_page),
        Route("/instances/{id}/at/{k}", travel_page),
        Route("/instances/{id}/fork", fork_action, methods=["POST"]),
        Route("/instances/{id}/redrive", redrive_action, methods=["POST"]),
        Route("/instances/{id}/send", send_action, methods=["POST"]),
        Route("/instances/{id}/cancel", cancel_action, methods=["POST"]),
        Route("/instances/{id}/terminate", terminate_action, methods=["POST"]),
        Route("/instances/{id}/resolve", resolve_action, methods=["POST"]),
        Route("/bulk", bulk_page, methods=["GET"]),
        Route("/bulk", bulk_action, methods=["POST"]),
        Route("/charts", charts_page),
        Route("/charts/{name}", chart_page),
        Route("/charts/{name}/diagram", chart_diagram),
        Route("/charts/{name}/migrate", migrate_page, methods=["GET"]),
        Route("/charts/{name}/migrate", migrate_action, methods=["POST"]),
        Route("/workers", workers_page),
        Route("/favicon.ico", lambda request: Response(status_code=204)),
        Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={Refused: refused, HTTPException: unrouted, Exception: failed},
    )
    app.state.console = console
    app.state.templates = environment()
    app.add_middleware(Guard, secrets=secrets, read_only=read_only, hosts=hosts)
    return app


def _answer(
    request: Request, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """An error answer: the message and its stable code, as JSON when the request asked for JSON."""
    body, content_type = error_answer(status, code, message, as_json=wants_json_answer(request.scope))
    return Response(body, status_code=status, headers=headers, media_type=content_type)
