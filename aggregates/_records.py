"""The values an Instance aggregate holds: its record, inbox messages and activations."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar
from uuid import UUID

import attrs

from aggregates._identity import AncestryFrame, BirthFacts, InstanceKind, Provenance, Ref
from aggregates._keyed import Keyed, SlotData, SlotKey
from statechart import Event, JsonValue
from statechart.effects import SendHttp

JsonObject = dict[str, Any]
"""An encoded statechart snapshot (JSON data produced by ``SnapshotCodec``)."""


class InstanceStatus(enum.Enum):
    """The life of an instance."""

    BORN = "born"
    """Created with its birth facts; its first macrostep (or task run) has not been committed."""
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PARKED = "parked"
    """Held for an operator after an incident; nothing of it runs until resolved."""
    ORPHAN = "orphan"
    """Ended by recovery because its counterpart (its parent) is gone; distinct from failed and cancelled."""

    if TYPE_CHECKING:  # each member's plain attribute, set below

        @property
        def finished(self) -> bool:
            """Whether the instance has ended for good (done, failed, cancelled or orphan)."""


# A plain attribute of each member, not a property: it is read on every step of every instance.
for _status in InstanceStatus:
    object.__setattr__(_status, "finished", _status.value in ("done", "failed", "cancelled", "orphan"))
del _status


class ActivationState(enum.Enum):
    """Whether a retained child incarnation runs or waits for its retry."""

    RUNNING = "running"
    RETRYING = "retrying"


class Settlement(enum.Enum):
    """How a child slot stopped needing an activation."""

    DONE = "done"
    """Its output was consumed by the parent."""
    FAILED = "failed"
    """It failed with no attempt left; the parent's chart saw ``error.invoke``."""
    CANCELLED = "cancelled"
    """The parent left the site's state (or stopped) and cancelled it."""


@attrs.frozen
class RetryEntry:
    """One failed attempt in an activation's retry journal."""

    ref: Ref
    attempt: int
    error: JsonValue
    deadline: float


@attrs.frozen
class Activation:
    """What a parent retains for one non-completed child slot."""

    stored_if_set: ClassVar[tuple[str, ...]] = ("traceparent",)
    """Fields left out of the stored form while they hold their default (see ``aggregates._codec``)."""

    site: str
    key: str
    generation: int
    ref: Ref
    state: ActivationState
    attempt: int
    armed_step: int
    provenance: Provenance
    kind: InstanceKind
    name: str
    journal: tuple[RetryEntry, ...] = ()
    embedded: bool = False
    """A task child with no event stream of its own (stored format 2 of ``Birth``): its birth is
    the parent's ``Birth`` or ``ChildResume``, and its outcome the parent's message (see
    :func:`projections.embedded_history` for the task as its own instance)."""
    traceparent: str | None = None
    """An embedded task's trace context: the W3C ``traceparent`` of the step that decided this
    incarnation, which its spans continue (None without tracing; a child with a stream keeps its
    own in its ``Started``)."""

    @property
    def child_id(self) -> UUID:
        """The instance id of the retained incarnation."""
        return self.ref.child_id


class Activations(Keyed[Activation]):
    """A parent's activations, by ``(site, key)``, in the order they were retained."""

    __slots__ = ()

    @staticmethod
    def key_of(value: Any) -> SlotKey:
        return (value.site, value.key)


def _activations(value: Activations | Iterable[Activation]) -> Activations:
    return value if isinstance(value, Activations) else Activations.of(value)


def _slots(value: SlotData | Iterable[JsonObject]) -> SlotData:
    return value if isinstance(value, SlotData) else SlotData.of(value)


@attrs.frozen
class Message:
    """An accepted event waiting in an instance's inbox.

    ``detached`` marks an event from a child whose invocation the instance
    cancelled (it left the invoking state) after the event was accepted: it
    was received before the cancellation, so it is still processed, as an
    ordinary event rather than as evidence about the slot (SCXML 6.4; see
    :func:`statechart.event.detach`). It is set when the cancellation is
    applied, never by whoever sent the event.
    """

    stored_if_set: ClassVar[tuple[str, ...]] = ("detached", "trace")
    """Fields left out of the stored form while they hold their default: ``detached`` is set only on
    a message waiting in an inbox (an aggregate snapshot), ``trace`` only on an embedded task's
    failure (see ``aggregates._codec``)."""

    seq: int
    event: Event
    source: UUID | None
    sent_at: float
    key: str | None = None
    detached: bool = False
    trace: str | None = None
    """The traceback of an embedded task's failure this message reports (never shown to the chart:
    the ``error.invoke`` data has the error's type and message only). Stored only when set."""


@attrs.frozen
class Outbound:
    """A Basic HTTP send a committed macrostep decided and no delivery has settled yet (SCXML C.2).

    ``key`` is ``<step>.<n>``: the macrostep's number and the send's place
    among that macrostep's HTTP sends, so it is the same on every replay;
    with the instance id it is the request's idempotency key.
    """

    key: str
    send: SendHttp


@attrs.frozen
class CancelRequest:
    """A request to stop the instance, and who made it."""

    by: UUID | None
    reason: str


@attrs.frozen
class Incident:
    """Something an operator must look at; ``parked`` ones hold the instance."""

    kind: str
    detail: str
    at_version: int
    parked: bool


@attrs.frozen(slots=False)
class InstanceRecord:
    """Everything an Instance aggregate knows, as one immutable value.

    Not slotted: every applied event makes a new record, and copying its
    ``__dict__`` (see :func:`evolve_record`) costs a fifth of copying two
    dozen slots one by one.
    """

    kind: InstanceKind
    name: str
    fingerprint: str
    input: JsonValue
    owner: str
    root: UUID
    parent: Ref | None
    birth: BirthFacts | None
    ancestry: tuple[AncestryFrame, ...]
    status: InstanceStatus = InstanceStatus.BORN
    snapshot_parts: JsonObject | None = None
    """The encoded snapshot's top-level fields, ``children`` apart (None before the first macrostep)."""
    slots: SlotData = attrs.field(factory=SlotData, converter=_slots)
    """The encoded snapshot's child slots, by ``(site, key)``: a macrostep changes only those it touched."""
    steps: int = 0
    inbox: tuple[Message, ...] = ()
    message_seq: int = 0
    retained: Activations = attrs.field(factory=Activations, converter=_activations)
    """The activations by ``(site, key)`` (see :attr:`activations` for them in order)."""
    cancel: CancelRequest | None = None
    output: JsonValue = None
    error: JsonValue = None
    incidents: tuple[Incident, ...] = ()
    keys: tuple[str, ...] = ()
    incarnation: int = 1
    """The ownership incarnation: 1 at creation, +1 per ``Claimed`` (the fencing token)."""
    traceparent: str | None = None
    """The W3C trace context of the step that gave birth to it (tracing only; never compared)."""
    outbox: tuple[Outbound, ...] = ()
    """The Basic HTTP sends recorded by macrosteps and not yet delivered (or given up), oldest first."""

    @property
    def snapshot(self) -> JsonObject | None:
        """The encoded statechart snapshot, whole (built from its parts and slots: O(slots))."""
        parts = self.snapshot_parts
        if parts is None:
            return None
        return {**parts, "children": list(self.slots.values())}

    @property
    def activations(self) -> tuple[Activation, ...]:
        """The activations, in the order they were retained (the order of their slots)."""
        return self.retained.values()

    def activation(self, site: str, key: str) -> Activation | None:
        """The activation of slot ``(site, key)``, if retained (O(1))."""
        return self.retained.get((site, key))


_RECORD_NAMES = frozenset(field.name for field in attrs.fields(InstanceRecord))
_new = object.__new__
_set = object.__setattr__


def evolve_record(record: InstanceRecord, **changes: Any) -> InstanceRecord:
    """``attrs.evolve(record, **changes)``, at a fifth of the cost: every applied event makes one.

    The record's fields are copied as one dictionary instead of through
    ``__init__`` (the record has no validators; the two converted fields
    are converted here), so an event's ``apply`` does not pay for
    re-checking what the record already holds.
    """
    if not _RECORD_NAMES.issuperset(changes):
        unknown = min(set(changes) - _RECORD_NAMES)
        raise TypeError(f"InstanceRecord has no field {unknown!r}")
    if "slots" in changes:
        changes["slots"] = _slots(changes["slots"])
    if "retained" in changes:
        changes["retained"] = _activations(changes["retained"])
    fields = record.__dict__.copy()
    fields.update(changes)
    new = _new(InstanceRecord)
    _set(new, "__dict__", fields)
    return new


def split_snapshot(data: JsonObject) -> tuple[JsonObject, SlotData]:
    """A whole encoded snapshot as the record keeps it: its top-level parts and its slots."""
    parts = {name: value for name, value in data.items() if name != "children"}
    return parts, SlotData.of(data.get("children", ()))


def apply_slot_changes(
    slots: SlotData,
    added: Iterable[JsonObject],
    changed: Iterable[JsonObject],
    removed: Iterable[tuple[str, str]],
) -> SlotData:
    """``slots`` after one macrostep's slot changes: removed, then changed in place, then added last.

    O(changed). The aggregate applies what was committed; a delta that does
    not fit (a slot removed twice, changed before it exists) is reported by
    the ResumePlan, which checks every fact (``projections``), not here.
    """
    for key in removed:
        site_key = (key[0], key[1])
        if site_key in slots:
            slots = slots.remove(site_key)
    for slot in changed:
        slots = slots.put(slot)
    for slot in added:
        key = SlotData.key_of(slot)
        if key in slots:
            slots = slots.remove(key)
        slots = slots.put(slot)
    return slots
