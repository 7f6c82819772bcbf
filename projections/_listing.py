"""The recovery listing: one row per instance, folded from stored events read as plain JSON.

Recovery and the command line need to know which instances are still in
flight without rebuilding every aggregate. :func:`apply_notification` folds
one stored event into a table of :class:`ListingRow` values. It reads the
event's JSON state directly (no cattrs structuring) and only for the
event types that carry what a row needs (``Started``, ``IncidentRecorded``
and ``Claimed``; see :func:`needs_state`), so catching up over a long log
stays cheap. A row's change time is its last event's own ``timestamp``,
which :func:`event_time` reads from the start of the stored state without
decoding the rest.

The status a row carries mirrors the ``apply`` methods of
:class:`~aggregates.Instance` event by event. It is a view, not the truth:
whoever acts on an instance reloads the aggregate first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import attrs
import msgspec

from aggregates import Instance, InstanceKind, InstanceStatus, Ref, stored_topic, uuid_of
from aggregates.errors import DecodeError
from projections._embedded import cancel_report, outcome_status


def _topic(event_class: type) -> str:
    # The same "module:qualname" form eventsourcing stores with each event.
    return f"{event_class.__module__}:{event_class.__qualname__}"


INSTANCE_TOPIC_PREFIX = f"{_topic(Instance)}."
"""Every Instance event's topic starts with this; other aggregates' events are not listed."""

STARTED = _topic(Instance.Started)
ACCEPTED = _topic(Instance.Accepted)
STEPPED = _topic(Instance.Stepped)
STEPPED_STORED = stored_topic(Instance.Stepped)
"""The topic ``Stepped`` events are stored under now (with their format); older ones keep :data:`STEPPED`."""
BIRTH_STORED = stored_topic(Instance.Birth)
RESUME_STORED = stored_topic(Instance.ChildResume)
"""The topics births are stored under from stored format 2 on (which may embed a task child)."""
CHILD_RETRY = _topic(Instance.ChildRetry)
CHILD_SETTLED = _topic(Instance.ChildSettled)
MIGRATED = _topic(Instance.Migrated)
COMPLETED = _topic(Instance.Completed)
FAILED = _topic(Instance.Failed)
CANCELLED = _topic(Instance.Cancelled)
INCIDENT_RECORDED = _topic(Instance.IncidentRecorded)
RESOLVED = _topic(Instance.Resolved)
REDRIVEN = _topic(Instance.Redriven)
CLAIMED = f"{INSTANCE_TOPIC_PREFIX}Claimed"
"""A new owner took the instance over (its ``owner`` field); named, not imported, so the
listing reads logs written before and after the event existed."""
ORPHANED = f"{INSTANCE_TOPIC_PREFIX}Orphaned"
"""The instance was written off as an orphan (its parent's record is gone)."""
ORPHAN = "orphan"
"""The status of an orphaned instance: finished, distinct from failed and cancelled."""

_STATUSES = frozenset(status.value for status in InstanceStatus) | {ORPHAN}
_KINDS = frozenset(kind.value for kind in InstanceKind)
_FINISHED = frozenset(status.value for status in InstanceStatus if status.finished) | {ORPHAN}


@attrs.frozen
class ListingRow:
    """What the listing knows of one instance, as of the last event folded into it."""

    id: UUID
    root: UUID
    parent: UUID | None
    """The parent instance's id; None for a root."""
    kind: str = attrs.field(validator=attrs.validators.in_(_KINDS))
    """An :class:`~aggregates.InstanceKind` value: ``"chart"`` or ``"task"``."""
    name: str
    """The chart or task name."""
    status: str = attrs.field(validator=attrs.validators.in_(_STATUSES))
    """An :class:`~aggregates.InstanceStatus` value."""
    owner: str
    """The engine that owns the instance: the one that started it, or the last to claim it."""
    version: int
    """The aggregate version of the last event folded into this row."""
    has_snapshot: bool = False
    """Whether a statechart snapshot was recorded (a macrostep or a migration): a resolved
    instance goes back to running when it has one, to born when it never stepped."""
    changed_at: float = 0.0
    """When the instance last changed: the time of its last event folded into this row, in
    seconds since the epoch (as the listing passed it to :func:`apply_notification`; see
    :func:`event_time`). Recovery leaves an instance alone until it has been quiet for a while."""

    @property
    def instance_status(self) -> InstanceStatus:
        """The status as an enum member."""
        return InstanceStatus(self.status)

    @property
    def finished(self) -> bool:
        """Whether the instance ended for good (done, failed, cancelled or orphaned)."""
        return self.status in _FINISHED

    @property
    def in_flight(self) -> bool:
        """Whether the instance has not finished (born, running or parked)."""
        return not self.finished

    @property
    def parked(self) -> bool:
        """Whether the instance is held for an operator."""
        return self.status == InstanceStatus.PARKED.value

    @property
    def is_root(self) -> bool:
        """Whether the instance has no parent."""
        return self.parent is None


# ------------------------------------------------------------------ the fold


def needs_state(topic: str, plain: bytes | None = None) -> bool:
    """Whether :func:`apply_notification` reads the state of an event with ``topic``.

    Callers may pass an empty state for every other topic and skip decoding
    it (a ``Stepped`` event can be large: a first fan-out macrostep carries every new slot).
    Some topics need the state only when the event may change an embedded
    task's row (a birth that embeds one, a macrostep that settled a child):
    given ``plain``, the stored JSON, those are told apart without decoding
    it; without it, they count as needed.
    """
    if topic in (STARTED, INCIDENT_RECORDED, CLAIMED, CHILD_RETRY, CHILD_SETTLED):
        return True
    if topic in (BIRTH_STORED, RESUME_STORED):
        return plain is None or _EMBEDS in plain
    if topic == ACCEPTED:  # a child's outcome (the message has a source) may end an embedded task's row
        return plain is None or _FROM_NOBODY not in plain
    if topic == STEPPED_STORED:
        return plain is None or _SETTLED_NOTHING not in plain
    return False


_EMBEDS = b'"embedded":true'
_SETTLED_NOTHING = b'"settled":[]'
_FROM_NOBODY = b'"source":null'
"""How the compact stored JSON of a birth that embeds its task, of a macrostep that settled
nothing, and of a message sent from outside the tree, read (see ``aggregates._codec``; event data
that holds the same text only leaves a row to the parent's settlement)."""


def related_rows(topic: str, state: Mapping[str, Any]) -> list[UUID]:
    """The ids of the embedded task rows an event of a parent may change (its children's).

    A caller that folds events in batches loads these rows with the
    events' own before folding them; an event that changes none of them
    gives ``[]``.
    """
    if not state:
        return []
    try:
        if topic in (BIRTH_STORED, RESUME_STORED):
            return [_child_id(state["facts"]["ref"])] if state.get("embedded") else []
        if topic in (CHILD_RETRY, CHILD_SETTLED):
            return [_child_id(state["ref"])]
        if topic == ACCEPTED:
            source = state["message"]["source"]
            return [uuid_of(source)] if source is not None else []
        if topic == STEPPED_STORED:
            return [_child_id(ref) for ref, _ in state.get("settled", ())]
    except (KeyError, TypeError, ValueError):
        return []  # the fold itself reports what does not read
    return []


_ENDS = frozenset((COMPLETED, FAILED, CANCELLED))


def ends_instance(topic: str) -> bool:
    """Whether an event of ``topic`` ends its instance.

    It ends the rows of the instance's embedded tasks still in flight too (a
    parent that fails by a step error leaves its activations running; the
    rebuilt task is cancelled, see :func:`projections.embedded_history`). The
    event does not name them, so :func:`related_rows` cannot: a caller that
    folds it finds them by parent and passes them as ``tasks`` to
    :func:`apply_notification`.
    """
    return topic in _ENDS


def _child_id(ref: Mapping[str, Any]) -> UUID:
    return Ref(uuid_of(ref["parent"]), ref["site"], ref["key"], ref["generation"]).child_id


def apply_notification(
    rows: dict[UUID, ListingRow],
    topic: str,
    originator_id: UUID,
    version: int,
    state: Mapping[str, Any],
    *,
    at: float = 0.0,
    tasks: Iterable[UUID] = (),
) -> None:
    """Fold one stored event into ``rows``, in place; a row it changes gets ``changed_at=at``.

    ``at`` is when the event happened (its :func:`event_time`), not when it
    is folded: a listing that catches up late still dates each row by its
    instance's last event. ``state`` is the stored event's JSON state,
    decoded with plain ``json`` (it may be empty when :func:`needs_state` is
    False). Events of other aggregates are ignored, and so is an event at or
    below a row's version: it was folded already, so re-delivering one
    changes nothing. ``tasks`` are the ids of the instance's embedded task
    rows, for an event that :func:`ends_instance`: those still in flight end
    as cancelled with it.
    """
    if not topic.startswith(INSTANCE_TOPIC_PREFIX):
        return
    row = rows.get(originator_id)
    if topic == STARTED:
        if row is None:
            rows[originator_id] = _started(topic, originator_id, version, state, at)
        return
    if row is None or version <= row.version:
        return
    change = _CHANGES.get(topic)
    if change is None:
        rows[originator_id] = _changed(row, version=version, changed_at=at)
    else:
        rows[originator_id] = change(row, version, state, topic, at)
        if topic in _ENDS:
            for task_id in tasks:
                task = rows.get(task_id)
                if task is not None and task.parent == originator_id:
                    _end_embedded_row(rows, task, InstanceStatus.CANCELLED.value, at)
            return
    embedding = _EMBEDDING.get(topic) if state else None
    if embedding is not None:
        try:
            embedding(rows, rows[originator_id], version, state, at)
        except (KeyError, TypeError, ValueError) as error:
            raise DecodeError(topic, originator_id, version, f"{type(error).__name__}: {error}") from error


EMBEDDED_VERSION = 0
"""The version of an embedded task's row: it has no stored event of its own (see
:func:`projections.embedded_tasks`). Its row is made and ended by its parent's events."""


def is_embedded(row: ListingRow) -> bool:
    """Whether the row is of a task child embedded in its parent (no stream of its own)."""
    return row.version == EMBEDDED_VERSION and row.parent is not None


def _born(
    rows: dict[UUID, ListingRow], parent: ListingRow, version: int, state: Mapping[str, Any], at: float
) -> None:
    if not state.get("embedded"):
        return
    facts = state["facts"]
    task_id = _child_id(facts["ref"])
    rows.setdefault(
        task_id,
        ListingRow(
            id=task_id,
            root=uuid_of(facts["root"]),
            parent=parent.id,
            kind=InstanceKind.TASK.value,
            name=facts["name"],
            status=InstanceStatus.BORN.value,
            owner=parent.owner,
            version=EMBEDDED_VERSION,
            changed_at=at,
        ),
    )


_SETTLED_STATUS = {
    "done": InstanceStatus.DONE.value,
    "failed": InstanceStatus.FAILED.value,
    "cancelled": InstanceStatus.CANCELLED.value,
}


def _end_embedded(rows: dict[UUID, ListingRow], ref: Mapping[str, Any], status: str, at: float) -> None:
    row = rows.get(_child_id(ref))
    if row is not None:
        _end_embedded_row(rows, row, status, at)


def _end_embedded_row(rows: dict[UUID, ListingRow], row: ListingRow, status: str, at: float) -> None:
    if is_embedded(row) and row.in_flight:
        rows[row.id] = _changed(row, status=status, changed_at=at)


def _retried(
    rows: dict[UUID, ListingRow], parent: ListingRow, version: int, state: Mapping[str, Any], at: float
) -> None:
    status = InstanceStatus.CANCELLED if cancel_report(state.get("error")) else InstanceStatus.FAILED
    _end_embedded(rows, state["ref"], status.value, at)


def _heard(
    rows: dict[UUID, ListingRow], parent: ListingRow, version: int, state: Mapping[str, Any], at: float
) -> None:
    """A child's outcome accepted by its parent ends an embedded task's row, as the rebuilt task ends."""
    message = state["message"]
    source = message["source"]
    if source is None:
        return
    row = rows.get(uuid_of(source))
    if row is None or row.parent != parent.id:
        return
    event = message["event"]
    status = outcome_status(event["name"], event.get("data"))
    if status is not None:
        _end_embedded_row(rows, row, status.value, at)


def _settled_one(
    rows: dict[UUID, ListingRow], parent: ListingRow, version: int, state: Mapping[str, Any], at: float
) -> None:
    _end_embedded(rows, state["ref"], _SETTLED_STATUS[state["settlement"]], at)


def _settled_many(
    rows: dict[UUID, ListingRow], parent: ListingRow, version: int, state: Mapping[str, Any], at: float
) -> None:
    trigger = state.get("trigger") or {}
    for ref, settlement in state.get("settled", ()):
        status = _SETTLED_STATUS[settlement]
        if (
            settlement == "failed"
            and trigger.get("invoke_id") == {k: ref[k] for k in ("site", "key", "generation")}
            and cancel_report(trigger.get("data"))
        ):
            status = InstanceStatus.CANCELLED.value  # its failure was a cancel an operator asked for
        _end_embedded(rows, ref, status, at)


_FIELDS = tuple(field.name for field in attrs.fields(ListingRow))
_new_row = object.__new__
_set = object.__setattr__


def _changed(row: ListingRow, **changes: Any) -> ListingRow:
    """``attrs.evolve(row, **changes)`` without re-running the validators of the fields it keeps.

    The fold makes one per folded event; the values it changes are the
    module's own (a status of :class:`InstanceStatus`, a version, a time)
    or an owner it checked, so only those are set.
    """
    new = _new_row(ListingRow)
    for name in _FIELDS:
        _set(new, name, changes[name] if name in changes else getattr(row, name))
    return new


_TIMESTAMP_PREFIX = b'{"timestamp":"'
"""How every stored event's state begins: the codec writes compact JSON, the event's
``timestamp`` (an ISO-8601 string) first (see ``aggregates._codec``)."""
_DATETIME = msgspec.json.Decoder(datetime)


class _Stamped(msgspec.Struct):
    timestamp: datetime | None = None


_STAMPED = msgspec.json.Decoder(_Stamped)


def event_time(state: bytes) -> float | None:
    """When a stored event happened: its state's ``timestamp``, in seconds since the epoch.

    ``state`` is the stored JSON (decrypted and decompressed). Only the
    leading ``"timestamp"`` string is read, so a large ``Stepped`` event
    costs what a small one does; a state laid out otherwise is parsed whole
    for that one field. None when there is no timestamp that reads as a
    time. A time without a zone is taken as UTC (the library stamps events
    in UTC).

    The timestamp is the writing process's clock when it made the event:
    hosts whose clocks agree (NTP) agree on it, whoever folds the log and
    whenever.
    """
    prefix = _TIMESTAMP_PREFIX
    try:
        if state.startswith(prefix):
            start = len(prefix)
            # The JSON string with its quotes; an ISO-8601 time holds no quote to escape.
            when = _DATETIME.decode(state[start - 1 : state.find(b'"', start) + 1])
        else:
            stamped = _STAMPED.decode(state).timestamp
            if stamped is None:
                return None
            when = stamped
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return when.timestamp()
    except (msgspec.DecodeError, ValueError, OverflowError):
        return None


UNDECODABLE_NAME = "<undecodable>"
"""The name of a row listed from a first record that does not decode."""


def apply_undecodable(
    rows: dict[UUID, ListingRow], originator_id: UUID, version: int, *, at: float = 0.0
) -> None:
    """Fold a stored record that does not decode (its topic or state is unreadable) into ``rows``.

    A first record lists the instance anyway, as a born root named
    :data:`UNDECODABLE_NAME`, so recovery meets it and parks it; a later one
    only moves the row's version (its status stays what the readable records
    said: recovery decides on the records, not on the row).
    """
    row = rows.get(originator_id)
    if row is None:
        if version == 1:
            rows[originator_id] = ListingRow(
                id=originator_id,
                root=originator_id,
                parent=None,
                kind=InstanceKind.CHART.value,
                name=UNDECODABLE_NAME,
                status=InstanceStatus.BORN.value,
                owner="",
                version=version,
                changed_at=at,
            )
        return
    if version > row.version:
        rows[originator_id] = _changed(row, version=version, changed_at=at)


def _started(
    topic: str, originator_id: UUID, version: int, state: Mapping[str, Any], at: float
) -> ListingRow:
    try:
        parent = state["parent"]
        return ListingRow(
            id=originator_id,
            root=uuid_of(state["root"]),
            parent=None if parent is None else uuid_of(parent["parent"]),
            kind=state["kind"],
            name=state["name"],
            status=InstanceStatus.BORN.value,
            owner=state["owner"],
            version=version,
            changed_at=at,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise DecodeError(topic, originator_id, version, f"{type(error).__name__}: {error}") from error


_Change = Callable[[ListingRow, int, Mapping[str, Any], str, float], ListingRow]
"""A row's change by one event: ``(row, version, state, topic, at)`` to the new row."""


def _stepped(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    status = InstanceStatus.RUNNING.value if row.status == InstanceStatus.BORN.value else row.status
    return _changed(row, version=version, status=status, has_snapshot=True, changed_at=at)


def _migrated(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    return _changed(row, version=version, has_snapshot=True, changed_at=at)


def _ended(status: InstanceStatus) -> _Change:
    def change(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
        return _changed(row, version=version, status=status.value, changed_at=at)

    return change


def _incident(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    try:
        parked = state["incident"]["parked"]
    except (KeyError, TypeError) as error:
        raise DecodeError(topic, row.id, version, f"{type(error).__name__}: {error}") from error
    status = InstanceStatus.PARKED.value if parked else row.status
    return _changed(row, version=version, status=status, changed_at=at)


def _claimed(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    owner = state.get("owner")
    if not isinstance(owner, str):
        raise DecodeError(topic, row.id, version, f"expected a string owner, got {owner!r}")
    return _changed(row, version=version, owner=owner, changed_at=at)


def _orphaned(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    return _changed(row, version=version, status=ORPHAN, changed_at=at)


def _resolved(row: ListingRow, version: int, state: Mapping[str, Any], topic: str, at: float) -> ListingRow:
    status = InstanceStatus.RUNNING if row.has_snapshot else InstanceStatus.BORN
    return _changed(row, version=version, status=status.value, changed_at=at)


_CHANGES: dict[str, _Change] = {
    STEPPED: _stepped,
    STEPPED_STORED: _stepped,
    MIGRATED: _migrated,
    COMPLETED: _ended(InstanceStatus.DONE),
    FAILED: _ended(InstanceStatus.FAILED),
    CANCELLED: _ended(InstanceStatus.CANCELLED),
    INCIDENT_RECORDED: _incident,
    RESOLVED: _resolved,
    REDRIVEN: _resolved,
    CLAIMED: _claimed,
    ORPHANED: _orphaned,
}
"""Events that change more than the version; every other Instance event only bumps it."""

_Embedding = Callable[[dict[UUID, ListingRow], ListingRow, int, Mapping[str, Any], float], None]
_EMBEDDING: dict[str, _Embedding] = {
    BIRTH_STORED: _born,
    RESUME_STORED: _born,
    ACCEPTED: _heard,
    CHILD_RETRY: _retried,
    CHILD_SETTLED: _settled_one,
    STEPPED_STORED: _settled_many,
}
"""A parent's events that make or end the rows of its embedded task children (given their state)."""


# ------------------------------------------------------------------ queries


def select_rows(
    rows: Iterable[ListingRow], *, in_flight: bool = False, roots: bool = False
) -> list[ListingRow]:
    """The rows, in their given order, keeping only unfinished ones and/or roots when asked."""
    return [row for row in rows if (not in_flight or row.in_flight) and (not roots or row.is_root)]


def in_flight(rows: Iterable[ListingRow]) -> list[ListingRow]:
    """The rows of instances that have not finished, in their given order."""
    return select_rows(rows, in_flight=True)
