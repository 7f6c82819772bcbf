"""The values an Instance aggregate holds: its record, inbox messages and activations."""

from __future__ import annotations

import enum
from typing import Any
from uuid import UUID

import attrs

from aggregates._identity import AncestryFrame, BirthFacts, InstanceKind, Provenance, Ref
from statechart import Event, JsonValue

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

    @property
    def finished(self) -> bool:
        """Whether the instance has ended for good."""
        return self in (
            InstanceStatus.DONE,
            InstanceStatus.FAILED,
            InstanceStatus.CANCELLED,
            InstanceStatus.ORPHAN,
        )


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

    @property
    def child_id(self) -> UUID:
        """The instance id of the retained incarnation."""
        return self.ref.child_id


@attrs.frozen
class Message:
    """An accepted event waiting in an instance's inbox."""

    seq: int
    event: Event
    source: UUID | None
    sent_at: float
    key: str | None = None


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


@attrs.frozen
class InstanceRecord:
    """Everything an Instance aggregate knows, as one immutable value."""

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
    snapshot: JsonObject | None = None
    steps: int = 0
    inbox: tuple[Message, ...] = ()
    message_seq: int = 0
    activations: tuple[Activation, ...] = ()
    cancel: CancelRequest | None = None
    output: JsonValue = None
    error: JsonValue = None
    incidents: tuple[Incident, ...] = ()
    keys: tuple[str, ...] = ()
    incarnation: int = 1
    """The ownership incarnation: 1 at creation, +1 per ``Claimed`` (the fencing token)."""
    traceparent: str | None = None
    """The W3C trace context of the step that gave birth to it (tracing only; never compared)."""

    def activation(self, site: str, key: str) -> Activation | None:
        """The activation of slot ``(site, key)``, if retained."""
        for activation in self.activations:
            if activation.site == site and activation.key == key:
                return activation
        return None
