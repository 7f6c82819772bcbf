"""Time travel: an instance, or its whole call tree, as it was at one position of its history.

:class:`History` reads what it needs from the journal and folds it with
:func:`projections.instance_at` (the aggregate's own replay): the latest
stored ``eventsourcing`` snapshot at or before the version asked for, when
there is one, and the events after it. Stepping back and forth through a
long history costs little more than its first position: every
:data:`CHECKPOINT_EVERY` versions folded, a copy of the instance is kept in
memory (bounded, oldest dropped first), and a later position folds on from
the nearest one at or before it.

A position of one instance is its version (1 is its creation); a position
of a call tree is how many of its instances' events, interleaved by time,
have happened (1 is the subject's creation). Nothing here writes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from uuid import UUID

import attrs
from eventsourcing.persistence import PersistenceError

from aggregates import Instance, InstanceSnapshot
from incarnate._copies import clone
from incarnate._journal import Journal, decoding
from incarnate.errors import PositionOutOfRange, StorageError, UnknownInstance
from projections import born, embedded_tasks, instance_at, interleave, versions_at

CHECKPOINT_EVERY = 250
"""Versions between two in-memory checkpoints of an instance being stepped through."""

CHECKPOINTED_INSTANCES = 64
"""How many instances' in-memory checkpoints are kept (the least recently used go first)."""


@attrs.frozen
class Moment:
    """An instance, or its call tree, as it was at one position of its history.

    ``instances`` holds each instance of the scope as it was then (its
    aggregate at that version: configuration, context, timers, inbox,
    retained activations, status), the subject first; an instance of the
    tree not created yet at that position is absent. ``events`` is the
    scope's history in position order, whole or a window of it (position
    ``p`` is ``events[p - first]``), so a view can show what came before
    and after.
    """

    subject: UUID
    tree: bool
    position: int
    """1-based: a version of the subject, or for a tree a position in its interleaved history."""
    positions: int
    """How many positions the history has (the last one is now)."""
    events: tuple[Any, ...]
    instances: Mapping[UUID, Instance]
    first: int = 1
    """The position of ``events[0]``: a moment may hold only a window of its history (see ``Engine.at``)."""

    @property
    def event(self) -> Any:
        """The stored event at this position."""
        return self.events[self.position - self.first]

    @property
    def instance(self) -> Instance:
        """The subject as it was at this position."""
        return self.instances[self.subject]

    @property
    def version(self) -> int:
        """The subject's version at this position."""
        return self.instance.version


class History:
    """Reads an instance's (or a call tree's) past from the journal, with checkpoints kept in memory."""

    def __init__(
        self,
        journal: Journal,
        *,
        every: int = CHECKPOINT_EVERY,
        embedded: Callable[[UUID], list[Any]] | None = None,
    ) -> None:
        self.journal = journal
        self.every = every
        self.embedded: Callable[[UUID], list[Any]] = embedded or _no_events
        """The events of an embedded task child, rebuilt from its parent's ([] for any other id)."""
        self._lock = threading.Lock()
        self._checkpoints: OrderedDict[UUID, dict[int, Instance]] = OrderedDict()

    # ---------------------------------------------------------- one instance

    def head(self, instance_id: UUID) -> int:
        """The latest stored version of an instance (:class:`UnknownInstance` if it has none)."""
        try:
            found = self.journal.recorder.select_events(instance_id, desc=True, limit=1)
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance_id}: {error}") from error
        if not found:
            rebuilt = self.embedded(instance_id)
            if not rebuilt:
                raise UnknownInstance(instance_id)
            return len(rebuilt)
        return found[0].originator_version

    def at(self, instance_id: UUID, version: int, *, head: int | None = None) -> Instance:
        """A private copy of the instance as it was at ``version`` (1 is its creation)."""
        last = self.head(instance_id) if head is None else head
        check_position(instance_id, version, last, "version")
        start: InstanceSnapshot | Instance | None = None
        after: int | None = None
        kept = self._nearest(instance_id, version)
        if kept is not None:
            start, after = clone(kept), kept.version
        stored = self._stored_snapshot(instance_id, version)
        if stored is not None and (after is None or stored.originator_version > after):
            start, after = stored, stored.originator_version
        with decoding(instance_id):
            events = list(self.journal.events.get(instance_id, gt=after, lte=version))
        if not events and start is None:  # no stream: an embedded task, rebuilt from its parent's
            return instance_at(self.embedded(instance_id), version)
        folded: Instance = clone(self._fold(instance_id, events, version, start))
        return folded

    def _fold(
        self,
        instance_id: UUID,
        events: Sequence[Any],
        version: int,
        start: InstanceSnapshot | Instance | None,
    ) -> Instance:
        """Fold ``events`` on ``start`` up to ``version``, keeping a checkpoint every ``every`` versions."""
        aggregate: InstanceSnapshot | Instance | None = start
        begin = 0
        for index, event in enumerate(events):
            if event.originator_version % self.every == 0 and event.originator_version < version:
                folded = instance_at(events[begin : index + 1], event.originator_version, start=aggregate)
                self._keep(instance_id, clone(folded))
                aggregate, begin = folded, index + 1
        return instance_at(events[begin:], version, start=aggregate)

    def _stored_snapshot(self, instance_id: UUID, version: int) -> InstanceSnapshot | None:
        snapshots = self.journal.snapshots
        if snapshots is None:
            return None
        for found in snapshots.get(instance_id, lte=version, desc=True, limit=1):
            if isinstance(found, InstanceSnapshot):
                return found
        return None

    def _nearest(self, instance_id: UUID, version: int) -> Instance | None:
        with self._lock:
            kept = self._checkpoints.get(instance_id)
            if not kept:
                return None
            self._checkpoints.move_to_end(instance_id)
            best = max((v for v in kept if v <= version), default=None)
            return None if best is None else kept[best]

    def _keep(self, instance_id: UUID, instance: Instance) -> None:
        with self._lock:
            kept = self._checkpoints.setdefault(instance_id, {})
            kept[instance.version] = instance
            self._checkpoints.move_to_end(instance_id)
            while len(self._checkpoints) > CHECKPOINTED_INSTANCES:
                self._checkpoints.popitem(last=False)

    def forget(self, instance_id: UUID) -> None:
        """Drop the checkpoints kept of an instance."""
        with self._lock:
            self._checkpoints.pop(instance_id, None)

    # ------------------------------------------------------------- moments

    def moment(self, instance_id: UUID, version: int, window: int | None = None) -> Moment:
        """The instance at ``version`` (see :class:`Moment`), with ``window`` events of history either side.

        ``window`` None keeps the whole history (read from the store: O(history)).
        """
        last = self.head(instance_id)
        check_position(instance_id, version, last, "version")
        first = 1 if window is None else max(1, version - window)
        upto = None if window is None else version + window
        with decoding(instance_id):
            events = tuple(
                self.journal.events.get(instance_id, gt=first - 1 if first > 1 else None, lte=upto)
            )
        if not events:  # an embedded task: its rebuilt events
            events = tuple(
                e for e in self.embedded(instance_id) if first <= e.originator_version <= (upto or last)
            )
        instance = self.at(instance_id, version, head=last)
        return Moment(instance_id, False, version, last, events, {instance_id: instance}, first)

    def tree_moment(self, instance_id: UUID, position: int) -> Moment:
        """The call tree under ``instance_id`` at ``position`` of its interleaved history.

        The members are found from the histories themselves (each member's
        ``Birth`` and ``ChildResume`` events name its children, finished
        ones too), parents before their children.
        """
        members: list[UUID] = []
        histories: dict[UUID, Sequence[Any]] = {}
        embedded: set[UUID] = set()
        stack = [instance_id]
        while stack:
            member = stack.pop()
            if member in histories:
                continue
            with decoding(member):
                read: list[Any] = list(self.journal.events.get(member))
            histories[member] = read
            members.append(member)
            rebuilt = embedded_tasks(read)  # its embedded tasks: members whose events are its facts
            for task_id, task_events in rebuilt.items():
                histories[task_id] = task_events
                members.append(task_id)
                embedded.add(task_id)
            stack.extend(child for child in reversed(born(read)) if child not in rebuilt)
        events = interleave({m: h for m, h in histories.items() if h})
        if not histories.get(instance_id):
            raise UnknownInstance(instance_id)
        check_position(instance_id, position, len(events), "position in the call tree's history")
        versions = versions_at(events, position)
        instances: dict[UUID, Instance] = {}
        for member in members:
            version = versions.get(member)
            if version is None:
                continue
            history = histories[member]
            if member in embedded:
                instances[member] = instance_at(history, version)
            else:
                instances[member] = self.at(member, version, head=history[-1].originator_version)
        return Moment(instance_id, True, position, len(events), tuple(events), instances)


def _no_events(instance_id: UUID) -> list[Any]:
    return []


def check_position(instance_id: UUID, position: int, last: int, what: str) -> None:
    """Raise :class:`PositionOutOfRange` unless ``1 <= position <= last``."""
    if not 1 <= position <= last:
        raise PositionOutOfRange(instance_id, position, last, what)
