"""Group commit: the units of work of concurrent threads saved in one transaction.

Every commit of an engine goes through its :class:`GroupCommit`. A thread
that commits while another thread's transaction is in flight queues its
unit; when that transaction ends, the first waiting thread becomes the
leader and writes every queued unit (up to ``max_batch``, none two writing
the same instance) in one transaction, then wakes the others. Under load
one transaction — on PostgreSQL one hold of the events table's lock, on
SQLite one fsync — thus carries many instances' units; alone, a thread
commits at once (``max_wait`` can make a leader wait for company).

Each thread returns only once its own unit is stored, and sees only its own
failure: when the joint transaction fails (a version conflict, an oversized
event, a refused write), nothing of it was stored and every unit of the
batch is written again on its own, so a conflict or a fence on one instance
never costs the others their work.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

from aggregates import Instance
from incarnate.errors import ConfigurationError

DEFAULT_MAX_BATCH = 64
"""Units of work one transaction carries at most."""

DEFAULT_MAX_WAIT = 0.0
"""Seconds a leader waits for more units before writing (0: write what is queued at once)."""

Write = Callable[[Sequence[Instance]], None]
"""Store the pending events of the instances in one transaction; nothing is stored if it raises."""


class _Unit:
    """One thread's instances, queued until a leader writes them."""

    __slots__ = ("done", "error", "ids", "instances", "wake")

    def __init__(self, instances: Sequence[Instance]) -> None:
        self.instances = instances
        self.ids = frozenset(instance.id for instance in instances)
        self.done = False
        self.error: BaseException | None = None
        self.wake: threading.Lock | None = None
        """Released when the unit is written, or when its thread is to lead the next transaction.

        Made held (under the queue's lock) only for a unit whose thread follows
        a leader, which waits by acquiring it: a thread that leads its own
        unit never waits on it. A plain lock, not a ``threading.Event``: the
        one waiter blocks in C, and waking it costs one release, where an
        event takes a condition, a waiter lock and their Python frames.
        """


class GroupCommit:
    """Writes the units of work of concurrent threads together (see the module's docstring)."""

    def __init__(
        self, write: Write, *, max_batch: int = DEFAULT_MAX_BATCH, max_wait: float = DEFAULT_MAX_WAIT
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise ConfigurationError(
                f"commit_batch must be a whole number of at least 1 unit of work, got {max_batch!r}; "
                f"the default is {DEFAULT_MAX_BATCH} (1 commits every unit alone)"
            )
        if (
            isinstance(max_wait, bool)
            or not isinstance(max_wait, int | float)
            or not math.isfinite(max_wait)
            or max_wait < 0
        ):
            raise ConfigurationError(
                f"commit_wait must be a number of seconds of at least 0, got {max_wait!r}; "
                f"the default is {DEFAULT_MAX_WAIT:g} (write what is queued at once)"
            )
        self.write = write
        self.max_batch = max_batch
        self.max_wait = float(max_wait)
        self._cond = threading.Condition()  # guards the queue and the lead; a leader waits on it for company
        self._queue: list[_Unit] = []
        self._leading = False
        self.transactions = 0
        """Transactions written (joint and single, the retries of a failed joint one too)."""
        self.units = 0
        """Units of work stored."""

    def save(self, instances: Sequence[Instance]) -> None:
        """Store ``instances``' pending events atomically, maybe in one transaction with other threads' units.

        Returns once they are stored; raises what writing them alone raised
        (``IntegrityError`` on a version conflict, and so on).
        """
        unit = _Unit(instances)
        with self._cond:
            follow = self._leading
            if follow:
                unit.wake = threading.Lock()
                unit.wake.acquire()
            self._queue.append(unit)
            self._leading = True
            if follow and self.max_wait > 0:
                self._cond.notify()  # a leader waiting for company counts the queue again
        if unit.wake is not None:
            unit.wake.acquire()  # written by a leader, or handed the lead
            if unit.done:
                return self._outcome(unit)
        try:
            while not unit.done:
                self._lead()
        finally:
            with self._cond:
                if self._queue:
                    self._wake(self._queue[0])  # the oldest waiting thread leads next
                else:
                    self._leading = False
        return self._outcome(unit)

    def queued(self) -> int:
        """Units waiting for a transaction now (the one being written not counted)."""
        with self._cond:
            return len(self._queue)

    @staticmethod
    def _outcome(unit: _Unit) -> None:
        if unit.error is not None:
            raise unit.error

    def _lead(self) -> None:
        """Write one batch from the head of the queue (the leader's thread, holding the lead)."""
        with self._cond:
            if self.max_wait > 0 and len(self._queue) < self.max_batch:
                deadline = time.monotonic() + self.max_wait
                while len(self._queue) < self.max_batch:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
            batch = self._take()
        try:
            self._write(batch)
        finally:
            for unit in batch:
                unit.done = True
                self._wake(unit)

    @staticmethod
    def _wake(unit: _Unit) -> None:
        """Wake the unit's thread, if it waits (the leader's own unit has no one waiting).

        A unit handed the lead is released once to lead and again when its own
        write is done, after it has acquired the lock (nobody else leads
        meanwhile); a release of a lock already released is a wake already
        given, as setting an event twice is.
        """
        wake = unit.wake
        if wake is not None:
            try:  # noqa: SIM105 - a try costs nothing here; contextlib.suppress makes an object per wake
                wake.release()
            except RuntimeError:  # released already: its thread is awake or about to be
                pass

    def _take(self) -> list[_Unit]:
        """Up to ``max_batch`` queued units, oldest first, no two writing one instance (lock held)."""
        batch: list[_Unit] = []
        writing: set[object] = set()
        kept: list[_Unit] = []
        for unit in self._queue:
            if len(batch) < self.max_batch and writing.isdisjoint(unit.ids):
                batch.append(unit)
                writing.update(unit.ids)
            else:
                kept.append(unit)  # the next batch: it writes an instance this one writes
        self._queue = kept
        return batch

    def _write(self, batch: list[_Unit]) -> None:
        """The batch in one transaction; when that fails, each unit alone with its own outcome."""
        if len(batch) > 1:
            try:
                self.transactions += 1
                self.write([instance for unit in batch for instance in unit.instances])
            except Exception:  # noqa: BLE001 - nothing was stored: each unit finds its own outcome below
                pass
            except BaseException as error:  # noqa: BLE001 - an interrupt: no unit may pass for stored
                for unit in batch:
                    unit.error = error
                return
            else:
                self.units += len(batch)
                return
        for unit in batch:
            try:
                self.transactions += 1
                self.write(unit.instances)
            except BaseException as error:  # noqa: BLE001 - the unit's thread raises it
                unit.error = error
            else:
                self.units += 1
