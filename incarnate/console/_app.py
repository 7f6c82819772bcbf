"""The console's web application: Starlette routes over one engine that runs no work.

:func:`create_app` opens one :class:`~incarnate.Engine` over the store when
the application starts and closes it when it stops. That engine never runs
an instance: its runner drops every notification (a worker or
``incarnate recover`` does the work) and the tasks the charts invoke are
registered with a function that refuses to run. Every store call runs in
Starlette's thread pool under one lock, so a slow store never blocks the
event loop and the engine is used by one thread at a time.

Pages are Jinja2 templates with autoescaping on: stored data (contexts,
inputs, errors) reaches a page only as escaped text, and the diagram's SVG
escapes its labels itself. Each page is also served as JSON with
``?format=json``. Every action is a POST carrying the form's CSRF token;
it redirects back to the page with a one-time flash message.
"""

from __future__ import annotations

import contextlib
import json
import secrets as random
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlencode
from uuid import UUID

import jinja2
from markupsafe import Markup
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from aggregates import Instance, InstanceKind, InstanceStatus
from incarnate._command import hide, parse_json_option, redact
from incarnate._engine import Engine
from incarnate._inspect import (
    INTERNAL_EVENT_PREFIXES,
    STATUSES,
    InstanceDetail,
    Page,
    call_tree_of,
    enabled_events,
    instance_detail,
    iso,
    label,
    list_instances,
    state_counts,
    tree_events,
    tree_json,
)
from incarnate._storage import Storage
from incarnate._tasks import TaskCall, TaskFunction
from incarnate.console._diagram import diagram_svg
from incarnate.console._migrate import MigrationView, apply_migration, dry_run, parse_mapping
from incarnate.console._security import CSRF_FIELD, Guard, Refused, Secrets
from incarnate.errors import UnknownInstance
from projections import Checkpoint, TreeNode, call_tree, timeline
from statechart import Chart, JsonValue, Shape
from statechart.errors import IncarnateError

_HERE = Path(__file__).parent
DEFAULT_LIMIT = 50
MAX_LIMIT = 500
REFRESH_SECONDS = 3
_FLASHES_KEPT = 200

_T = TypeVar("_T")


class Idle:
    """A runner that runs nothing: the console only accepts; a worker or ``recover`` does the work."""

    def attach(self, engine: Engine) -> None:
        """Nothing to bind."""

    def notify(self, instance_id: UUID) -> None:
        """Dropped: the instance's owner (a worker) picks the message up from the store."""

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        """Dropped: timers are armed by the engine that runs the instance."""

    def run_until_idle(self, max_units: int) -> int:
        """Nothing is ever run here."""
        return 0

    def stop(self) -> None:
        """Nothing runs, so nothing to stop."""


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
        """``fn(engine)`` in the thread pool, one call at a time."""

        def locked() -> _T:
            with self._lock:
                if self._engine is None:
                    raise RuntimeError("the console's engine is not open (the application has not started)")
                return fn(self._engine)

        return await run_in_threadpool(locked)

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


def _environment() -> jinja2.Environment:
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


def _json(document: Mapping[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(document, status_code=status)


def _wants_json(request: Request) -> bool:
    return request.query_params.get("format") == "json"


def _shape_of(engine: Engine, name: str, fingerprint: str | None) -> Shape | None:
    """The shape to draw: the registered chart's, else the one recorded for ``fingerprint``."""
    chart = engine.charts.get(name)
    if chart is not None:
        return chart.shape
    return None if fingerprint is None else engine.chart_shape(name, fingerprint)


def _enabled(engine: Engine, shape: Shape | None, name: str, configuration: Sequence[str]) -> tuple[str, ...]:
    """The events an operator may send: from the registered chart, else from the stored shape."""
    chart = engine.charts.get(name)
    if chart is not None:
        return enabled_events(chart, configuration)
    if shape is None:
        return ()
    active = set(configuration)
    names: dict[str, None] = {}
    for transition in shape.transitions:
        if transition.source in active and transition.delay is None:
            for event in transition.events:
                if event != "*" and not event.startswith(INTERNAL_EVENT_PREFIXES):
                    names.setdefault(event, None)
    return tuple(names)


def _instance_id(text: str) -> UUID:
    try:
        return UUID(text)
    except ValueError as err:
        raise Refused(404, f"{text!r} is not an instance id (a UUID)") from err


# ---------------------------------------------------------------- the pages


def _filters(request: Request) -> dict[str, Any]:
    """The listing filters of the query string, validated; raises :class:`Refused` (400)."""
    query = request.query_params
    statuses = [s for s in query.getlist("status") if s]
    state = query.get("state", "")
    in_flight = {"in_flight": True, "finished": False}.get(state)
    if state not in ("", "in_flight", "finished"):
        raise Refused(400, f"state must be in_flight, finished or empty, got {state!r}")
    try:
        limit = int(query.get("limit") or DEFAULT_LIMIT)
        offset = int(query.get("offset") or 0)
    except ValueError as err:
        raise Refused(400, f"limit and offset must be whole numbers: {err}") from err
    if not 1 <= limit <= MAX_LIMIT or offset < 0:
        raise Refused(400, f"limit must be 1 to {MAX_LIMIT} and offset 0 or more, got {limit} and {offset}")
    unknown = sorted(set(statuses) - set(STATUSES))
    if unknown:
        raise Refused(400, f"unknown status {', '.join(unknown)}; choose among {', '.join(STATUSES)}")
    return {
        "statuses": statuses or None,
        "chart": query.get("chart") or None,
        "roots": query.get("roots") in ("1", "on", "true"),
        "owner": query.get("owner") or None,
        "prefix": (query.get("q") or "").strip() or None,
        "in_flight": in_flight,
        "limit": limit,
        "offset": offset,
    }


def _query(request: Request, **changes: object) -> str:
    """The current query string with ``changes`` (None removes a key); the format and flash dropped."""
    items = [(k, v) for k, v in request.query_params.multi_items() if k not in ("format", "flash", *changes)]
    items += [(k, str(v)) for k, v in changes.items() if v is not None]
    return urlencode(items)


async def _listing(console: Console, request: Request) -> tuple[Page, list[str], list[str]]:
    filters = _filters(request)

    def read(engine: Engine) -> tuple[Page, list[str], list[str]]:
        page = list_instances(engine, **filters)
        rows = engine.listing.rows()
        names = sorted({row.name for row in rows} | set(engine.charts))
        owners = sorted({row.owner for row in rows})
        return page, names, owners

    return await console.call(read)


def _render(console: Console, request: Request, template: str, status: int = 200, **context: Any) -> Response:
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


async def instances_page(request: Request) -> Response:
    """``/``: the instances, filtered and paged; ``?format=json`` for the page as JSON."""
    console: Console = request.app.state.console
    page, names, owners = await _listing(console, request)
    if _wants_json(request):
        return _json(page.to_json())
    return _render(
        console,
        request,
        "instances.html",
        page=page,
        names=names,
        owners=owners,
        statuses=STATUSES,
        query=request.query_params,
        table_query=_query(request),
        previous=_query(request, offset=max(0, page.offset - (page.limit or DEFAULT_LIMIT)))
        if page.offset
        else None,
        next=_query(request, offset=page.offset + len(page.rows)) if page.left_off else None,
        refresh=REFRESH_SECONDS,
    )


async def instances_table(request: Request) -> Response:
    """``/instances/table``: the table alone, for the page's live refresh."""
    console: Console = request.app.state.console
    page, _, _ = await _listing(console, request)
    return _render(console, request, "table.html", page=page)


def _timeline_rows(instances: Iterable[Any], events: list[Any]) -> list[dict[str, Any]]:
    names = {i.id: label(i) for i in instances}
    entries = timeline(events)
    first = entries[0].at if entries else None
    return [
        {
            "at": entry.at.isoformat(timespec="milliseconds"),
            "offset": (entry.at - first).total_seconds() if first is not None else 0.0,
            "instance": str(entry.instance),
            "who": names.get(entry.instance, str(entry.instance)[:8]),
            "version": entry.version,
            "event": entry.event,
            "summary": entry.summary,
        }
        for entry in entries
    ]


def _call_tree(engine: Engine, root: UUID) -> TreeNode:
    """The call tree under ``root``; its stored configurations when a chart no longer has their states.

    ``call_tree_of`` reduces configurations to atomic states through the
    registered chart, which fails (KeyError) for an instance stored under an
    older chart that names a removed state: exactly the instance an operator
    opens before a migration. Then the tree shows the stored states as they are.
    """
    try:
        return call_tree_of(engine, root)
    except KeyError:

        def load(instance_id: UUID) -> Instance | None:
            try:
                return engine.instance(instance_id)
            except UnknownInstance:
                return None

        def stored(instance: Instance) -> tuple[str, ...]:
            return tuple(str(s) for s in (instance.record.snapshot or {}).get("configuration", ()))

        return call_tree(load, root, configuration=stored)


def _tree_rows(tree: TreeNode, owners: Mapping[UUID, str]) -> list[dict[str, Any]]:
    """The call tree as table rows, depth first, each with its level and owner."""
    rows: list[dict[str, Any]] = []

    def visit(node: TreeNode, level: int) -> None:
        rows.append({"level": level, "node": node, "owner": owners.get(node.id, "")})
        for child in node.children:
            visit(child, level + 1)

    visit(tree, 0)
    return rows


def _plan_view(engine: Engine, instance_id: UUID) -> tuple[Checkpoint | None, str | None]:
    try:
        return engine.plan(instance_id), None
    except (IncarnateError, ValueError, LookupError) as err:
        return None, redact(str(err))


def _plan_json(checkpoint: Checkpoint | None) -> dict[str, JsonValue] | None:
    if checkpoint is None:
        return None
    snapshot = checkpoint.snapshot
    return {
        "status": checkpoint.status.value,
        "version": checkpoint.version,
        "configuration": None if snapshot is None else list(snapshot.configuration),
        "timers": []
        if snapshot is None
        else [{"event": t.event.name, "deadline": iso(t.deadline)} for t in snapshot.timers],
        "activations": [
            {
                "site": a.site,
                "key": a.key,
                "generation": a.generation,
                "ref": str(a.ref),
                "child": str(a.child_id),
                "kind": a.kind.value,
                "name": a.name,
                "state": a.state.value,
                "attempt": a.attempt,
                "armed_step": a.armed_step,
                "provenance": a.provenance.value,
                "retries": len(a.journal),
            }
            for a in checkpoint.activations
        ],
    }


def _instance_view(engine: Engine, instance_id: UUID) -> dict[str, Any]:
    detail: InstanceDetail = instance_detail(engine, instance_id)
    instance = engine.instance(instance_id)
    root_status = engine.instance(detail.root).record.status if detail.parent is not None else None
    tree = _call_tree(engine, detail.root)
    owners = {row.id: row.owner for row in engine.listing.rows() if row.root == detail.root}
    try:
        instances, events = tree_events(engine, detail.root, tree=True)
    except KeyError:  # a stored state the chart lacks (see _call_tree): the same events, from our tree
        instances = [engine.instance(node.id) for node in tree.walk()]
        events = sorted((e for i in instances for e in engine.events_of(i.id)), key=lambda e: e.timestamp)
    checkpoint, plan_error = _plan_view(engine, instance_id)
    shape = None
    if instance.record.kind is InstanceKind.CHART:
        shape = _shape_of(engine, detail.name, instance.record.fingerprint)
    status = InstanceStatus(detail.status)
    live = status in (InstanceStatus.BORN, InstanceStatus.RUNNING)
    events_offered = _enabled(engine, shape, detail.name, detail.configuration) if live else ()
    return {
        "detail": detail,
        "tree": tree,
        "tree_rows": _tree_rows(tree, owners),
        "timeline": _timeline_rows(instances, events),
        "checkpoint": checkpoint,
        "plan": _plan_json(checkpoint),
        "plan_error": plan_error,
        "diagram": None if shape is None else Markup(diagram_svg(shape, detail.configuration)),
        "enabled": events_offered,
        "can_cancel": not status.finished and detail.cancel_reason is None,
        "can_terminate": detail.parent is None and not status.finished,
        "can_resolve": detail.parent is None and status is InstanceStatus.PARKED,
        "root_status": None if root_status is None else root_status.value,
    }


async def instance_page(request: Request) -> Response:
    """``/instances/{id}``: one instance, its call tree, timeline, plan, diagram and actions."""
    console: Console = request.app.state.console
    instance_id = _instance_id(request.path_params["id"])
    try:
        view = await console.call(lambda engine: _instance_view(engine, instance_id))
    except UnknownInstance as err:
        raise Refused(404, redact(str(err))) from err
    if _wants_json(request):
        return _json(
            {
                "instance": view["detail"].to_json(),
                "tree": tree_json(view["tree"]),
                "timeline": view["timeline"],
                "plan": view["plan"],
                "plan_error": view["plan_error"],
                "enabled_events": list(view["enabled"]),
            }
        )
    return _render(console, request, "instance.html", **view)


def _chart_view(engine: Engine, name: str) -> dict[str, Any]:
    counts = state_counts(engine, name)
    fingerprint = None
    if name not in engine.charts:
        for row in engine.listing.rows():
            if row.name == name and row.kind == InstanceKind.CHART.value:
                fingerprint = engine.instance(row.id, fresh=False).record.fingerprint
                break
    shape = _shape_of(engine, name, fingerprint)
    if shape is None and not counts:
        raise Refused(404, f"no chart {name!r} is registered with the console or has instances in the store")
    parked = sum(
        1 for row in engine.listing.rows(in_flight=True, roots=True) if row.name == name and row.parked
    )
    active = [state for state, count in counts.items() if count]
    return {
        "name": name,
        "counts": counts,
        "registered": name in engine.charts,
        "parked": parked,
        "diagram": None if shape is None else Markup(diagram_svg(shape, active, counts=counts)),
    }


def _charts_view(engine: Engine) -> list[dict[str, Any]]:
    engine.listing.catch_up()
    rows = [row for row in engine.listing.rows() if row.kind == InstanceKind.CHART.value]
    names = sorted({row.name for row in rows} | set(engine.charts))
    return [
        {
            "chart": name,
            "registered": name in engine.charts,
            "instances": sum(1 for row in rows if row.name == name),
            "in_flight": sum(1 for row in rows if row.name == name and row.in_flight),
            "parked": sum(1 for row in rows if row.name == name and row.parked),
        }
        for name in names
    ]


async def charts_page(request: Request) -> Response:
    """``/charts``: every chart registered or stored, with how many of its instances are in flight."""
    console: Console = request.app.state.console
    charts = await console.call(_charts_view)
    if _wants_json(request):
        return _json({"charts": charts})
    return _render(console, request, "charts.html", charts=charts)


async def chart_page(request: Request) -> Response:
    """``/charts/{name}``: the chart's diagram with how many unfinished instances are in each state."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    view = await console.call(lambda engine: _chart_view(engine, name))
    if _wants_json(request):
        return _json({"chart": name, "registered": view["registered"], "counts": view["counts"]})
    return _render(console, request, "chart.html", refresh=REFRESH_SECONDS, **view)


async def chart_diagram(request: Request) -> Response:
    """``/charts/{name}/diagram``: the counted diagram alone, for the chart page's live refresh."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    view = await console.call(lambda engine: _chart_view(engine, name))
    return HTMLResponse(f'<div id="diagram">{view["diagram"] or ""}</div>')


async def migrate_page(request: Request) -> Response:
    """``/charts/{name}/migrate?mapping=…``: the dry run of a migration, and the button that applies it."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    text = request.query_params.get("mapping", "")
    try:
        mapping = parse_mapping(text)
    except ValueError as err:
        return _render(console, request, "migrate.html", 400, name=name, text=text, error=str(err), view=None)
    view: MigrationView = await console.call(lambda engine: dry_run(engine, name, mapping))
    proof = console.secrets.proof("migrate", name, json.dumps(mapping, sort_keys=True))
    if _wants_json(request):
        return _json(view.to_json())
    return _render(console, request, "migrate.html", name=name, text=text, error=None, view=view, proof=proof)


# --------------------------------------------------------------- the actions


async def _form(console: Console, request: Request) -> FormData:
    form = await request.form()
    console.secrets.check_form(form.get(CSRF_FIELD))
    return form


def _back(path: str, console: Console, kind: str, text: str) -> RedirectResponse:
    return RedirectResponse(f"{path}?flash={console.flash(kind, redact(text))}", status_code=303)


async def _act(request: Request, path: str, do: Callable[[Engine, FormData], str]) -> Response:
    """Check the form, run ``do`` on the engine, and go back to ``path`` with what happened."""
    console: Console = request.app.state.console
    form = await _form(console, request)
    try:
        message = await console.call(lambda engine: do(engine, form))
    except (IncarnateError, ValueError, LookupError) as err:
        return _back(path, console, "error", str(err))
    return _back(path, console, "ok", message)


def _text(form: FormData, field: str, default: str = "") -> str:
    value = form.get(field, default)
    return value if isinstance(value, str) else default


async def send_action(request: Request) -> Response:
    """Durably accept an event the instance's configuration has a transition for."""
    instance_id = _instance_id(request.path_params["id"])

    def send(engine: Engine, form: FormData) -> str:
        event = _text(form, "event").strip()
        raw = _text(form, "data").strip()
        data: JsonValue = None if not raw else parse_json_option("data", raw)
        instance = engine.instance(instance_id)
        record = instance.record
        configuration = tuple(str(s) for s in (record.snapshot or {}).get("configuration", ()))
        shape = _shape_of(engine, record.name, record.fingerprint)
        offered = _enabled(engine, shape, record.name, configuration)
        if record.status not in (InstanceStatus.BORN, InstanceStatus.RUNNING) or event not in offered:
            shown = ", ".join(offered) or "none"
            raise ValueError(
                f"{event!r} is not enabled for {instance_id}: it is {record.status.value} in "
                f"{', '.join(configuration) or 'no state'}; the events it may be sent now: {shown}"
            )
        seq = engine.send(instance_id, event, data)
        return f"accepted {event!r} for {instance_id} as inbox message {seq}; a worker processes it"

    return await _act(request, f"/instances/{instance_id}", send)


async def cancel_action(request: Request) -> Response:
    """Ask an instance (and its children) to stop."""
    instance_id = _instance_id(request.path_params["id"])

    def cancel(engine: Engine, form: FormData) -> str:
        reason = _text(form, "reason").strip() or "cancelled from the console"
        if engine.instance(instance_id).record.status.finished:
            raise ValueError(f"{instance_id} has finished; there is nothing to cancel")
        if not engine.cancel(instance_id, reason):
            return f"a cancel of {instance_id} was requested already"
        return f"cancel of {instance_id} requested ({reason!r}); it stops when a worker next runs it"

    return await _act(request, f"/instances/{instance_id}", cancel)


def _root(engine: Engine, instance_id: UUID, verb: str) -> None:
    record = engine.instance(instance_id).record
    if record.parent is not None:
        raise ValueError(f"{instance_id} is a child; {verb} applies to a whole call tree: use its root")


async def terminate_action(request: Request) -> Response:
    """End a call tree without running it (roots only)."""
    instance_id = _instance_id(request.path_params["id"])

    def terminate(engine: Engine, form: FormData) -> str:
        _root(engine, instance_id, "terminate")
        reason = _text(form, "reason").strip() or "terminated from the console"
        ended = engine.terminate(instance_id, reason)
        return f"terminated the call tree of {instance_id}: {ended} instance(s) cancelled"

    return await _act(request, f"/instances/{instance_id}", terminate)


async def resolve_action(request: Request) -> Response:
    """Unpark a parked root whose call tree validates again."""
    instance_id = _instance_id(request.path_params["id"])

    def resolve(engine: Engine, form: FormData) -> str:
        _root(engine, instance_id, "resolve")
        if engine.instance(instance_id).record.status is not InstanceStatus.PARKED:
            raise ValueError(f"{instance_id} is not parked; there is nothing to resolve")
        reason = _text(form, "reason").strip() or "resolved from the console"
        checkpoint = engine.resolve(instance_id, reason)
        state = "not parked any more" if checkpoint is None else checkpoint.status.value
        return f"resolved {instance_id}: it is {state}"

    return await _act(request, f"/instances/{instance_id}", resolve)


async def migrate_action(request: Request) -> Response:
    """Apply a migration whose dry run this console showed (the form carries the dry run's proof)."""
    console: Console = request.app.state.console
    name = request.path_params["name"]

    def migrate(engine: Engine, form: FormData) -> str:
        mapping = parse_mapping(_text(form, "mapping"))
        if not console.secrets.check_proof(
            form.get("proof"), "migrate", name, json.dumps(mapping, sort_keys=True)
        ):
            raise ValueError("this migration's dry run was not shown by this console; run the dry run first")
        return apply_migration(engine, name, mapping)

    return await _act(request, f"/charts/{name}", migrate)


# --------------------------------------------------------------- the app


def create_app(
    storage: Storage | str,
    *,
    charts: Iterable[Chart[Any]] = (),
    read_only: bool = False,
    token: str | None = None,
) -> Starlette:
    """The console over ``storage`` (a :class:`Storage` or a SQLite path or URL).

    ``charts`` are the charts the instances were started with (optional:
    without them the console draws the shapes the store recorded, and shows
    no decoded ResumePlan). With ``read_only`` no action is offered and
    every POST is refused; with ``token`` every request must carry it. The
    engine opens when the application starts (its lifespan) and closes when
    it stops.
    """
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
        return PlainTextResponse(exc.message + "\n", status_code=exc.status)

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
    app = Starlette(routes=routes, lifespan=lifespan, exception_handlers={Refused: refused})
    app.state.console = console
    app.state.templates = _environment()
    app.add_middleware(Guard, secrets=secrets, read_only=read_only)
    return app
