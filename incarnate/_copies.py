"""The charts an engine runs, and its in-memory copies: committed instances and decoded snapshots.

:class:`Catalog` holds the registered charts, their codecs and the task
functions. :class:`Copies` keeps, per instance, the copy this engine last
committed and the snapshot decoded at that version, so the next unit of
work neither reads the store nor decodes the whole snapshot again. Both
caches are bounded (the oldest entries go first) and every mutation holds
one lock; a finished instance leaves them at its commit, so memory stays
flat in the number of instances an engine has handled. What remains of it
is its ending, when that is final and small (:meth:`Copies.ended`), so
that ``handle.result()`` on the engine that finished it reads nothing.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from uuid import UUID

from aggregates import Instance, InstanceKind, InstanceStatus
from incarnate._tasks import TaskFunction
from incarnate.errors import ConfigurationError, EngineError
from statechart import Chart, JsonValue, Registry
from statechart.codec import SnapshotCodec, SnapshotDelta
from statechart.errors import CodecError
from statechart.snapshot import Snapshot


def clone(aggregate: Any) -> Any:
    """A shallow copy of an aggregate without its pending events (its state is immutable values)."""
    copy = object.__new__(type(aggregate))
    copy.__dict__.update(aggregate.__dict__)
    copy.__dict__["_pending_events"] = []
    return copy


_SNAPSHOT_EVENTS = (Instance.Stepped, Instance.Migrated)
"""The events that change an instance's statechart snapshot."""


def keeps_snapshot(events: Iterable[object]) -> bool:
    """Whether ``events`` leave an instance's statechart snapshot as it was."""
    return not any(isinstance(event, _SNAPSHOT_EVENTS) for event in events)


ENDINGS_KEPT = 1_000
"""How many final endings :class:`Copies` remembers (the oldest go first)."""

SMALL_ENDING = 16 * 1024
"""The most an ending's output and error may hold to be remembered (as :func:`smaller_than` counts)."""

FINAL = frozenset({InstanceStatus.DONE, InstanceStatus.CANCELLED})
"""The endings nothing changes afterwards: a failed or parked root can be redriven, an orphan resolved."""


def smaller_than(value: JsonValue, budget: int) -> int:
    """What is left of ``budget`` once ``value`` is counted (negative: it did not fit).

    A value counts its text's characters, 8 for itself and 8 for each item
    of a container. The walk stops as soon as the budget is spent, and a
    container too long for what is left is not walked, so a large value
    costs what a value of ``budget`` does.
    """
    pending: list[JsonValue] = [value]
    while pending and budget >= 0:
        item = pending.pop()
        budget -= 8
        if isinstance(item, str):
            budget -= len(item)
        elif isinstance(item, dict):
            budget -= 8 * len(item)
            if budget >= 0:
                for key, inner in item.items():
                    budget -= len(key)
                    pending.append(inner)
        elif isinstance(item, list):
            budget -= 8 * len(item)
            if budget >= 0:
                pending.extend(item)
    return budget


def make_room(cache: OrderedDict[UUID, Any], size: int, incoming: UUID) -> None:
    """Evict the oldest entries until ``incoming`` fits in ``size`` entries (the cache lock held).

    Every mutation of a cache must hold its lock: an ``OrderedDict`` calls the
    keys' Python ``__hash__``/``__eq__`` (a ``UUID``'s are Python code) in the
    middle of a pop or an insert, where another thread may run, and two
    concurrent mutations can corrupt its linked list (seen as a segmentation
    fault under a tiny switch interval). Lookups alone are plain dict reads
    and need no lock.
    """
    if incoming in cache:
        return
    while len(cache) >= size:
        try:
            cache.popitem(last=False)
        except KeyError:  # emptied meanwhile
            return


class Catalog:
    """The registered charts (with the companions they invoke), their codecs, and the task functions."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.charts: dict[str, Chart[Any]] = {}
        self.tasks: dict[str, TaskFunction] = {}
        self.codecs: dict[str, SnapshotCodec[Any]] = {}
        self._tasks_complete = False

    def register(self, chart: Chart[Any]) -> None:
        """Register a chart under its name, with the companion charts it invokes (``Chart.companions``)."""
        self.registry.add(chart)  # adds the companions too, and refuses a clash of names
        self._tasks_complete = False
        pending = [chart]
        while pending:
            registered = pending.pop()
            if self.charts.get(registered.name) is registered:
                continue
            self.charts[registered.name] = registered
            self.codecs[registered.name] = SnapshotCodec(registered)
            pending.extend(registered.companions)

    def register_task(self, name: str, fn: TaskFunction) -> None:
        """Register a task callable (sync or async) under ``name``."""
        if not callable(fn):
            raise ConfigurationError(f"task {name!r} must be callable, got {fn!r}")
        self.registry.add_task(name)
        self.tasks[name] = fn
        self._tasks_complete = False

    def require_tasks(self) -> None:
        """Raise :class:`~statechart.errors.ChartInvalid` unless every task the charts invoke is known."""
        if not self._tasks_complete:
            self.registry.validate()
            self._tasks_complete = True

    def chart(self, name: str) -> Chart[Any]:
        """The chart registered under ``name`` (:class:`EngineError` naming the registered ones if none)."""
        found = self.charts.get(name)
        if found is None:
            raise EngineError(f"chart {name!r} is not registered (registered: {sorted(self.charts)})")
        return found

    def name_of(self, chart: str | Chart[Any], engine_id: str) -> str:
        """The name of ``chart``; a chart object must be the one registered under its name."""
        if isinstance(chart, str):
            return chart
        registered = self.charts.get(chart.name)
        if registered is not None and registered is not chart and registered.fingerprint != chart.fingerprint:
            raise EngineError(
                f"chart {chart.name!r} given to engine {engine_id} differs from the chart registered "
                f"under that name (fingerprint {chart.fingerprint[:12]} vs {registered.fingerprint[:12]}); "
                f"fix: pass the registered chart object, or register this version"
            )
        return chart.name


class Copies:
    """This engine's last committed copy and decoded snapshot of each instance, bounded, under one lock."""

    def __init__(self, catalog: Catalog, size: int) -> None:
        self.catalog = catalog
        self.size = size
        self._lock = threading.Lock()
        self._latest: OrderedDict[UUID, Instance] = OrderedDict()
        self._decoded: OrderedDict[UUID, tuple[int, Snapshot[Any]]] = OrderedDict()
        self._endings: OrderedDict[UUID, tuple[InstanceStatus, JsonValue, JsonValue]] = OrderedDict()
        self._waiting: dict[UUID, list[Callable[[], None]]] = {}
        """Per instance something waits here to end: what its ending calls (see :meth:`watching`)."""
        self._saving: dict[UUID, list[Callable[[], None]]] = {}
        """Per instance something waits here for its next save (``watching(..., every_save=True)``)."""

    # ----------------------------------------------------------- codec

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        """A snapshot as stored data."""
        return self.catalog.codecs[chart.name].encode(snapshot)

    def encode_delta(
        self, chart: Chart[Any], before: Snapshot[Any] | None, after: Snapshot[Any]
    ) -> SnapshotDelta:
        """What changed from ``before`` (None: a first macrostep) to ``after``, as stored data."""
        return self.catalog.codecs[chart.name].encode_delta(before, after)

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        """The instance's current snapshot, decoded through its registered chart."""
        cached = self._decoded.get(instance.id)
        if cached is not None:
            if cached[0] == instance.version:
                return cached[1]
            # Events pending on top of the remembered version that leave the snapshot as it
            # was (a message accepted in this unit of work) need no decoding of the whole.
            pending = instance.pending_events
            if cached[0] == instance.version - len(pending) and keeps_snapshot(pending):
                return cached[1]
        data = instance.record.snapshot
        if data is None:
            raise CodecError(chart.name, "snapshot", f"instance {instance.id} has no snapshot yet")
        return self.catalog.codecs[chart.name].decode(data)

    def decoded_at(self, instance: Instance) -> Snapshot[Any] | None:
        """The snapshot remembered at exactly the instance's version, if any (nothing is decoded)."""
        cached = self._decoded.get(instance.id)
        if cached is None or cached[0] != instance.version:
            return None
        return cached[1]

    # ----------------------------------------------------------- remembering

    def remember_snapshot(self, instance_id: UUID, version: int, snapshot: Snapshot[Any]) -> None:
        """Keep the decoded snapshot of ``instance_id`` at ``version`` (recovery's ResumePlan decoded it)."""
        with self._lock:
            make_room(self._decoded, self.size, instance_id)
            self._decoded[instance_id] = (version, snapshot)

    def remember(
        self, instance: Instance, decoded: Snapshot[Any] | None = None, unchanged_since: int | None = None
    ) -> None:
        """Keep the decoded snapshot of the version just committed, for the next unit of work.

        ``unchanged_since`` is the version before the commit when the commit
        did not change the snapshot (a message accepted, an activation
        settled): a snapshot remembered at that version is carried forward
        instead of decoding the whole snapshot again.
        """
        record = instance.record
        chart = self.catalog.charts.get(record.name)
        if chart is None or record.snapshot_parts is None or record.kind is not InstanceKind.CHART:
            return
        snapshot = decoded
        if snapshot is None and unchanged_since is not None:
            known = self._decoded.get(instance.id)
            if known is not None and known[0] == unchanged_since:
                snapshot = known[1]
        if snapshot is None:
            whole = record.snapshot  # built only here: O(slots)
            if whole is None:
                return
            try:
                snapshot = self.catalog.codecs[chart.name].decode(whole)
            except CodecError:
                return
        with self._lock:
            known = self._decoded.get(instance.id)
            if known is not None and known[0] > instance.version:
                return  # another thread remembered a newer version
            make_room(self._decoded, self.size, instance.id)
            self._decoded[instance.id] = (instance.version, snapshot)

    def saw(self, instances: Iterable[Instance]) -> None:
        """Remember the committed copies (newest version wins; the oldest entries go first); wake watchers.

        Whatever watches one of them with ``every_save`` (:meth:`watching`) is woken after the lock is let go.
        """
        wakes: list[Callable[[], None]] = []
        with self._lock:
            latest = self._latest
            saving = self._saving
            for instance in instances:
                instance_id = instance.id
                known = latest.get(instance_id)
                if known is None or known.version < instance.version:
                    make_room(latest, self.size, instance_id)
                    latest[instance_id] = clone(instance)
                if saving:
                    wakes.extend(saving.get(instance_id, ()))
        for wake in wakes:
            wake()

    def ended(self, finished: list[Instance]) -> None:
        """Remember how these finished instances this engine just saved ended; wake their waiters.

        Only a final ending (:data:`FINAL`) whose output and error are small
        (:data:`SMALL_ENDING`) is kept, :data:`ENDINGS_KEPT` at most. Whatever
        is :meth:`watching` one of them is woken, whatever its ending.
        """
        if not finished:
            return  # the usual save: nothing ended, no lock taken
        kept = [
            (instance.id, (record.status, record.output, record.error))
            for instance in finished
            if (record := instance.record).status in FINAL
            and smaller_than([record.output, record.error], SMALL_ENDING) >= 0
        ]
        wakes: list[Callable[[], None]] = []
        with self._lock:
            for instance_id, ending in kept:
                make_room(self._endings, min(self.size, ENDINGS_KEPT), instance_id)
                self._endings[instance_id] = ending
            if self._waiting:
                for instance in finished:
                    wakes.extend(self._waiting.get(instance.id, ()))
        for wake in wakes:
            wake()

    @contextmanager
    def watching(
        self, instance_id: UUID, wake: Callable[[], None], *, every_save: bool = False
    ) -> Iterator[None]:
        """Call ``wake`` when this engine saves the ending of ``instance_id``, while the block runs.

        With ``every_save``, each time this engine saves the instance (see
        :meth:`saw`). Watch before reading whether it has ended: an ending
        saved between the read and the wait calls ``wake`` all the same.
        ``wake`` runs on the saving thread, after the save: it must only
        signal (set an event, schedule a callback on a loop).
        """
        table = self._saving if every_save else self._waiting
        with self._lock:
            table.setdefault(instance_id, []).append(wake)
        try:
            yield
        finally:
            with self._lock:
                wakes = table[instance_id]
                wakes.remove(wake)
                if not wakes:
                    del table[instance_id]

    def ending(self, instance_id: UUID) -> tuple[InstanceStatus, JsonValue, JsonValue] | None:
        """The remembered final ending of ``instance_id``: status, output, error (see :meth:`ended`)."""
        return self._endings.get(instance_id)

    def latest(self, instance_id: UUID) -> Instance | None:
        """A private copy of the version this engine last committed, if it remembers one."""
        latest = self._latest.get(instance_id)
        return clone(latest) if latest is not None else None

    def stale(self, instance_ids: Iterable[UUID]) -> None:
        """Forget the committed copies of instances whose save conflicted (the store has newer)."""
        with self._lock:
            for instance_id in instance_ids:
                self._latest.pop(instance_id, None)

    def drop(self, instance_ids: Iterable[UUID]) -> None:
        """Forget the committed copies and decoded snapshots of these instances (not their final endings)."""
        with self._lock:
            for instance_id in instance_ids:
                self._latest.pop(instance_id, None)
                self._decoded.pop(instance_id, None)

    def remembered(self) -> frozenset[UUID]:
        """The instances of which a committed copy or a decoded snapshot is remembered."""
        with self._lock:
            return frozenset({*self._latest, *self._decoded})

    def sizes(self) -> tuple[int, int]:
        """How many committed copies and decoded snapshots are remembered."""
        return len(self._latest), len(self._decoded)

    def endings(self) -> int:
        """How many final endings are remembered."""
        return len(self._endings)
