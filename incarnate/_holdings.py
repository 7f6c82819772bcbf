"""What one engine holds: its ownership incarnation per instance, which are acquired, which were fenced.

The durable side of ownership is in the store (each instance's ``owner`` and
``incarnation``, the heartbeats); this is the engine's in-memory side, in
one object with one lock, which the commit path, recovery and the worker
ask and tell — nobody else mutates it:

- **held**: the instances this engine owns, each at the incarnation its
  claim (or creation) landed with; a write is fenced against it;
- **acquired**: the held instances whose ResumePlan was validated and whose
  children were re-attached here, so they may run;
- **fenced**: instances dropped after a write was refused because another
  engine claimed them; queued work for them is a no-op until this engine
  takes them over again. Only the most recent ``limit`` are remembered: an
  older one that comes back is taken over only if its owner is not live,
  and fencing still refuses a stale write.

A finished instance is forgotten (:meth:`finish`), so memory stays flat in
the number of instances an engine has handled: it grows with the instances
in flight only.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from uuid import UUID


class Holdings:
    """An engine's held incarnations, acquired instances and recently fenced ones, under one lock."""

    def __init__(self, fenced_limit: int = 50_000) -> None:
        self._lock = threading.Lock()
        self._held: dict[UUID, int] = {}
        self._acquired: set[UUID] = set()
        self._fenced: OrderedDict[UUID, None] = OrderedDict()
        self.fenced_limit = fenced_limit
        self._acquisitions = 0

    # ------------------------------------------------------------ questions

    def incarnation(self, instance_id: UUID) -> int | None:
        """The incarnation this engine holds ``instance_id`` at, or None when it does not hold it."""
        with self._lock:
            return self._held.get(instance_id)

    def holds(self, instance_id: UUID) -> bool:
        """Whether this engine holds ``instance_id``."""
        with self._lock:
            return instance_id in self._held

    def holds_at(self, instance_id: UUID, incarnation: int) -> bool:
        """Whether this engine holds ``instance_id`` at exactly ``incarnation``."""
        with self._lock:
            return self._held.get(instance_id) == incarnation

    def is_acquired(self, instance_id: UUID) -> bool:
        """Whether ``instance_id`` was acquired here (it may run)."""
        with self._lock:
            return instance_id in self._acquired

    def is_fenced(self, instance_id: UUID) -> bool:
        """Whether ``instance_id`` was dropped after a fenced write (and not taken back since)."""
        with self._lock:
            return instance_id in self._fenced

    def runnable(self, instance_id: UUID) -> bool:
        """Whether ``instance_id`` is acquired here and not fenced: its work may be taken on this thread."""
        with self._lock:
            return instance_id in self._acquired and instance_id not in self._fenced

    def held(self) -> dict[UUID, int]:
        """A copy of the held incarnations, by instance."""
        with self._lock:
            return dict(self._held)

    def acquired(self) -> frozenset[UUID]:
        """A copy of the acquired instances."""
        with self._lock:
            return frozenset(self._acquired)

    def acquisitions(self) -> int:
        """How many times an instance became acquired here (a counter that never goes down)."""
        with self._lock:
            return self._acquisitions

    def sizes(self) -> tuple[int, int, int]:
        """How many instances are held, acquired and remembered as fenced (for memory checks)."""
        with self._lock:
            return len(self._held), len(self._acquired), len(self._fenced)

    # ------------------------------------------------------------ changes

    def hold(self, instance_id: UUID, incarnation: int) -> None:
        """A claim landed: hold ``instance_id`` at ``incarnation``; it must be acquired again to run."""
        with self._lock:
            self._held[instance_id] = incarnation
            self._fenced.pop(instance_id, None)
            self._acquired.discard(instance_id)

    def created(self, instances: Iterable[tuple[UUID, int]]) -> None:
        """Instances created by a commit of this engine: held at their incarnation, and acquired."""
        with self._lock:
            for instance_id, incarnation in instances:
                self._held[instance_id] = incarnation
                self._acquired.add(instance_id)

    def acquire(self, instance_id: UUID) -> None:
        """``instance_id`` was acquired here: it may run."""
        with self._lock:
            if instance_id not in self._acquired:
                self._acquired.add(instance_id)
                self._acquisitions += 1

    def unacquire(self, *instance_ids: UUID) -> None:
        """These instances must be acquired again before they run (parked, migrated, resolved)."""
        with self._lock:
            self._acquired.difference_update(instance_ids)

    def release(self, instance_id: UUID) -> None:
        """Stop holding ``instance_id`` (another engine owns it now); not marked fenced."""
        with self._lock:
            self._held.pop(instance_id, None)
            self._acquired.discard(instance_id)

    def fence(self, instance_id: UUID) -> None:
        """Drop ``instance_id`` after a fenced write: queued work for it does nothing until taken back."""
        with self._lock:
            self._held.pop(instance_id, None)
            self._acquired.discard(instance_id)
            self._fenced[instance_id] = None
            self._fenced.move_to_end(instance_id)
            while len(self._fenced) > self.fenced_limit:
                self._fenced.popitem(last=False)

    def finish(self, instance_id: UUID) -> None:
        """``instance_id`` finished: forget it (it runs nowhere again)."""
        with self._lock:
            self._held.pop(instance_id, None)
            self._acquired.discard(instance_id)
            self._fenced.pop(instance_id, None)
