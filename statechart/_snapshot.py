"""The snapshot: everything a chart instance is between two macrosteps."""

from __future__ import annotations

import enum
import weakref
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

import attrs
import immutables

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
    # None of these is data. The positions make ``slot`` O(1): each slot's place in
    # ``children``, a persistent map that the snapshots a parent's macrosteps derive
    # from one another share, so a macrostep that changes a few slots of thousands
    # copies none of the others' entries. The interpreter also leaves on the snapshot
    # it computes which slots its macrostep touched (see ``slot_changes``).
    _positions: immutables.Map[SlotKey, int] | None = attrs.field(
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

    def slot_positions(self) -> immutables.Map[SlotKey, int]:
        """Each child slot's place in ``children``, by ``(site, key)`` (built once, then kept)."""
        positions = self._positions
        if positions is None:
            positions = _positions_of(self.children)
            object.__setattr__(self, "_positions", positions)
        return positions

    def slot_index(self) -> Mapping[SlotKey, ChildSlot]:
        """The child slots by ``(site, key)``, in the order of ``children`` (a view; O(1) lookups)."""
        return SlotIndex(self.children, self.slot_positions())

    def active(self, state: str) -> bool:
        """Whether ``state`` is in the configuration."""
        return state in self.configuration

    def slot(self, site: str, key: str = "") -> ChildSlot | None:
        """The child slot of ``site`` (and member ``key``), if any."""
        place = self.slot_positions().get((site, key))
        return None if place is None else self.children[place]

    def live_children(self) -> tuple[ChildSlot, ...]:
        """The slots that need an activation: running or retrying."""
        return tuple(slot for slot in self.children if slot.live)

    def next_deadline(self) -> float | None:
        """The earliest timer deadline, if any timer is armed."""
        return min((timer.deadline for timer in self.timers), default=None)


def _positions_of(children: tuple[ChildSlot, ...]) -> immutables.Map[SlotKey, int]:
    """The place of each slot in ``children``, by ``(site, key)``: O(n), done once per lineage."""
    if not children:
        return _NO_POSITIONS
    positions = _NO_POSITIONS.mutate()
    for place, slot in enumerate(children):
        positions[(slot.site, slot.key)] = place
    return positions.finish()


_NO_POSITIONS: immutables.Map[SlotKey, int] = immutables.Map()


class SlotIndex(Mapping[SlotKey, ChildSlot]):
    """A snapshot's child slots by ``(site, key)``: a read-only view over ``children`` and their places."""

    __slots__ = ("_children", "_positions")

    def __init__(self, children: tuple[ChildSlot, ...], positions: immutables.Map[SlotKey, int]) -> None:
        self._children = children
        self._positions = positions

    def __getitem__(self, key: SlotKey) -> ChildSlot:
        return self._children[self._positions[key]]

    def get(self, key: SlotKey, default: Any = None) -> Any:
        place = self._positions.get(key)
        return default if place is None else self._children[place]

    def __contains__(self, key: object) -> bool:
        return key in self._positions

    def __iter__(self) -> Iterator[SlotKey]:
        return ((slot.site, slot.key) for slot in self._children)

    def __len__(self) -> int:
        return len(self._children)


class SlotTable:
    """A macrostep's working copy of its snapshot's child slots: O(1) to take, O(changed) to change.

    It starts as the snapshot's ``children`` and their places, shared; the
    first change copies the tuple into a list (one C-level copy) and starts
    a mutation of the places (a persistent map: only the paths to changed
    keys are copied). A replaced slot keeps its place, a new one goes last,
    a removed one leaves a hole that :meth:`finish` closes (the places are
    then rebuilt, once, when next asked for). Lookups and ``in`` are O(1);
    ``values`` and ``items`` list the slots in order.
    """

    __slots__ = ("_base", "_count", "_holes", "_items", "_mutation", "_positions")

    def __init__(
        self, children: tuple[ChildSlot, ...], positions: immutables.Map[SlotKey, int] | None
    ) -> None:
        self._base = children
        self._positions = positions
        self._items: list[ChildSlot | None] | None = None
        self._mutation: immutables.MapMutation[SlotKey, int] | None = None
        self._count = len(children)
        self._holes = False

    def _places(self) -> immutables.Map[SlotKey, int] | immutables.MapMutation[SlotKey, int]:
        mutation = self._mutation
        if mutation is not None:
            return mutation
        positions = self._positions
        if positions is None:
            positions = self._positions = _positions_of(self._base)
        return positions

    def _writable(self) -> tuple[list[ChildSlot | None], immutables.MapMutation[SlotKey, int]]:
        items = self._items
        if items is None:
            items = self._items = list(self._base)
        mutation = self._mutation
        if mutation is None:
            places = self._places()
            assert isinstance(places, immutables.Map)
            mutation = self._mutation = places.mutate()
        return items, mutation

    def get(self, key: SlotKey) -> ChildSlot | None:
        """The slot of ``key``, if any."""
        place = self._places().get(key)
        if place is None:
            return None
        items = self._items
        return self._base[place] if items is None else items[place]

    def __getitem__(self, key: SlotKey) -> ChildSlot:
        slot = self.get(key)
        if slot is None:
            raise KeyError(key)
        return slot

    def __contains__(self, key: object) -> bool:
        return key in self._places()

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def values(self) -> tuple[ChildSlot, ...]:
        """The slots, in order."""
        items = self._items
        if items is None:
            return self._base
        if self._holes:
            return tuple(slot for slot in items if slot is not None)
        return tuple(items)  # type: ignore[arg-type] # no holes: no None

    def items(self) -> list[tuple[SlotKey, ChildSlot]]:
        """``((site, key), slot)`` pairs, in order."""
        return [((slot.site, slot.key), slot) for slot in self.values()]

    def put(self, slot: ChildSlot) -> ChildSlot | None:
        """Set the slot of ``(slot.site, slot.key)``, where the old one stood or last; the old one, if any."""
        key = (slot.site, slot.key)
        items, mutation = self._writable()
        place = mutation.get(key)
        if place is not None:
            old = items[place]
            items[place] = slot
            return old
        mutation[key] = len(items)
        items.append(slot)
        self._count += 1
        return None

    def pop(self, key: SlotKey) -> ChildSlot:
        """Forget the slot of ``key`` and return it (``KeyError`` when there is none)."""
        items, mutation = self._writable()
        place = mutation[key]
        del mutation[key]
        old = items[place]
        assert old is not None
        items[place] = None
        self._holes = True
        self._count -= 1
        return old

    def finish(self) -> tuple[tuple[ChildSlot, ...], immutables.Map[SlotKey, int] | None]:
        """The slots as a snapshot keeps them: ``children`` and their places (None: to be rebuilt).

        The table goes on from there: it may be changed and finished again.
        """
        items = self._items
        if items is None:
            return self._base, self._positions
        children = self.values()
        mutation = self._mutation
        positions = None if self._holes or mutation is None else mutation.finish()
        self._base, self._positions, self._holes = children, positions, False
        self._items = self._mutation = None
        return children, positions


def derived(
    snapshot: Snapshot[C],
    positions: immutables.Map[SlotKey, int] | None,
    unfinished: dict[str, int],
    base: Snapshot[Any],
    changes: SlotChanges,
) -> Snapshot[C]:
    """``snapshot``, which the interpreter computed from ``base``, with its slot places and changes kept.

    ``positions`` must be the places of ``snapshot.children`` (None: built
    when first asked for) and ``unfinished`` their counts (see
    :meth:`Snapshot.unfinished_counts`); neither is copied: the caller
    gives them up.
    """
    object.__setattr__(snapshot, "_positions", positions)
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
