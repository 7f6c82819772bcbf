"""The snapshot: everything a chart instance is between two macrosteps."""

from __future__ import annotations

import enum
from typing import Generic, TypeVar

import attrs

from statechart._event import Event, InvokeId, JsonValue, Timer

C = TypeVar("C", covariant=True)  # noqa: PLC0105 - one name for the context type throughout


class Status(enum.Enum):
    """Whether an instance still accepts events."""

    RUNNING = "running"
    DONE = "done"
    """Reached a top-level final state; ``output`` holds its done data."""
    STOPPED = "stopped"
    """Stopped from outside (cancelled by its parent or an operator)."""


class SlotStatus(enum.Enum):
    """Where one child slot stands."""

    RUNNING = "running"
    """An incarnation is born and must be kept alive."""
    RETRYING = "retrying"
    """The last incarnation failed; a fresh one is due at ``retry_deadline``."""
    DONE = "done"
    """The child finished and its output was consumed."""
    FAILED = "failed"
    """The child failed with no attempt left; the chart saw ``error.invoke``."""


@attrs.frozen
class ChildSlot:
    """One child slot of an active site: ``(site, key)`` and its current incarnation."""

    site: str
    key: str
    generation: int
    attempt: int
    status: SlotStatus
    state: str
    input: JsonValue
    armed_step: int
    output: JsonValue = None
    retry_deadline: float | None = None

    @property
    def invoke_id(self) -> InvokeId:
        """The identity of the slot's current incarnation."""
        return InvokeId(self.site, self.key, self.generation)

    @property
    def live(self) -> bool:
        """Whether the slot still needs an activation (not completed)."""
        return self.status in (SlotStatus.RUNNING, SlotStatus.RETRYING)


@attrs.frozen
class HistoryEntry:
    """The states a history pseudo-state remembers (SCXML 3.10)."""

    id: str
    states: tuple[str, ...]


@attrs.frozen
class Snapshot(Generic[C]):
    """A chart instance at a macrostep boundary.

    ``configuration`` lists every active state in document order. Timers hold
    absolute deadlines supplied by the caller; ``time`` is the caller's clock
    at the last step. Snapshots are immutable and compare by value; the codec
    round-trips them exactly.
    """

    chart: str
    status: Status
    configuration: tuple[str, ...]
    history: tuple[HistoryEntry, ...]
    context: C
    internal_queue: tuple[Event, ...] = ()
    timers: tuple[Timer, ...] = ()
    children: tuple[ChildSlot, ...] = ()
    output: JsonValue = None
    time: float = 0.0
    steps: int = 0
    sequence: int = 0
    next_generation: int = 1
    lineage: tuple[str, ...] = ()

    def active(self, state: str) -> bool:
        """Whether ``state`` is in the configuration."""
        return state in self.configuration

    def slot(self, site: str, key: str = "") -> ChildSlot | None:
        """The child slot of ``site`` (and member ``key``), if any."""
        for slot in self.children:
            if slot.site == site and slot.key == key:
                return slot
        return None

    def live_children(self) -> tuple[ChildSlot, ...]:
        """The slots that need an activation: running or retrying."""
        return tuple(slot for slot in self.children if slot.live)

    def next_deadline(self) -> float | None:
        """The earliest timer deadline, if any timer is armed."""
        return min((timer.deadline for timer in self.timers), default=None)
