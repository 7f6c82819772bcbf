"""Bulk actions: send, cancel, terminate or migrate every instance a filter of the instance list selects.

A bulk action is two requests. ``GET /bulk`` with the list's filters and the
action is the **dry run**: which instances the filter selects (every page,
not only the one shown), which of them the action applies to, which it
leaves out and why, and the words to type to confirm (``cancel 42``). Only
that page carries the form that acts; the form carries a proof (see
:meth:`~incarnate.console._security.Secrets.proof`) that this console showed
the dry run of exactly this action, these parameters, this filter and this
set of instances. ``POST /bulk`` takes the selection anew: when it is not the
set the dry run showed (an instance started, finished or moved meanwhile),
nothing is done and the operator is asked to look again. Each instance is
then acted on in turn; one that fails is reported and the others go on.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode
from uuid import UUID

import attrs
from starlette.datastructures import FormData, QueryParams
from starlette.requests import Request
from starlette.responses import Response

from aggregates import InstanceKind, InstanceStatus
from incarnate._engine import Engine
from incarnate._inspect import current_states, list_instances
from incarnate._migration import Verdict, apply, check
from incarnate.cli._common import parse_json_option
from incarnate.console._actions import act
from incarnate.console._console import (
    BULK_ACTIONS,
    FILTER_KEYS,
    Console,
    enabled,
    json_response,
    render,
    shape_of,
    wants_json,
)
from incarnate.console._migrate import parse_mapping
from incarnate.console._pages import filters_of
from incarnate.console._security import Refused
from projections import ListingRow
from statechart import JsonValue
from statechart.errors import IncarnateError

MAX_TARGETS = 10_000
"""The most instances one bulk action acts on: a larger selection is refused, to be narrowed."""

SAMPLE = 20
"""How many of the instances acted on the dry run lists."""

_PARAMS = {
    "send": ("event", "data"),
    "cancel": ("reason",),
    "terminate": ("reason",),
    "migrate": ("mapping",),
}


@attrs.frozen
class BulkPlan:
    """A bulk action's dry run: what the filter selects, what the action applies to, what it leaves out."""

    action: str
    params: dict[str, str]
    filter_query: str
    """The filters as a query string (``status=running&chart=gate``), in a canonical order."""
    selected: int
    """How many instances the filter selects, on every page."""
    targets: tuple[ListingRow, ...]
    """The instances the action applies to, in the list's order (newest change first)."""
    skipped: tuple[tuple[UUID, str], ...]
    """The selected instances the action leaves out, each with why."""
    error: str | None = None
    """Why the action cannot run on this selection at all (nothing is then offered)."""

    @property
    def digest(self) -> str:
        """A fingerprint of the set of instances acted on: the apply refuses a set that changed."""
        ids = "\n".join(sorted(str(row.id) for row in self.targets))
        return hashlib.sha256(ids.encode()).hexdigest()

    @property
    def confirmation(self) -> str:
        """What the operator types to confirm: the action and how many instances it acts on."""
        return f"{self.action} {len(self.targets)}"

    @property
    def reasons(self) -> dict[str, int]:
        """How many selected instances are left out for each reason, most frequent first."""
        return dict(Counter(reason for _, reason in self.skipped).most_common())

    @property
    def sample(self) -> tuple[ListingRow, ...]:
        """The first :data:`SAMPLE` instances acted on."""
        return self.targets[:SAMPLE]

    @property
    def applicable(self) -> bool:
        """Whether acting would do anything."""
        return self.error is None and bool(self.targets)

    def to_json(self) -> dict[str, JsonValue]:
        """The dry run as JSON."""
        return {
            "action": self.action,
            "params": dict[str, JsonValue](self.params),
            "filter": self.filter_query,
            "selected": self.selected,
            "targets": [str(row.id) for row in self.targets],
            "skipped": [{"id": str(i), "reason": r} for i, r in self.skipped],
            "reasons": dict[str, JsonValue](self.reasons),
            "confirmation": self.confirmation,
            "error": self.error,
        }


def _canonical_filters(items: list[tuple[str, str]]) -> str:
    """The filters among ``items`` as a query string, empty values dropped, in a stable order."""
    kept = sorted((k, v) for k, v in items if k in FILTER_KEYS and v)
    return urlencode(kept)


def _action_of(value: object) -> str:
    if value not in BULK_ACTIONS:
        raise Refused(400, f"unknown bulk action {value!r}; choose among {', '.join(BULK_ACTIONS)}")
    assert isinstance(value, str)
    return value


def _params(action: str, source: Mapping[str, Any]) -> dict[str, str]:
    values = {name: source.get(name) for name in _PARAMS[action]}
    return {name: value.strip() for name, value in values.items() if isinstance(value, str) and value.strip()}


def _plan(engine: Engine, action: str, params: dict[str, str], filter_query: str) -> BulkPlan:
    """The dry run of ``action`` over the instances ``filter_query`` selects; writes nothing."""
    filters = {**filters_of(QueryParams(filter_query)), "limit": None, "offset": 0}  # every page
    rows = list_instances(engine, **filters).rows

    def refused(error: str) -> BulkPlan:
        return BulkPlan(action, params, filter_query, len(rows), (), (), error)

    if len(rows) > MAX_TARGETS:
        return refused(
            f"the filter selects {len(rows)} instances; a bulk action acts on at most {MAX_TARGETS} at "
            "once: narrow the filter (by chart, status, owner or state) and act on each part"
        )
    targets: list[ListingRow] = []
    skipped: list[tuple[UUID, str]] = []
    if action == "send":
        event = params.get("event", "")
        if not event:
            return refused("name the event to send")
        try:
            if "data" in params:
                parse_json_option("data", params["data"])
        except IncarnateError as err:
            return refused(str(err))
        for row in rows:
            why = _why_not_send(engine, row, event)
            if why is None:
                targets.append(row)
            else:
                skipped.append((row.id, why))
    elif action in ("cancel", "terminate"):
        for row in rows:
            if row.finished:
                skipped.append((row.id, f"finished ({row.status})"))
            elif action == "terminate" and row.parent is not None:
                skipped.append((row.id, "a child: terminate ends whole call trees, select their roots"))
            else:
                targets.append(row)
    else:
        return _plan_migration(engine, params, filter_query, rows)
    return BulkPlan(action, params, filter_query, len(rows), tuple(targets), tuple(skipped))


def _why_not_send(engine: Engine, row: ListingRow, event: str) -> str | None:
    """Why ``event`` cannot be sent to ``row``'s instance now, or None when it can."""
    if row.kind != InstanceKind.CHART.value:
        return "a task: it takes no events"
    if row.status not in (InstanceStatus.BORN.value, InstanceStatus.RUNNING.value):
        return f"{row.status}: it takes no events"
    configuration = current_states(engine, row)
    shape = shape_of(engine, row.name, None)
    if event not in enabled(engine, shape, row.name, configuration):
        return f"no transition on {event!r} from its configuration"
    return None


def _plan_migration(
    engine: Engine, params: dict[str, str], filter_query: str, rows: Sequence[ListingRow]
) -> BulkPlan:
    """Which selected instances a migration under ``params['mapping']`` moves (verdict *migrates*)."""
    charts = {row.name for row in rows if row.kind == InstanceKind.CHART.value}

    def refused(error: str) -> BulkPlan:
        return BulkPlan("migrate", params, filter_query, len(rows), (), (), error)

    if len(charts) > 1 or not dict(parse_qsl(filter_query)).get("chart"):
        return refused("a migration maps the states of one chart: filter the list by chart first")
    try:
        mapping = parse_mapping(params.get("mapping", ""))
        ids = {row.id for row in rows}
        verdicts = check(engine.parts, chart=next(iter(charts), None), mapping=mapping, ids=ids)
    except (IncarnateError, ValueError) as err:
        return refused(str(err))
    judged = {v.instance_id: v for v in verdicts}
    targets: list[ListingRow] = []
    skipped: list[tuple[UUID, str]] = []
    for row in rows:
        verdict = judged.get(row.id)
        if verdict is None:
            skipped.append((row.id, "not live: nothing to migrate"))
        elif verdict.verdict is Verdict.MIGRATES:
            targets.append(row)
        else:
            reasons = "; ".join(verdict.reasons)
            skipped.append((row.id, f"{verdict.verdict.value}{': ' + reasons if reasons else ''}"))
    return BulkPlan("migrate", params, filter_query, len(rows), tuple(targets), tuple(skipped))


def _act_on(engine: Engine, plan: BulkPlan) -> str:
    """Run ``plan`` on each of its instances; what happened, in one sentence."""
    params = plan.params
    if plan.action == "migrate":
        mapping = parse_mapping(params.get("mapping", ""))
        chart = plan.targets[0].name
        report = apply(
            engine.parts,
            chart=chart,
            mapping=mapping,
            ids={row.id for row in plan.targets},
            reason="migrated from the console (bulk)",
        )
        skipped = f"; {len(report.skipped)} skipped (written concurrently)" if report.skipped else ""
        return (
            f"bulk migrate of chart {chart!r} (batch {report.batch}): {len(report.migrated)} of "
            f"{len(plan.targets)} instance(s) migrated, {len(report.resolved)} parked root(s) "
            f"resolved{skipped}"
        )
    done = 0
    failures: list[str] = []
    data: JsonValue = parse_json_option("data", params["data"]) if "data" in params else None
    reason = params.get("reason") or f"{plan.action} from the console (bulk)"
    for row in plan.targets:
        try:
            if plan.action == "send":
                engine.send(row.id, params["event"], data)
            elif plan.action == "cancel":
                engine.cancel(row.id, reason)
            else:
                engine.terminate(row.id, reason)
            done += 1
        except (IncarnateError, ValueError, LookupError) as err:
            failures.append(f"{str(row.id)[:8]}: {err}")
    verb = {
        "send": f"sent {params.get('event')!r} to",
        "cancel": "asked to cancel",
        "terminate": "terminated",
    }
    said = f"bulk {plan.action}: {verb[plan.action]} {done} of {len(plan.targets)} instance(s)"
    if failures:
        shown = "; ".join(failures[:5]) + ("; …" if len(failures) > 5 else "")
        said += f"; {len(failures)} failed: {shown}"
    return said


# ---------------------------------------------------------------- routes


async def bulk_page(request: Request) -> Response:
    """``GET /bulk``: the dry run of an action over the list's filters; ``?format=json`` as JSON."""
    console: Console = request.app.state.console
    query = request.query_params
    action = _action_of(query.get("action"))
    params = _params(action, query)
    filter_query = _canonical_filters(list(query.multi_items()))
    plan = await console.read(lambda engine: _plan(engine, action, params, filter_query))
    if wants_json(request):
        return json_response(plan.to_json())
    return render(
        console,
        request,
        "bulk.html",
        plan=plan,
        proof=console.secrets.proof(*_proof_parts(plan)),
        reasons=plan.reasons,
        filter_items=parse_qsl(plan.filter_query),
    )


def _proof_parts(plan: BulkPlan) -> tuple[str, ...]:
    """What a bulk dry run's proof covers: the action, its parameters, the filter and the selected set."""
    return ("bulk", plan.action, json.dumps(plan.params, sort_keys=True), plan.filter_query, plan.digest)


async def bulk_action(request: Request) -> Response:
    """``POST /bulk``: act, when the proof, the typed confirmation and the selection all match the dry run."""
    console: Console = request.app.state.console
    form = await request.form()
    filter_query = _canonical_filters([(k, v) for k, v in form.multi_items() if isinstance(v, str)])

    def bulk(engine: Engine, form: FormData) -> str:
        action = _action_of(form.get("action"))
        plan = _plan(engine, action, _params(action, form), filter_query)
        if plan.error is not None:
            raise ValueError(f"nothing was done: {plan.error}")
        if not console.secrets.check_proof(form.get("proof"), *_proof_parts(plan)):
            raise ValueError(
                f"nothing was done: the instances this filter selects for {action} are not the ones the "
                f"dry run showed (they changed since, or no dry run was shown); {len(plan.targets)} would be "
                "acted on now: run the dry run again"
            )
        typed = form.get("confirm")
        if not isinstance(typed, str) or typed.strip() != plan.confirmation:
            raise ValueError(
                f"nothing was done: type {plan.confirmation!r} in the confirmation box to confirm"
            )
        return _act_on(engine, plan)

    return await act(request, f"/?{filter_query}" if filter_query else "/", bulk)
