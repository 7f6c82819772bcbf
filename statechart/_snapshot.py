"""The snapshot: everything a chart instance is between two macrosteps."""

from __future__ import annotations

import enum
import weakref
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

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


SlotKey = tuple[str, str]
"""A child slot's ``(site, key)``."""


@attrs.frozen
class SlotChanges:
    """How the child slots of one snapshot differ from those of another.

    Applied in this order it turns the earlier slots into the later ones,
    order included: ``removed`` slots are forgotten, ``changed`` ones are
    replaced where they stand, ``added`` ones are appended in order. A slot
    removed and added again in one macrostep (a loop re-entering its state)
    is in both ``removed`` and ``added``.
    """

    added: tuple[ChildSlot, ...] = ()
    changed: tuple[ChildSlot, ...] = ()
    removed: tuple[SlotKey, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.removed)


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
    # Neither is data: the index makes ``slot`` O(1), and the interpreter leaves on the
    # snapshot it computes which slots its macrostep touched (see ``slot_changes``).
    _index: dict[SlotKey, ChildSlot] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )
    _origin: tuple[weakref.ref[Any], SlotChanges] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )
    _unfinished: dict[str, int] | None = attrs.field(
        init=False, default=None, eq=False, repr=False, hash=False
    )

    def unfinished_counts(self) -> Mapping[str, int]:
        """How many slots of each site are not done (a family completes at zero); built once, then kept."""
        counts = self._unfinished
        if counts is None:
            counts = {}
            for slot in self.children:
                if slot.status is not SlotStatus.DONE:
                    counts[slot.site] = counts.get(slot.site, 0) + 1
            object.__setattr__(self, "_unfinished", counts)
        return counts

    def slot_index(self) -> Mapping[SlotKey, ChildSlot]:
        """The child slots by ``(site, key)``, in the order of ``children`` (built once, then kept)."""
        index = self._index
        if index is None:
            index = {(slot.site, slot.key): slot for slot in self.children}
            object.__setattr__(self, "_index", index)
        return index

    def active(self, state: str) -> bool:
        """Whether ``state`` is in the configuration."""
        return state in self.configuration

    def slot(self, site: str, key: str = "") -> ChildSlot | None:
        """The child slot of ``site`` (and member ``key``), if any."""
        return self.slot_index().get((site, key))

    def live_children(self) -> tuple[ChildSlot, ...]:
        """The slots that need an activation: running or retrying."""
        return tuple(slot for slot in self.children if slot.live)

    def next_deadline(self) -> float | None:
        """The earliest timer deadline, if any timer is armed."""
        return min((timer.deadline for timer in self.timers), default=None)


def derived(
    snapshot: Snapshot[C],
    index: dict[SlotKey, ChildSlot],
    unfinished: dict[str, int],
    base: Snapshot[Any],
    changes: SlotChanges,
) -> Snapshot[C]:
    """``snapshot``, which the interpreter computed from ``base``, with its slot index and changes kept.

    ``index`` must be ``snapshot.children`` by key and ``unfinished`` their
    counts (see :meth:`Snapshot.unfinished_counts`); neither is copied: the
    caller gives them up.
    """
    object.__setattr__(snapshot, "_index", index)
    object.__setattr__(snapshot, "_unfinished", unfinished)
    object.__setattr__(snapshot, "_origin", (weakref.ref(base), changes))
    return snapshot


def slot_changes(before: Snapshot[Any] | None, after: Snapshot[Any]) -> SlotChanges:
    """How the child slots of ``after`` differ from those of ``before`` (None: no slots at all).

    O(changed) when the interpreter computed ``after`` from ``before`` (it
    recorded what it touched); otherwise the two are compared slot by slot.
    """
    if before is None:
        return SlotChanges(added=after.children)
    origin = after._origin
    if origin is not None and origin[0]() is before:
        return origin[1]
    if before.children == after.children:
        return SlotChanges()
    old, new = before.slot_index(), after.slot_index()
    removed = tuple(key for key in old if key not in new)
    kept = [key for key in new if key in old]
    # Changed slots keep their places; anything else (an order the three lists cannot
    # express) is said as: every slot removed, every slot added.
    if kept != [key for key in old if key in new] or any(key not in old for key in list(new)[: len(kept)]):
        return SlotChanges(added=after.children, removed=tuple(old))
    changed = tuple(new[key] for key in kept if new[key] != old[key])
    added = tuple(slot for key, slot in new.items() if key not in old)
    return SlotChanges(added, changed, removed)
