"""The reading commands: ``list``, ``show``, ``tree``, ``timeline``, ``plan``, ``parked``.

They only read the store, through the operator's read model
(:mod:`incarnate._inspect`), and each prints text or, with ``--json``, one
JSON document whose keys ``docs/reference/cli.md`` documents.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import click

from aggregates import Activation, Instance, InstanceKind, InstanceStatus
from incarnate import _inspect, _moments
from incarnate.cli._output import emit_json, moment, note, out, table, when
from incarnate.cli._output import tree as print_tree
from incarnate.cli._store import (
    StoreOptions,
    id_argument,
    instance,
    instance_id,
    json_option,
    opened,
    slot,
    store_options,
)
from incarnate.errors import CommandError, CommandFailed, without_traceback
from projections import Checkpoint, CheckpointError, ListingRow, render_timeline
from projections import timeline as timeline_of
from statechart import JsonValue

# ------------------------------------------------------------------- list

_DURATION = re.compile(r"(?P<amount>\d+(?:\.\d+)?)(?P<unit>[smhd])")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
LIST_LIMIT = 50
"""How many rows ``list`` prints unless ``--limit`` says otherwise."""


def since_of(text: str, now: float) -> float:
    """The store time ``--since`` names: a duration back from ``now`` (``10m``, ``2h``, ``1d``) or a time."""
    match = _DURATION.fullmatch(text.strip())
    if match is not None:
        return now - float(match["amount"]) * _SECONDS[match["unit"]]
    try:
        moment_ = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--since {text!r} is neither a duration nor a time; write a number and a unit (s, m, h or "
            "d), e.g. --since 10m, or an ISO time, e.g. --since 2026-12-03T09:00:00Z"
        ) from None
    if moment_.tzinfo is None:
        moment_ = moment_.replace(tzinfo=UTC)  # the store's times are UTC
    return moment_.timestamp()


def _row(row: ListingRow) -> tuple[str, ...]:
    short = str(row.root)[:8]
    parent = "-" if row.parent is None else str(row.parent)[:8]
    return (str(row.id), short, parent, row.kind, row.name, row.status, row.owner, moment(row.changed_at))


@click.command("list", short_help="List the instances in flight (or all, or filtered).")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(_inspect.STATUSES),
    metavar="STATUS",
    help=f"keep the instances with this status (repeatable): {', '.join(_inspect.STATUSES)}",
)
@click.option("--chart", metavar="NAME", help="keep the instances of this chart (or task) name")
@click.option("--roots", is_flag=True, help="list roots only")
@click.option(
    "--state",
    "in_state",
    metavar="STATE",
    help="keep the chart instances whose current configuration holds this state (with --chart NAME)",
)
@click.option("--owner", metavar="ENGINE", help="keep the instances this engine owns")
@click.option(
    "--since",
    metavar="WHEN",
    help="keep the instances changed since then: a duration back from now (30s, 10m, 2h, 1d) or an "
    "ISO-8601 time (UTC unless it names a zone)",
)
@click.option(
    "--limit",
    type=int,
    default=LIST_LIMIT,
    show_default=True,
    metavar="N",
    help="print at most N rows, the most recently changed first (0: all)",
)
@click.option("--all", "all_", is_flag=True, help="list finished instances too")
@json_option
@store_options()
def list_(
    statuses: tuple[str, ...],
    chart: str | None,
    roots: bool,
    in_state: str | None,
    owner: str | None,
    since: str | None,
    limit: int,
    all_: bool,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """List the instances in flight (or all), from the recovery listing, most recently changed first."""
    if limit < 0:
        raise CommandError(f"--limit must be 0 (no limit) or more, got {limit}")
    if in_state is not None and chart is None:
        raise CommandError(
            f"--state {in_state!r} needs --chart NAME: state ids belong to a chart, "
            f"e.g. incarnate list --chart order --state {in_state}"
        )
    with opened(StoreOptions(db, charts, tasks)) as engine:
        known = engine.charts.get(chart) if chart is not None else None
        if in_state is not None and known is not None and in_state not in known.index:
            raise CommandError(
                f"chart {chart!r} has no state {in_state!r}; its states are {', '.join(known.ids[1:])}"
            )
        after = None if since is None else since_of(since, engine.clock.now())
        page = _inspect.list_instances(
            engine,
            statuses=statuses or None,
            chart=chart,
            roots=roots,
            owner=owner,
            since=after,
            in_flight=None if all_ or statuses else True,
            limit=limit,
            in_state=in_state,
        )
        details = _inspect.row_details(engine, page.rows) if as_json else None
        where = engine.storage.describe()
    if as_json:
        emit_json(page.to_json(details))
        return 0
    if not page.rows:
        if statuses or chart or owner or since or in_state:
            out(f"no {'root ' if roots else ''}instances match in {where}")
        else:
            what = "instances" if all_ else "instances in flight"
            out(f"no {'root ' if roots else ''}{what} in {where}")
        return 0
    headers = ("ID", "ROOT", "PARENT", "KIND", "NAME", "STATUS", "OWNER", "CHANGED")
    table(headers, [_row(row) for row in page.rows])
    if page.left_off:
        note(
            f"{len(page.rows)} of {page.total} shown (--limit {limit}); {page.left_off} more left off: "
            "pass --limit 0 for all, or narrow with --status, --chart or --since"
        )
    return 0


# ------------------------------------------------------------------- show


def _json_text(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def render_detail(detail: _inspect.InstanceDetail) -> list[str]:
    """An instance's detail as ``name: value`` lines."""
    lines = [f"{detail.kind} {detail.name!r} {detail.id}"]

    def field(name: str, value: str) -> None:
        lines.append(f"{name + ':':<15}{value}")

    field("status", detail.status)
    field("owner", f"{detail.owner or '-'} (incarnation {detail.incarnation})")
    field("root", "itself" if detail.is_root else str(detail.root))
    field("parent", "-" if detail.parent is None else str(detail.parent))
    field("slot", "-" if detail.slot is None else f"{detail.slot}, attempt {detail.attempt}")
    field("version", f"{detail.version} ({detail.steps} step(s))")
    field("changed", when(detail.changed_at))
    if detail.kind == InstanceKind.CHART.value:
        field("configuration", ", ".join(detail.configuration) or "-")
    field("input", _json_text(detail.input))
    if detail.kind == InstanceKind.CHART.value:
        field("context", _json_text(detail.context))
    field("output", _json_text(detail.output))
    field("error", "-" if detail.error is None else _json_text(detail.error_shown))
    if detail.traceback is not None:
        lines.append("traceback:")
        lines.extend(f"  {line}" for line in detail.traceback.rstrip("\n").splitlines())
    field("incidents", str(len(detail.incidents)) if detail.incidents else "none")
    for incident in detail.incidents:
        parked = ", parked" if incident.parked else ""
        lines.append(f"  {incident.kind} (version {incident.at_version}{parked}): {incident.detail}")
    field("timers", str(len(detail.timers)) if detail.timers else "none")
    lines.extend(f"  {timer.event!r} at {when(timer.deadline)} ({timer.id})" for timer in detail.timers)
    field("cancel", "-" if detail.cancel_reason is None else f"requested ({detail.cancel_reason!r})")
    field("inbox", f"{detail.pending_messages} pending message(s)")
    field("children", f"{detail.children} retained")
    return lines


_AT_HELP = (
    "as it was at version K of the instance (1 is its creation), or with --tree at position K of its "
    "call tree's events interleaved by time; see `incarnate timeline ID --at K`"
)


@click.command(short_help="Show everything the store holds about one instance.")
@id_argument
@click.option("--at", "at", type=int, metavar="K", help=_AT_HELP)
@click.option("--tree", "whole_tree", is_flag=True, help="with --at: every instance of its call tree then")
@json_option
@store_options()
def show(
    ident: str,
    at: int | None,
    whole_tree: bool,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Show one instance: status, owner, slot, input, context, configuration, output, error, timers.

    With --at K, the instance as it was at version K (with --tree, its call
    tree at position K): configuration, context, armed timers, inbox and
    retained children then.
    """
    if whole_tree and at is None:
        raise CommandError("--tree needs --at K: `show` prints the call tree as it was at position K")
    with opened(StoreOptions(db, charts, tasks)) as engine:
        if at is not None:
            found = engine.at(instance_id(engine, ident), at, tree=whole_tree)
            if as_json:
                emit_json(_moments.moment_json(found))
            else:
                out(_moments.render_moment(found))
            return 0
        detail = _inspect.instance_detail(engine, instance_id(engine, ident))
    if as_json:
        emit_json(detail.to_json())
    else:
        out("\n".join(render_detail(detail)))
    return 0


# ------------------------------------------------------------------- tree


@click.command(short_help="Show the call tree under an instance.")
@id_argument
@json_option
@store_options()
def tree(ident: str, as_json: bool, db: str | None, charts: str | None, tasks: str | None) -> int:
    """Show the call tree under an instance, finished children included.

    With --charts, each chart instance's configuration (its atomic states)
    follows its status. The error of each failed instance follows the tree.
    """
    with opened(StoreOptions(db, charts, tasks)) as engine:
        node = _inspect.call_tree_of(engine, instance_id(engine, ident))
        failed = [
            (n, engine.instance(n.id).record.error) for n in node.walk() if n.status is InstanceStatus.FAILED
        ]
    if as_json:
        emit_json(_inspect.tree_json(node))
        return 0
    print_tree(node)
    for n, error in failed:  # the tree says "failed"; say why, as `show` does
        where = "root" if n.ref is None else f"{slot(n.ref.site, n.ref.key)}#{n.ref.generation}"
        said = without_traceback(error)  # its traceback is long: `incarnate show ID` prints it
        out(f"error of {n.kind} {n.name!r} {where} id {str(n.id)[:8]}: {_json_text(said)}")
    return 0


# --------------------------------------------------------------- timeline


@click.command(short_help="Show an instance's (or its call tree's) events by time.")
@id_argument
@click.option("--tree", "whole_tree", is_flag=True, help="the events of every instance of its call tree")
@click.option(
    "--at",
    "at",
    type=int,
    metavar="K",
    help="number the events, mark position K and show the "
    "instance (with --tree: its call tree) as it was then",
)
@json_option
@store_options()
def timeline(
    ident: str,
    whole_tree: bool,
    at: int | None,
    as_json: bool,
    db: str | None,
    charts: str | None,
    tasks: str | None,
) -> int:
    """Show an instance's stored events (or its call tree's) in time order.

    With --at K, the events are numbered (a version of the instance, or with
    --tree a position in the call tree's history), K is marked with ``>``,
    and the instance as it was at K follows (see ``show --at``).
    """
    with opened(StoreOptions(db, charts, tasks)) as engine:
        found = instance(engine, ident)
        if at is not None:
            moment_ = engine.at(found.id, at, tree=whole_tree)
            if as_json:
                emit_json(_moments.moment_json(moment_, history=True))
            else:
                out(_moments.render_positions(moment_))
                out("")
                out(_moments.render_moment(moment_))
            return 0
        instances, events = _inspect.tree_events(engine, found.id, tree=whole_tree)
    names = {i.id: _inspect.label(i) for i in instances}
    entries = timeline_of(events)
    if as_json:
        emit_json(
            {
                "id": str(found.id),
                "tree": whole_tree,
                "instances": [{"id": str(i.id), "label": names[i.id]} for i in instances],
                "events": _inspect.timeline_json(instances, events),
            }
        )
        return 0
    scope = f"the call tree of {found.id} ({len(instances)} instances)" if whole_tree else str(found.id)
    start = f", from {events[0].timestamp.isoformat(timespec='milliseconds')}" if events else ""
    out(f"timeline of {scope}: {len(events)} events{start}")
    out(render_timeline(entries, names=names))
    return 0


# ------------------------------------------------------------------- plan


@click.command(short_help="Show an instance's validated ResumePlan.")
@id_argument
@json_option
@store_options(charts="decode the checkpoint's snapshot")
def plan(ident: str, as_json: bool, db: str | None, charts: str | None, tasks: str | None) -> int:
    """Show an instance's ResumePlan: its validated checkpoint and activations."""
    with opened(StoreOptions(db, charts, tasks), charts_for="decode the checkpoint's snapshot") as engine:
        found = instance(engine, ident)
        record = found.record
        if record.kind is InstanceKind.CHART and record.name not in engine.charts:
            raise CommandError(
                f"chart {record.name!r} of {found.id} is not among the charts of {charts!r} "
                f"({', '.join(sorted(engine.charts))}); name the charts it was started with"
            )
        try:
            checkpoint = engine.plan(found.id)
        except CheckpointError as err:
            raise CommandFailed(f"the ResumePlan of {found.id} does not validate: {err}") from err
    if as_json:
        emit_json(plan_json(found, checkpoint))
    else:
        out(render_plan(found, checkpoint))
    return 0


def plan_json(found: Instance, checkpoint: Checkpoint) -> dict[str, JsonValue]:
    """A ResumePlan as JSON (see the reference for the keys)."""
    snapshot = checkpoint.snapshot
    return {
        "id": str(checkpoint.instance_id),
        "kind": found.record.kind.value,
        "name": found.record.name,
        "status": checkpoint.status.value,
        "version": checkpoint.version,
        "configuration": None if snapshot is None else list(snapshot.configuration),
        "timers": []
        if snapshot is None
        else [
            {"event": t.event.name, "deadline": _inspect.iso(t.deadline), "deadline_epoch": t.deadline}
            for t in snapshot.timers
        ],
        "activations": [_activation_json(a) for a in checkpoint.activations],
    }


def _activation_json(activation: Activation) -> dict[str, JsonValue]:
    return {
        "site": activation.site,
        "key": activation.key,
        "generation": activation.generation,
        "ref": str(activation.ref),
        "child_id": str(activation.child_id),
        "kind": activation.kind.value,
        "name": activation.name,
        "state": activation.state.value,
        "attempt": activation.attempt,
        "armed_step": activation.armed_step,
        "provenance": activation.provenance.value,
        "journal": [
            {
                "attempt": entry.attempt,
                "generation": entry.ref.generation,
                "error": entry.error,
                "retry_due": _inspect.iso(entry.deadline),
                "retry_due_epoch": entry.deadline,
            }
            for entry in activation.journal
        ],
    }


def render_plan(found: Instance, checkpoint: Checkpoint) -> str:
    """A ResumePlan as text: status, version, configuration, timers and each activation."""
    record = found.record
    snapshot = checkpoint.snapshot
    lines = [
        f"ResumePlan of {checkpoint.instance_id} ({record.kind.value} {record.name!r})",
        f"status:        {checkpoint.status.value}",
        f"version:       {checkpoint.version}",
    ]
    if snapshot is None:
        lines.append("configuration: -")
    else:
        lines.append(f"configuration: {', '.join(snapshot.configuration)}")
        timers = [f"{t.event.name!r} at {when(t.deadline)}" for t in snapshot.timers]
        lines.append(f"timers:        {'; '.join(timers) if timers else 'none'}")
    lines.append(f"activations:   {len(checkpoint.activations)}")
    for activation in checkpoint.activations:
        lines.extend(_render_activation(activation))
    return "\n".join(lines)


def _render_activation(activation: Activation) -> list[str]:
    lines = [
        f"  {slot(activation.site, activation.key)}",
        f"    generation:    {activation.generation}",
        f"    Ref:           {activation.ref}",
        f"    child:         {activation.kind.value} {activation.name!r} {activation.child_id}",
        f"    state:         {activation.state.value}",
        f"    attempt:       {activation.attempt}",
        f"    armed step:    {activation.armed_step}",
        f"    provenance:    {activation.provenance.value}",
        f"    retry journal: {'none' if not activation.journal else len(activation.journal)}",
    ]
    for entry in activation.journal:
        error = json.dumps(entry.error, sort_keys=True)
        lines.append(
            f"      attempt {entry.attempt} (generation {entry.ref.generation}) failed: {error}; "
            f"retry due {when(entry.deadline)}"
        )
    return lines


# ----------------------------------------------------------------- parked


PARKED_HINT = (
    "Check what the charts you deploy would do with them: incarnate check CHARTS --db DB; then migrate a "
    "whole chart at once: incarnate migrate --chart NAME --map OLD=NEW --dry-run --charts CHARTS --db DB "
    "(drop --dry-run to write it), or resolve or terminate a root: incarnate resolve ID, "
    "incarnate terminate ID."
)


@click.command()
@json_option
@store_options()
def parked(as_json: bool, db: str | None, charts: str | None, tasks: str | None) -> int:
    """List the roots held for an operator, with their incidents."""
    with opened(StoreOptions(db, charts, tasks)) as engine:
        roots = engine.parked()
        where = engine.storage.describe()
    if as_json:
        emit_json(
            {
                "roots": [
                    {
                        "root": str(held.root),
                        "name": held.name,
                        "incidents": [
                            _inspect.IncidentView(i.kind, i.detail, i.at_version, i.parked).to_json()
                            for i in held.incidents
                        ],
                    }
                    for held in roots
                ]
            }
        )
        return 0
    if not roots:
        out(f"no parked roots in {where}")
        return 0
    for held in roots:
        out(f"{held.root}  chart {held.name!r}  {len(held.incidents)} incident(s)")
        for incident in held.incidents:
            marked = ", parked" if incident.parked else ""
            out(f"  {incident.kind} (version {incident.at_version}{marked}): {incident.detail}")
    out("")
    charts_of = sorted({held.name for held in roots})
    out(f"{len(roots)} parked root(s) of chart(s) {', '.join(map(repr, charts_of))}.")
    out(PARKED_HINT)
    return 0
