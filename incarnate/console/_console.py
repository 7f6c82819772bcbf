"""What the console's routes share: the engine that runs no work, the flashes, rendering, helpers.

The :class:`Console` opens one :class:`~incarnate.Engine` over the store when
the application starts and closes it when it stops. That engine never runs
an instance: its runner (:class:`Idle`) drops every notification (a worker
or ``incarnate recover`` does the work) and the tasks the charts invoke are
registered with a function that refuses to run. Every store call runs in
Starlette's thread pool under one lock, so a slow store never blocks the
event loop and the engine is used by one thread at a time.

A page's read that fails on the store's connection (PostgreSQL restarted,
say: the first use of each connection fails) is run again, up to
:data:`READ_ATTEMPTS` times in all; an action never is, since its write may
have committed before the connection failed (:meth:`Console.read`,
:meth:`Console.call`).

Pages are Jinja2 templates with autoescaping on: stored data (contexts,
inputs, errors) reaches a page only as escaped text.
"""

from __future__ import annotations

import json
import logging
import secrets as random
import sqlite3
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import jinja2
from eventsourcing.persistence import InterfaceError, OperationalError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from incarnate._engine import Engine
from incarnate._inspect import enabled_events, iso, shape_events
from incarnate._runners import Idle
from incarnate._storage import Storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate.cli._common import redact
from incarnate.console._security import CSRF_FIELD, Refused, Secrets
from statechart import Chart, JsonValue
from statechart.shape import Shape

_HERE = Path(__file__).parent
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
REFRESH_SECONDS = 3
_FLASHES_KEPT = 200
READ_ATTEMPTS = 3
"""How many times a page's read is run when it fails on the store's connection.

A connection the server dropped (PostgreSQL restarted, say) fails its next
use once and is then opened again. A page reads through two of the engine's
own connections (the listing's and the coordination's; the library's pool
retries by itself), so the first page after a restart may meet two dead
ones. A store that is down fails every run, and the page answers 503.
"""

BULK_ACTIONS = ("send", "cancel", "terminate", "migrate")
"""The bulk actions of the instance list (see :mod:`incarnate.console._bulk`)."""
FILTER_KEYS = ("q", "status", "state", "chart", "owner", "in_state", "roots")
"""The instance list's filters, which a bulk action carries (paging is left out: it acts on every page)."""

_T = TypeVar("_T")

log = logging.getLogger("incarnate.console")


def _connection_errors() -> tuple[type[BaseException], ...]:
    errors: list[type[BaseException]] = [OperationalError, InterfaceError, sqlite3.OperationalError]
    psycopg = sys.modules.get("psycopg")  # not imported: no store of this process raised its errors
    if psycopg is not None:
        errors += [psycopg.OperationalError, psycopg.InterfaceError]
    return tuple(errors)


def connection_failed(error: BaseException) -> bool:
    """Whether ``error`` (or an error its traceback shows it came from) is the store's connection failing.

    ``eventsourcing``'s and psycopg's ``OperationalError`` and ``InterfaceError``,
    and SQLite's ``OperationalError`` (a locked file), however the engine wrapped them.
    """
    errors = _connection_errors()
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, errors):
            return True
        seen.add(id(current))
        # The chain a traceback shows: the cause, else the context unless ``from None`` hid it.
        suppressed = current.__suppress_context__
        current = current.__cause__ or (None if suppressed else current.__context__)
    return False


def _refusing(name: str) -> TaskFunction:
    def refuse(call: TaskCall) -> JsonValue:
        raise RuntimeError(f"task {name!r} is not run by the console; run `incarnate worker` or `recover`")

    return refuse


class Console:
    """The state the routes share: options, the engine (while the app runs), secrets and flashes."""

    def __init__(
        self,
        storage: Storage,
        charts: Sequence[Chart[Any]],
        *,
        read_only: bool,
        secrets: Secrets,
    ) -> None:
        self.storage = storage
        self.charts = list(charts)
        self.read_only = read_only
        self.secrets = secrets
        self.where = redact(storage.describe())
        self._engine: Engine | None = None
        self._lock = threading.Lock()
        self._flashes: OrderedDict[str, tuple[str, str]] = OrderedDict()

    def open(self) -> None:
        """Open the engine: tasks refuse to run, the runner runs nothing."""
        tasks = {
            site.task: _refusing(site.task)
            for chart in self.charts
            for site, _ in chart.child_charts()
            if site.task is not None
        }
        self._engine = Engine(self.charts, tasks, storage=self.storage, runner=Idle())

    def close(self) -> None:
        """Close the engine, if it was opened."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.close()

    async def call(self, fn: Callable[[Engine], _T]) -> _T:
        """``fn(engine)`` in the thread pool, one call at a time: for an action, never run twice."""
        return await run_in_threadpool(self._locked, fn, 1)

    async def read(self, fn: Callable[[Engine], _T]) -> _T:
        """``fn(engine)`` as :meth:`call` does, run again if it failed on the store's connection.

        Only for ``fn`` that writes nothing (a page), so running it again is
        safe: at most :data:`READ_ATTEMPTS` runs in all.
        """
        return await run_in_threadpool(self._locked, fn, READ_ATTEMPTS)

    def _locked(self, fn: Callable[[Engine], _T], attempts: int) -> _T:
        with self._lock:
            if self._engine is None:
                raise RuntimeError("the console's engine is not open (the application has not started)")
            for _ in range(attempts - 1):
                try:
                    return fn(self._engine)
                except Exception as error:
                    if not connection_failed(error):
                        raise
                    log.warning("a read of %s lost its connection (%s); reading again", self.where, error)
            return fn(self._engine)

    def flash(self, kind: str, text: str) -> str:
        """Keep a message for the next page; returns the key the redirect carries."""
        key = random.token_urlsafe(12)
        self._flashes[key] = (kind, text)
        while len(self._flashes) > _FLASHES_KEPT:
            self._flashes.popitem(last=False)
        return key

    def take_flash(self, key: str | None) -> tuple[str, str] | None:
        """The message kept under ``key``, once."""
        return None if key is None else self._flashes.pop(key, None)


# ------------------------------------------------------------------ helpers


def environment() -> jinja2.Environment:
    """The templates, autoescaped, with their filters: ``pretty`` JSON, ``iso`` times, ``short`` ids."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["pretty"] = lambda value: json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)
    env.filters["iso"] = iso
    env.filters["short"] = lambda value: str(value)[:8]
    return env


def json_response(document: Mapping[str, Any], status: int = 200) -> JSONResponse:
    """A page's JSON view."""
    return JSONResponse(document, status_code=status)


def wants_json(request: Request) -> bool:
    """Whether the request asks for the JSON view (``?format=json``)."""
    return request.query_params.get("format") == "json"


def shape_of(engine: Engine, name: str, fingerprint: str | None) -> Shape | None:
    """The shape to draw: the registered chart's, else the one recorded for ``fingerprint``."""
    chart = engine.charts.get(name)
    if chart is not None:
        return chart.shape
    return None if fingerprint is None else engine.parts.journal.chart_shape(name, fingerprint)


def enabled(engine: Engine, shape: Shape | None, name: str, configuration: Sequence[str]) -> tuple[str, ...]:
    """The events an operator may send: from the registered chart, else from the stored shape."""
    chart = engine.charts.get(name)
    if chart is not None:
        return enabled_events(chart, configuration)
    return () if shape is None else shape_events(shape, configuration)


def instance_id_of(text: str) -> UUID:
    """The instance id of a path; :class:`Refused` (404) for text that is not a UUID."""
    try:
        return UUID(text)
    except ValueError as err:
        raise Refused(404, f"{text!r} is not an instance id (a UUID)") from err


def render(console: Console, request: Request, template: str, status: int = 200, **context: Any) -> Response:
    """A page: ``template`` with ``context`` and what every page shows (the store, a flash, CSRF)."""
    env: jinja2.Environment = request.app.state.templates
    flash = console.take_flash(request.query_params.get("flash"))
    html = env.get_template(template).render(
        request=request,
        nonce=request.scope.get("state", {}).get("nonce", ""),
        csrf_field=CSRF_FIELD,
        csrf_token=console.secrets.csrf_token(),
        read_only=console.read_only,
        where=console.where,
        flash=flash,
        **context,
    )
    return HTMLResponse(html, status_code=status)
