"""The console's pages: instances, one instance, the charts, one chart, a migration's dry run.

Each page is also served as JSON with ``?format=json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode
from uuid import UUID

from markupsafe import Markup
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from aggregates import InstanceKind, InstanceStatus
from incarnate._engine import Engine
from incarnate._inspect import (
    STATUSES,
    InstanceDetail,
    Page,
    call_tree_of,
    instance_detail,
    iso,
    list_instances,
    state_counts,
    timeline_json,
    tree_events,
    tree_json,
)
from incarnate.cli._common import redact
from incarnate.console._arrows import guard_names
from incarnate.console._arrows import rows as transition_rows
from incarnate.console._console import (
    BULK_ACTIONS,
    DEFAULT_LIMIT,
    FILTER_KEYS,
    MAX_LIMIT,
    REFRESH_SECONDS,
    Console,
    enabled,
    instance_id_of,
    json_response,
    render,
    shape_of,
    wants_json,
)
from incarnate.console._diagram import diagram_svg
from incarnate.console._migrate import MigrationView, dry_run, parse_mapping
from incarnate.console._security import Refused
from incarnate.errors import UnknownInstance
from projections import Checkpoint, TreeNode
from statechart import JsonValue
from statechart.errors import IncarnateError, UnknownChart

# ---------------------------------------------------------------- the pages


def _filters(request: Request) -> dict[str, Any]:
    """The listing filters of the request's query string, validated; raises :class:`Refused` (400)."""
    return filters_of(request.query_params)


def filters_of(query: QueryParams) -> dict[str, Any]:
    """The listing filters of ``query``, validated; raises :class:`Refused` (400)."""
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
    if query.get("in_state") and not query.get("chart"):
        raise Refused(400, "in_state needs a chart: state ids belong to a chart (add chart=NAME)")
    return {
        "statuses": statuses or None,
        "chart": query.get("chart") or None,
        "roots": query.get("roots") in ("1", "on", "true"),
        "owner": query.get("owner") or None,
        "prefix": (query.get("q") or "").strip() or None,
        "in_flight": in_flight,
        "in_state": query.get("in_state") or None,
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
        engine.listing.catch_up()
        rows = engine.listing.rows()  # read once: the page and the filters' choices
        page = list_instances(engine, **filters, rows=rows)
        names = sorted({row.name for row in rows} | set(engine.charts))
        owners = sorted({row.owner for row in rows})
        return page, names, owners

    return await console.read(read)


async def instances_page(request: Request) -> Response:
    """``/``: the instances, filtered and paged; ``?format=json`` for the page as JSON."""
    console: Console = request.app.state.console
    page, names, owners = await _listing(console, request)
    if wants_json(request):
        return json_response(page.to_json())
    return render(
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
        filter_items=[(k, v) for k, v in request.query_params.multi_items() if k in FILTER_KEYS and v],
        bulk_actions=BULK_ACTIONS,
    )


async def instances_table(request: Request) -> Response:
    """``/instances/table``: the table alone, for the page's live refresh."""
    console: Console = request.app.state.console
    page, _, _ = await _listing(console, request)
    return render(console, request, "table.html", page=page)


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
    tree = call_tree_of(engine, detail.root)
    instances, events = tree_events(engine, detail.root, tree=True)
    owners = {member.id: member.record.owner for member in instances}
    checkpoint, plan_error = _plan_view(engine, instance_id)
    shape = None
    if instance.record.kind is InstanceKind.CHART:
        shape = shape_of(engine, detail.name, instance.record.fingerprint)
    status = InstanceStatus(detail.status)
    live = status in (InstanceStatus.BORN, InstanceStatus.RUNNING)
    events_offered = enabled(engine, shape, detail.name, detail.configuration) if live else ()
    return {
        "detail": detail,
        "tree": tree,
        "tree_rows": _tree_rows(tree, owners),
        "timeline": timeline_json(instances, events),
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
    instance_id = instance_id_of(request.path_params["id"])
    try:
        view = await console.read(lambda engine: _instance_view(engine, instance_id))
    except UnknownInstance as err:
        raise Refused(404, redact(str(err)), code=err.code) from err
    if wants_json(request):
        return json_response(
            {
                "instance": view["detail"].to_json(),
                "tree": tree_json(view["tree"]),
                "timeline": view["timeline"],
                "plan": view["plan"],
                "plan_error": view["plan_error"],
                "enabled_events": list(view["enabled"]),
            }
        )
    return render(console, request, "instance.html", refresh=REFRESH_SECONDS, **view)


def _chart_view(engine: Engine, name: str) -> dict[str, Any]:
    counts = state_counts(engine, name)
    fingerprint = None
    if name not in engine.charts:
        for row in engine.listing.rows():
            if row.name == name and row.kind == InstanceKind.CHART.value:
                fingerprint = engine.instance(row.id, fresh=False).record.fingerprint
                break
    shape = shape_of(engine, name, fingerprint)
    if shape is None and not counts:
        raise Refused(
            404,
            f"no chart {name!r} is registered with the console or has instances in the store",
            code=UnknownChart.code,
        )
    parked = sum(
        1 for row in engine.listing.rows(in_flight=True, roots=True) if row.name == name and row.parked
    )
    active = [state for state, count in counts.items() if count]
    return {
        "name": name,
        "counts": counts,
        "registered": name in engine.charts,
        "parked": parked,
        "diagram": None
        if shape is None
        else Markup(diagram_svg(shape, active, counts=counts, guards=guard_names(engine.charts.get(name)))),
        "transitions": [] if shape is None else transition_rows(shape, guard_names(engine.charts.get(name))),
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
    charts = await console.read(_charts_view)
    if wants_json(request):
        return json_response({"charts": charts})
    return render(console, request, "charts.html", charts=charts)


async def chart_page(request: Request) -> Response:
    """``/charts/{name}``: the chart's diagram with how many unfinished instances are in each state."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    view = await console.read(lambda engine: _chart_view(engine, name))
    if wants_json(request):
        return json_response({"chart": name, "registered": view["registered"], "counts": view["counts"]})
    return render(console, request, "chart.html", refresh=REFRESH_SECONDS, **view)


async def chart_diagram(request: Request) -> Response:
    """``/charts/{name}/diagram``: the counted diagram alone, for the chart page's live refresh."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    view = await console.read(lambda engine: _chart_view(engine, name))
    return HTMLResponse(f'<div id="diagram">{view["diagram"] or ""}</div>')


async def migrate_page(request: Request) -> Response:
    """``/charts/{name}/migrate?mapping=…``: the dry run of a migration, and the button that applies it."""
    console: Console = request.app.state.console
    name = request.path_params["name"]
    text = request.query_params.get("mapping", "")
    try:
        mapping = parse_mapping(text)
    except ValueError as err:
        return render(console, request, "migrate.html", 400, name=name, text=text, error=str(err), view=None)
    view: MigrationView = await console.read(lambda engine: dry_run(engine, name, mapping))
    proof = console.secrets.proof("migrate", name, json.dumps(mapping, sort_keys=True))
    if wants_json(request):
        return json_response(view.to_json())
    return render(console, request, "migrate.html", name=name, text=text, error=None, view=view, proof=proof)
