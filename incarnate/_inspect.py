"""The operator's read model: what the CLI and the console show of a store, computed once.

Every view here reads the store through an :class:`Engine` that runs no
work: the listing (caught up first) for lists and filters, the instance
aggregates for details. Nothing here decodes a snapshot through a chart
unless a chart is registered for it: the stored snapshot data (JSON) is
shown as it is, so a console or a CLI opened without ``--charts`` still
shows an instance's context, configuration and timers.

Each value has ``to_json()`` with stable snake_case keys: ids are strings,
times are ISO-8601 UTC strings with milliseconds (and ``*_epoch`` floats
where a client may compute with them). The keys are documented in
``docs/reference/cli.md``; the CLI's ``--json`` output and the console's
JSON views are these documents.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import attrs

from aggregates import Instance, InstanceKind, InstanceStatus
from incarnate._reads import embedded_copy
from incarnate.errors import UnknownInstance, without_traceback
from projections import ListingRow, TreeNode, born, call_tree, embedded_tasks, instance_at, timeline
from statechart import Chart, JsonValue
from statechart.errors import CodecError
from statechart.shape import Shape

if TYPE_CHECKING:
    from incarnate._engine import Engine

STATUSES: tuple[str, ...] = tuple(s.value for s in InstanceStatus)
"""Every status a listing row can have (``parked`` and ``orphan`` included)."""

INTERNAL_EVENT_PREFIXES = ("done.", "error.")
"""Events the engine raises itself: an operator never sends them."""


def iso(epoch: float | None) -> str | None:
    """A store time (seconds since the epoch) as an ISO-8601 UTC string with milliseconds."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds")


# ------------------------------------------------------------------ lists


@attrs.frozen
class Page:
    """One page of listing rows that passed a filter, and how many passed in all."""

    rows: tuple[ListingRow, ...]
    total: int
    offset: int = 0
    limit: int | None = None

    @property
    def left_off(self) -> int:
        """How many rows that passed the filter are not on this page (after it)."""
        return max(0, self.total - self.offset - len(self.rows))

    def to_json(self, details: Mapping[UUID, Mapping[str, JsonValue]] | None = None) -> dict[str, JsonValue]:
        """The page as a JSON document: ``total``, ``offset``, ``limit``, ``left_off`` and ``rows``.

        ``details`` (see :func:`row_details`) adds each row's start time and configuration.
        """
        rows = [row_json(row) for row in self.rows]
        if details is not None:
            for row, out in zip(self.rows, rows, strict=True):
                out.update(details.get(row.id, {}))
        return {
            "total": self.total,
            "offset": self.offset,
            "limit": self.limit,
            "left_off": self.left_off,
            "rows": list[JsonValue](rows),
        }


def row_details(engine: Engine, rows: Iterable[ListingRow]) -> dict[UUID, dict[str, JsonValue]]:
    """What the listing does not hold, read from each row's instance: when it started, its configuration.

    ``started_at`` (ISO) and ``started_at_epoch`` are the time of its first
    event; ``configuration`` its active states (empty for a task, or an
    instance not started yet). An instance gone from the store is left out.
    """
    out: dict[UUID, dict[str, JsonValue]] = {}
    for row in rows:
        try:
            instance = engine.instance(row.id)
        except UnknownInstance:
            continue
        started = instance.created_on.timestamp()
        parts = instance.record.snapshot_parts or {}
        out[row.id] = {
            "started_at": iso(started),
            "started_at_epoch": started,
            "configuration": [str(state) for state in parts.get("configuration", ())],
        }
    return out


def row_json(row: ListingRow) -> dict[str, JsonValue]:
    """One listing row as JSON: id, root, parent, kind, name, status, owner, version, changed_at."""
    return {
        "id": str(row.id),
        "root": str(row.root),
        "parent": None if row.parent is None else str(row.parent),
        "kind": row.kind,
        "name": row.name,
        "status": row.status,
        "owner": row.owner,
        "version": row.version,
        "changed_at": iso(row.changed_at),
        "changed_at_epoch": row.changed_at,
    }


def list_instances(
    engine: Engine,
    *,
    statuses: Collection[str] | None = None,
    chart: str | None = None,
    roots: bool = False,
    owner: str | None = None,
    prefix: str | None = None,
    since: float | None = None,
    in_flight: bool | None = None,
    limit: int | None = None,
    offset: int = 0,
    in_state: str | None = None,
    rows: Sequence[ListingRow] | None = None,
) -> Page:
    """The listed instances that pass every filter given, newest change first, one page of them.

    ``statuses`` keeps the rows with one of these statuses (see
    :data:`STATUSES`; a status not among them raises ``ValueError`` naming
    the valid ones); ``chart`` the rows of that chart or task name;
    ``roots`` roots only; ``owner`` the rows that engine owns; ``prefix``
    ids that start with it (case-insensitive); ``since`` rows changed at or
    after that store time; ``in_flight`` unfinished (True) or finished
    (False) rows; ``in_state`` the chart instances whose current
    configuration holds that state (read from their stored snapshots).
    ``limit`` None or 0 means every row. ``rows`` are every listing row, when
    the caller has just read them (the listing is then not read again).
    """
    if statuses is not None:
        unknown = sorted(set(statuses) - set(STATUSES))
        if unknown:
            raise ValueError(
                f"unknown status {', '.join(map(repr, unknown))}; choose among {', '.join(STATUSES)}"
            )
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be 0 (no limit) or more, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be 0 or more, got {offset}")
    if rows is None:
        engine.listing.catch_up()
        rows = engine.listing.rows(in_flight=in_flight is True, roots=roots)
    wanted = None if statuses is None else frozenset(statuses)
    lowered = None if prefix is None else prefix.strip().lower()
    rows = [
        row
        for row in rows
        if (not roots or row.parent is None)
        and (in_flight is not True or row.in_flight)
        and (wanted is None or row.status in wanted)
        and (chart is None or row.name == chart)
        and (owner is None or row.owner == owner)
        and (lowered is None or str(row.id).startswith(lowered))
        and (since is None or row.changed_at >= since)
        and (in_flight is not False or row.finished)
    ]
    if in_state is not None:
        rows = [row for row in rows if in_state in current_states(engine, row)]
    # Newest change first; the listing's own order (first appearance) breaks ties.
    order = {row.id: n for n, row in enumerate(rows)}
    rows.sort(key=lambda row: (-row.changed_at, order[row.id]))
    end = None if not limit else offset + limit
    return Page(tuple(rows[offset:end]), len(rows), offset, limit or None)


def state_counts(engine: Engine, chart_name: str) -> dict[str, int]:
    """How many unfinished instances of a chart are in each state (every active state counts).

    Each state of the chart appears, with 0 when no instance is in it; the
    counts come from the stored snapshots, so a state an instance's stored
    configuration names but the registered chart lacks appears too.
    """
    chart = engine.charts.get(chart_name)
    counts: dict[str, int] = dict.fromkeys(chart.ids[1:], 0) if chart is not None else {}
    engine.listing.catch_up()
    for row in engine.listing.rows(in_flight=True):
        if row.name != chart_name:
            continue
        for state in current_states(engine, row):
            counts[state] = counts.get(state, 0) + 1
    return counts


def current_states(engine: Engine, row: ListingRow) -> tuple[str, ...]:
    """The active states of a listed chart instance, from its stored snapshot (none for a task or unread)."""
    if row.kind != InstanceKind.CHART.value:
        return ()
    with contextlib.suppress(UnknownInstance, CodecError):
        snapshot = engine.instance(row.id, fresh=False).record.snapshot_parts
        return tuple((snapshot or {}).get("configuration", ()))
    return ()


# ------------------------------------------------------------ one instance


@attrs.frozen
class TimerView:
    """A pending timer of a stored snapshot."""

    id: str
    event: str
    deadline: float

    def to_json(self) -> dict[str, JsonValue]:
        """``id``, ``event``, ``deadline`` (ISO) and ``deadline_epoch``."""
        return {
            "id": self.id,
            "event": self.event,
            "deadline": iso(self.deadline),
            "deadline_epoch": self.deadline,
        }


@attrs.frozen
class IncidentView:
    """An incident recorded on an instance."""

    kind: str
    detail: str
    at_version: int
    parked: bool

    def to_json(self) -> dict[str, JsonValue]:
        """``kind``, ``detail``, ``at_version`` and ``parked``."""
        return {
            "kind": self.kind,
            "detail": self.detail,
            "at_version": self.at_version,
            "parked": self.parked,
        }


@attrs.frozen
class InstanceDetail:
    """Everything an operator asks of one instance, from its aggregate and the listing."""

    id: UUID
    root: UUID
    parent: UUID | None
    kind: str
    name: str
    status: str
    owner: str
    incarnation: int
    version: int
    steps: int
    site: str | None
    key: str | None
    generation: int | None
    attempt: int
    input: JsonValue
    context: JsonValue
    configuration: tuple[str, ...]
    output: JsonValue
    error: JsonValue
    incidents: tuple[IncidentView, ...]
    timers: tuple[TimerView, ...]
    cancel_reason: str | None
    pending_messages: int
    children: int
    changed_at: float | None

    @property
    def is_root(self) -> bool:
        """Whether the instance is a root (has no parent)."""
        return self.parent is None

    @property
    def traceback(self) -> str | None:
        """The traceback a failed task or action left with its error, when it left one."""
        found = self.error.get("traceback") if isinstance(self.error, dict) else None
        return found if isinstance(found, str) else None

    @property
    def error_shown(self) -> JsonValue:
        """The error without its traceback (which a page shows on its own)."""
        return without_traceback(self.error)

    @property
    def slot(self) -> str | None:
        """``site[key]#generation`` for a child; None for a root."""
        if self.site is None:
            return None
        member = f"[{self.key}]" if self.key else ""
        return f"{self.site}{member}#{self.generation}"

    def to_json(self) -> dict[str, JsonValue]:
        """The detail as JSON; see ``docs/reference/cli.md`` for the keys."""
        return {
            "id": str(self.id),
            "root": str(self.root),
            "parent": None if self.parent is None else str(self.parent),
            "kind": self.kind,
            "name": self.name,
            "status": self.status,
            "owner": self.owner,
            "incarnation": self.incarnation,
            "version": self.version,
            "steps": self.steps,
            "site": self.site,
            "key": self.key,
            "generation": self.generation,
            "attempt": self.attempt,
            "input": self.input,
            "context": self.context,
            "configuration": list(self.configuration),
            "output": self.output,
            "error": self.error,
            "incidents": [i.to_json() for i in self.incidents],
            "timers": [t.to_json() for t in self.timers],
            "cancel_reason": self.cancel_reason,
            "pending_messages": self.pending_messages,
            "children": self.children,
            "changed_at": iso(self.changed_at),
            "changed_at_epoch": self.changed_at,
        }


def _timers(snapshot: dict[str, Any] | None) -> tuple[TimerView, ...]:
    timers: list[TimerView] = []
    for timer in (snapshot or {}).get("timers", ()):
        with contextlib.suppress(KeyError, TypeError, ValueError):
            timers.append(TimerView(str(timer["id"]), str(timer["event"]["name"]), float(timer["deadline"])))
    return tuple(sorted(timers, key=lambda t: t.deadline))


def detail_of(instance: Instance) -> InstanceDetail:
    """The detail of a loaded instance; ``changed_at`` is the time of its last event."""
    record = instance.record
    ref = record.parent
    snapshot = record.snapshot_parts  # the top-level parts: no O(slots) rebuild of the child slots
    return InstanceDetail(
        id=instance.id,
        root=record.root,
        parent=None if ref is None else ref.parent,
        kind=record.kind.value,
        name=record.name,
        status=record.status.value,
        owner=record.owner,
        incarnation=record.incarnation,
        version=instance.version,
        steps=record.steps,
        site=None if ref is None else ref.site,
        key=None if ref is None else ref.key,
        generation=None if ref is None else ref.generation,
        attempt=record.birth.attempt if record.birth is not None else 1,
        input=record.input,
        context=None if snapshot is None else snapshot.get("context"),
        configuration=tuple(str(s) for s in (snapshot or {}).get("configuration", ())),
        output=record.output,
        error=record.error,
        incidents=tuple(IncidentView(i.kind, i.detail, i.at_version, i.parked) for i in record.incidents),
        timers=_timers(snapshot),
        cancel_reason=None if record.cancel is None else record.cancel.reason,
        pending_messages=len(record.inbox),
        children=len(record.activations),
        changed_at=instance.modified_on.timestamp(),
    )


def instance_detail(engine: Engine, instance_id: UUID) -> InstanceDetail:
    """The detail of one instance, read fresh from the store (raises ``UnknownInstance``)."""
    instance = engine.instance(instance_id)
    return detail_of(instance)


def enabled_events(chart: Chart[Any], configuration: Iterable[str]) -> tuple[str, ...]:
    """The event names an operator may send: those with a transition from an active state.

    Eventless and delayed transitions, wildcards and the events the engine
    raises itself (``done.*``, ``error.*``) are left out. A guard may still
    refuse an event once its data is known: this is what the chart's
    structure allows, in the order the chart declares the transitions.
    """
    active = [chart.index[s] for s in configuration if s in chart.index]
    names: dict[str, None] = {}
    for state in active:
        for transition in chart.transitions[state]:
            if transition.delay is not None:
                continue
            for name in transition.events:
                if name != "*" and not name.startswith(INTERNAL_EVENT_PREFIXES):
                    names.setdefault(name, None)
    return tuple(names)


def _descriptor_matches(descriptor: str, name: str) -> bool:
    """SCXML 3.12.1: a descriptor matches a name it equals or token-prefixes (``*`` matches all)."""
    return descriptor == "*" or name == descriptor or name.startswith(descriptor + ".")


@attrs.frozen
class EventCheck:
    """Whether an instance's configuration has a transition for an event, judged from the chart's structure.

    ``taken`` is None when neither a registered chart nor a recorded shape
    tells (then nothing can be judged); a guard may still refuse an event
    that ``taken`` says a transition matches.
    """

    event: str
    status: InstanceStatus
    configuration: tuple[str, ...]
    offered: tuple[str, ...]
    """The event names the configuration has a transition for (see :func:`enabled_events`)."""
    taken: bool | None

    def describe(self) -> str:
        """One line saying why nothing takes the event, and what would be taken."""
        where = ", ".join(self.configuration) or "no state"
        if self.status.finished:
            return f"it is {self.status.value}: a finished instance takes no event"
        return (
            f"no transition of {where} takes {self.event!r}; "
            f"the events it may be sent now: {', '.join(self.offered) or 'none'}"
        )


def check_event(engine: Engine, instance: Instance, name: str) -> EventCheck:
    """Whether ``instance``'s current configuration has a transition whose descriptor matches ``name``.

    Read from the registered chart, else from the shape recorded for the
    instance's chart version; eventless and delayed transitions never take
    a sent event.
    """
    record = instance.record
    configuration = tuple(str(s) for s in (record.snapshot_parts or {}).get("configuration", ()))
    if record.status.finished:
        return EventCheck(name, record.status, configuration, (), False)
    if record.snapshot_parts is None:  # not started yet: its first macrostep decides the configuration
        return EventCheck(name, record.status, configuration, (), None)
    chart = engine.charts.get(record.name)
    if chart is not None:
        active = [chart.index[s] for s in configuration if s in chart.index]
        if any(state in chart.autoforward_states for state in active):
            # an autoforwarding site passes every external event to its running children
            return EventCheck(name, record.status, configuration, enabled_events(chart, configuration), None)
        matching = chart.matching(name)
        taken = any(t.delay is None for state in active for t in matching[state])
        return EventCheck(name, record.status, configuration, enabled_events(chart, configuration), taken)
    shape = engine.parts.journal.chart_shape(record.name, record.fingerprint) if record.fingerprint else None
    if shape is None or any(site.state in configuration for site in shape.sites):
        # no structure to judge by, or a site whose children an event may be forwarded to
        return EventCheck(name, record.status, configuration, (), None)
    present = set(configuration)
    taken = any(
        _descriptor_matches(descriptor, name)
        for transition in shape.transitions
        if transition.source in present and transition.delay is None
        for descriptor in transition.events
    )
    return EventCheck(name, record.status, configuration, shape_events(shape, configuration), taken)


def shape_events(shape: Shape, configuration: Iterable[str]) -> tuple[str, ...]:
    """:func:`enabled_events` read from a recorded shape (a chart this process has not registered)."""
    active = set(configuration)
    names: dict[str, None] = {}
    for transition in shape.transitions:
        if transition.source in active and transition.delay is None:
            for event in transition.events:
                if event != "*" and not event.startswith(INTERNAL_EVENT_PREFIXES):
                    names.setdefault(event, None)
    return tuple(names)


# ------------------------------------------------------------- call trees


def _configuration(engine: Engine, instance: Instance) -> tuple[str, ...]:
    record = instance.record
    chart = engine.charts.get(record.name)
    if chart is None or record.kind is not InstanceKind.CHART or record.snapshot_parts is None:
        return ()
    try:
        return chart.atomic(engine.parts.copies.decode(chart, instance).configuration)
    except (CodecError, KeyError):  # a stored state the registered chart lacks (before a migration)
        stored = ", ".join(str(s) for s in (record.snapshot_parts or {}).get("configuration", ()))
        return (f"stored states {stored} do not fit chart {record.name!r}",)


def call_tree_of(engine: Engine, instance_id: UUID) -> TreeNode:
    """The call tree under ``instance_id``, finished children included, each parent's by generation.

    Each member's children are the births its own events record, so the
    tree is read from its members' histories alone, whatever else the
    store holds. Configurations are the atomic states of the registered
    charts (none for an instance whose chart is not registered).
    """
    loaded: dict[UUID, Instance | None] = {instance_id: engine.instance(instance_id)}  # UnknownInstance

    def load(child_id: UUID) -> Instance | None:
        if child_id not in loaded:
            try:
                loaded[child_id] = engine.instance(child_id)
            except UnknownInstance:
                loaded[child_id] = None
        return loaded[child_id]

    def generation(child_id: UUID) -> int:
        instance = load(child_id)
        ref = instance.record.parent if instance is not None else None
        return ref.generation if ref is not None else 0

    def children(instance: Instance) -> list[UUID]:
        # Every child it ever birthed, from its own events: reading the tree costs what the
        # tree holds, whatever else the store holds. Its embedded tasks are rebuilt from the
        # same events, once.
        events = engine.events_of(instance.id)
        for task_id, rebuilt in embedded_tasks(events).items():
            loaded.setdefault(task_id, embedded_copy(instance_at(rebuilt, len(rebuilt))))
        return sorted(born(events), key=generation)

    return call_tree(load, instance_id, configuration=lambda i: _configuration(engine, i), children=children)


def tree_json(node: TreeNode) -> dict[str, JsonValue]:
    """A call tree as JSON: each node's id, kind, name, status, slot facts, configuration, children."""
    ref = node.ref
    return {
        "id": str(node.id),
        "kind": node.kind,
        "name": node.name,
        "status": node.status.value,
        "site": None if ref is None else ref.site,
        "key": None if ref is None else ref.key,
        "generation": None if ref is None else ref.generation,
        "attempt": node.attempt,
        "depth": node.depth,
        "recursion": node.recursion,
        "configuration": list(node.configuration),
        "missing": [str(m) for m in node.missing],
        "children": [tree_json(child) for child in node.children],
    }


def label(instance: Instance) -> str:
    """How a timeline names an instance: its chart for a root, ``site[key]#generation`` for a child."""
    ref = instance.record.parent
    if ref is None:
        return instance.record.name
    member = f"[{ref.key}]" if ref.key else ""
    return f"{ref.site}{member}#{ref.generation}"


def tree_events(engine: Engine, instance_id: UUID, *, tree: bool) -> tuple[list[Instance], list[Any]]:
    """The instances (one, or its whole call tree) and their stored events, by time.

    The sort is stable: one instance's events keep their stored order.
    """
    instance = engine.instance(instance_id)
    instances: Sequence[Instance]
    if tree:
        instances = [engine.instance(node.id) for node in call_tree_of(engine, instance.id).walk()]
    else:
        instances = [instance]
    events = [event for i in instances for event in engine.events_of(i.id)]
    events.sort(key=lambda event: event.timestamp)
    return list(instances), events


def timeline_json(instances: Iterable[Instance], events: Iterable[Any]) -> list[JsonValue]:
    """A timeline as JSON rows: ``at`` (ISO), ``at_epoch``, ``offset`` (seconds from the first event),
    ``instance``, ``label`` (as :func:`label` names it), ``version``, ``event`` and ``summary``."""
    names = {i.id: label(i) for i in instances}
    entries = timeline(events)
    first = entries[0].at if entries else None
    return [
        {
            "at": entry.at.astimezone(UTC).isoformat(timespec="milliseconds"),
            "at_epoch": entry.at.timestamp(),
            "offset": (entry.at - first).total_seconds() if first is not None else 0.0,
            "instance": str(entry.instance),
            "label": names.get(entry.instance, str(entry.instance)[:8]),
            "version": entry.version,
            "event": entry.event,
            "summary": entry.summary,
        }
        for entry in entries
    ]
