"""The Engine: an eventsourcing Application that runs chart instances durably."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Literal, Self, TypeVar, overload
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application, ProcessingEvent
from eventsourcing.domain import DomainEventProtocol, MutableOrImmutableAggregate
from eventsourcing.persistence import (
    ApplicationRecorder,
    EventStore,
    IntegrityError,
    Mapper,
    MapperDeserialisationError,
    PersistenceError,
    Recording,
    StoredEvent,
)

from aggregates import (
    BirthFacts,
    CattrsMapper,
    ChartVersion,
    Instance,
    InstanceKind,
    InstanceSnapshot,
    InstanceStatus,
)
from aggregates.errors import CorruptRecord, InputMismatch, InvalidCommand
from incarnate import _logs, _tracing
from incarnate._clock import Clock, SystemClock
from incarnate._commits import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT, GroupCommit
from incarnate._handles import InstanceHandle, SendReceipt, StepOutcome, plain, receipt_for_key
from incarnate._holdings import Holdings
from incarnate._limits import LimitedEventStore, positive_int
from incarnate._listing import Listing
from incarnate._liveness import Heartbeat
from incarnate._migration import DEFAULT_BATCH_SIZE, InstanceVerdict, MigrationReport, apply, check
from incarnate._ownership import TakeOver, is_live, take_over, take_over_batch
from incarnate._process import Decision, decide
from incarnate._recovery import ParkedRoot, acquire, migrate, park_corrupt, parked, resolve, terminate
from incarnate._runners import DeterministicRunner, Runner, TaskDeferred, on_step_lane
from incarnate._snapshots import DEFAULT_SNAPSHOT_EVENTS, TolerantZlib, snapshot_due
from incarnate._storage import Storage
from incarnate._tasks import TaskFunction, run_task
from incarnate._work import UnitOfWork
from incarnate.errors import (
    ConfigurationError,
    EngineError,
    Fenced,
    InstanceExists,
    InstanceTerminated,
    NotARoot,
    PayloadTooLarge,
    StorageError,
    TreeHeld,
    UnknownInstance,
)
from incarnate.store import Coordination, Store
from incarnate.store import forget_memory_store as forget_named_memory_store
from projections import Checkpoint, CheckpointUndecodable, resume_plan
from statechart import Chart, Event, JsonValue, Registry
from statechart.codec import SnapshotCodec, SnapshotDelta, check_json, check_text
from statechart.errors import CodecError
from statechart.event import error_invoke_event
from statechart.shape import Shape
from statechart.snapshot import Snapshot

log = logging.getLogger("incarnate.engine")

_START_KEYS = UUID("6a1c3f0e-5b7d-4e0a-9d2c-3f8e1b7a4c55")
"""The namespace of the ids :meth:`Engine.start` derives from an idempotency key (uuid5)."""

C = TypeVar("C")

MAX_CONFLICT_RETRIES = 20
RESUME_BATCH = 100
"""Call trees :meth:`Engine.resume_all` claims in one save (each read once, acquired as soon as claimed)."""
RESUME_FIRST_BATCH = 10
"""The first batch is small, so the first trees run while the rest are read."""
RESERVED_PREFIXES = ("done.invoke.", "error.invoke.", "retry.invoke.")
"""Event names that report a child's outcome: they must carry the invoke id of its incarnation."""
DEFAULT_CACHE_SIZE = 50_000
"""Instances an engine keeps in memory (committed copies, decoded snapshots, the library's cache)."""


def _clone(aggregate: Any) -> Any:
    clone = object.__new__(type(aggregate))
    clone.__dict__.update(aggregate.__dict__)
    clone.__dict__["_pending_events"] = []
    return clone


def project(aggregate: Any, events: Iterable[Any]) -> Any:
    """Rebuild an aggregate by applying events in order.

    The library's default projector re-checks a runtime ``Protocol`` on every
    event, which costs more than applying it; our events are all mutators.
    """
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


def _make_room(cache: OrderedDict[UUID, Any], size: int, incoming: UUID) -> None:
    """Evict the oldest entries until ``incoming`` fits in ``size`` entries (the cache lock held).

    Every mutation of an engine cache must hold the engine's cache lock:
    an ``OrderedDict`` calls the keys' Python ``__hash__``/``__eq__`` (a
    ``UUID``'s are Python code) in the middle of a pop or an insert, where
    another thread may run, and two concurrent mutations can corrupt its
    linked list (seen as a segmentation fault under a tiny switch interval).
    Lookups alone are plain dict reads and need no lock.
    """
    if incoming in cache:
        return
    while len(cache) >= size:
        try:
            cache.popitem(last=False)
        except KeyError:  # emptied meanwhile
            return


def forget_memory_store(name: str) -> None:
    """Drop a named in-memory store (tests call this when done with it)."""
    forget_named_memory_store(name)


@contextlib.contextmanager
def _decoding(instance_id: UUID) -> Iterator[None]:
    """Stored records of ``instance_id`` that do not decode raise :class:`CorruptRecord` (the edge)."""
    try:
        yield
    except MapperDeserialisationError as error:
        raise CorruptRecord.of(instance_id, error) from error


_SNAPSHOT_EVENTS = (Instance.Stepped, Instance.Migrated)
"""The events that change an instance's statechart snapshot."""


def _keep_snapshot(events: Iterable[object]) -> bool:
    """Whether ``events`` leave an instance's statechart snapshot as it was."""
    return not any(isinstance(event, _SNAPSHOT_EVENTS) for event in events)


class SnapshotStore(EventStore[UUID]):
    """The snapshot store: a snapshot that does not decode is skipped with a warning.

    Snapshots only save time: without one the aggregate is replayed from its
    events, which stay the truth, so a corrupted snapshot never costs
    correctness.
    """

    max_payload_bytes: int | None = None
    """Snapshots encoded larger than this are not written (see ``incarnate._snapshots``)."""

    refused: Mapping[UUID, tuple[int, int]] = {}
    """Per instance, the versions (first, last) of snapshots not to use: one decoded but did not fit the
    chart, and those taken after it from an aggregate built on it. Replaced whole, never changed in place."""

    def put(self, domain_events: Sequence[Any], **kwargs: Any) -> list[Recording[UUID]]:
        """Store the snapshots that fit the payload limit; one that does not is skipped with a warning."""
        stored = []
        for snapshot in domain_events:
            record = self.mapper.to_stored_event(snapshot)
            limit = self.max_payload_bytes
            if limit is not None and len(record.state) > limit:
                log.warning(
                    "not snapshotting %s at version %s: %d bytes encoded, over the payload limit of %d",
                    record.originator_id,
                    record.originator_version,
                    len(record.state),
                    limit,
                )
                continue
            stored.append(record)
        if stored:
            self.recorder.insert_events(stored, **kwargs)
        return []

    def get(
        self,
        originator_id: UUID,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Iterator[Any]:
        """The snapshots that decode, as the library selects them."""
        records = self.recorder.select_events(originator_id, gt=gt, lte=lte, desc=desc, limit=limit)
        for record in records:
            window = self.refused.get(originator_id)
            if window is not None and window[0] <= record.originator_version <= window[1]:
                continue
            try:
                yield self.mapper.to_domain_event(record)
            except MapperDeserialisationError as error:
                log.warning("skipping a snapshot of %s; replaying its events: %s", originator_id, error)


def _engine_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Engine(Application[UUID]):
    """Runs chart and task instances, parents and children, durably.

    Everything an instance decides is committed (one atomic save per
    macrostep) before anything is enacted; a :class:`Runner` then works
    through the instances that have something to do.
    """

    name = "incarnate"

    def __init__(
        self,
        charts: Iterable[Chart[Any]] = (),
        tasks: Mapping[str, TaskFunction] | None = None,
        *,
        storage: Storage | None = None,
        clock: Clock | None = None,
        runner: Runner | None = None,
        engine_id: str | None = None,
        env: Mapping[str, str] | None = None,
        snapshot_interval: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        max_payload_bytes: int | None = None,
        commit_batch: int = DEFAULT_MAX_BATCH,
        commit_wait: float = DEFAULT_MAX_WAIT,
    ) -> None:
        # Units of work of concurrent threads share transactions (see incarnate._commits).
        self.group_commit = GroupCommit(self._write, max_batch=commit_batch, max_wait=commit_wait)
        self.storage = storage if storage is not None else Storage.from_env()
        self.store: Store = self.storage.open()
        self._coordination: Coordination | None = None
        self._coordination_lock = threading.Lock()
        merged = self.storage.env()
        # Checked on each encoded event before the recorder is called (see construct_event_store).
        self.max_payload_bytes = (
            positive_int(max_payload_bytes, "max_payload_bytes")
            if max_payload_bytes is not None
            else self.storage.payload_limit()
        )
        self.snapshot_interval = snapshot_interval
        self._snapshotted: dict[UUID, int] = {}
        """The version of the latest snapshot of each instance, as far as this engine knows."""
        if snapshot_interval is not None:
            if snapshot_interval < 1:
                raise ConfigurationError(f"snapshot_interval must be at least 1, got {snapshot_interval}")
            merged["IS_SNAPSHOTTING_ENABLED"] = "y"
            self.snapshotting_intervals = {Instance: snapshot_interval}  # type: ignore[misc]
        else:
            merged.setdefault("IS_SNAPSHOTTING_ENABLED", "y")  # spaced by size (incarnate._snapshots)
        # Instances are cached and fast-forwarded from the store before use, so a
        # unit of work reads only the events it has not seen (writes by other
        # engines included); commands always get a private copy.
        if cache_size < 1:
            raise ConfigurationError(
                f"cache_size must be at least 1 instance, got {cache_size}; "
                f"the default is {DEFAULT_CACHE_SIZE}"
            )
        self.cache_size = cache_size
        merged.setdefault("AGGREGATE_CACHE_MAXSIZE", str(cache_size))
        if env:
            merged.update(env)
        # One direct connection first: an unreachable server, a missing database or a
        # refused user is reported at once, by name, instead of as a pool timeout.
        self.store.check()
        try:
            super().__init__(env=merged)
        except (PersistenceError, sqlite3.DatabaseError, OSError) as error:
            factory = getattr(self, "factory", None)
            if factory is not None:
                with contextlib.suppress(Exception):
                    factory.close()  # stop the pool's connection attempts
            self.store.check()
            raise StorageError(f"cannot open {self.storage.describe()}: {error}") from error
        self.left_alone: tuple[TreeHeld, ...] = ()
        """The call trees the last :meth:`resume_all` left to their live owners."""
        # What this engine holds, has acquired and was fenced from, in one object with one lock.
        self.holdings = Holdings(fenced_limit=self.cache_size)
        # Runner threads share the caches below: ``_cache_lock`` serialises their
        # writers, and eviction pops atomically, so a full cache never raises.
        self._cache_lock = threading.Lock()
        self._latest: OrderedDict[UUID, Instance] = OrderedDict()
        self._listing: Listing | None = None
        self.engine_id = engine_id or _engine_id()
        self.clock: Clock = clock or SystemClock()
        self.registry = Registry()
        self.charts: dict[str, Chart[Any]] = {}
        self.tasks: dict[str, TaskFunction] = {}
        self._tasks_complete = False
        self._codecs: dict[str, SnapshotCodec[Any]] = {}
        self._decoded: OrderedDict[UUID, tuple[int, Snapshot[Any]]] = OrderedDict()
        self.hooks: list[Callable[[str, UnitOfWork], None]] = []
        for chart in charts:
            self.register(chart)
        for name, fn in (tasks or {}).items():
            self.register_task(name, fn)
        # A task function is needed only where tasks run: the runner asks (require_tasks) before
        # it runs work, so an engine that only starts, sends and reads needs no task code.
        self.registry.validate(tasks=False)
        self._record_chart_versions()
        self.runner: Runner = runner or DeterministicRunner()
        self.heartbeat = Heartbeat(lambda: self.coordination, self.engine_id)
        """This engine's heartbeat: it beats while a runner that works on its own runs (see _liveness)."""
        if not isinstance(self.runner, DeterministicRunner):
            self.require_tasks()  # any other runner works as soon as it is attached
            self.heartbeat.start()  # live while it runs work: no other engine takes its trees
        self.runner.attach(self)

    # ----------------------------------------------------------- setup

    def construct_mapper(self) -> Mapper[UUID]:
        """Events go through the project's cattrs codec (no pickle, exact tuples)."""
        return CattrsMapper(
            transcoder=self.factory.transcoder(),
            cipher=self.factory.cipher(),
            compressor=self.factory.compressor(),
        )

    def construct_recorder(self) -> ApplicationRecorder:
        """The store's recorder; named in-memory stores are shared between engines."""
        return self.store.recorder(super().construct_recorder)

    def construct_event_store(self) -> EventStore[UUID]:
        """Events are refused, before anything is written, when one is over ``max_payload_bytes``."""
        return LimitedEventStore(self.mapper, self.recorder, self.max_payload_bytes)

    def construct_snapshot_store(self) -> EventStore[UUID]:
        """Snapshots that do not decode are skipped (see :class:`SnapshotStore`); they are compressed."""
        recorder = self.factory.aggregate_recorder(purpose="snapshots")
        mapper = CattrsMapper(
            transcoder=self.factory.transcoder(),
            cipher=self.factory.cipher(),
            compressor=self.factory.compressor() or TolerantZlib(),
        )
        store = SnapshotStore(mapper=mapper, recorder=recorder)
        store.max_payload_bytes = self.max_payload_bytes
        return store

    def _take_snapshots(self, processing_event: ProcessingEvent[UUID]) -> None:
        """Snapshot the instances just saved that are due (see ``incarnate._snapshots``).

        With ``snapshot_interval`` set, the library's own rule applies (every N versions).
        """
        if self.snapshot_interval is not None:
            super()._take_snapshots(processing_event)
            return
        if self.snapshots is None:
            return
        for aggregate_id, aggregate in processing_event.aggregates.items():
            if not isinstance(aggregate, Instance):
                continue
            last = self._snapshotted.get(aggregate_id, 0)
            if not snapshot_due(aggregate, last, DEFAULT_SNAPSHOT_EVENTS):
                continue
            self._snapshotted[aggregate_id] = aggregate.version
            try:
                self.snapshots.put([InstanceSnapshot.take(aggregate)])
            except (PersistenceError, sqlite3.DatabaseError, OSError) as error:
                # A snapshot only saves time: the events are committed and stay the truth.
                log.warning("could not snapshot %s: %s", aggregate_id, error)

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
            self._codecs[registered.name] = SnapshotCodec(registered)
            pending.extend(registered.companions)

    def _record_chart_versions(self) -> None:
        """Store each registered chart's shape once, so later versions can be compared with it."""
        for chart in self.charts.values():
            version_id = ChartVersion.id_for(chart.name, chart.fingerprint)
            if version_id in self.repository:
                continue
            with contextlib.suppress(IntegrityError):  # another engine recorded it first
                self.save(ChartVersion.register(chart.shape))

    def save(
        self,
        *objs: MutableOrImmutableAggregate[UUID] | DomainEventProtocol[UUID] | None,
        **kwargs: Any,
    ) -> list[Recording[UUID]]:
        """The library's save, for anything but instances: an instance is written only fenced.

        Every write of an instance goes through a unit of work that checks
        this engine holds the instance's ownership incarnation (:meth:`commit`);
        ``save`` would skip that check, so handing it an instance raises
        :class:`EngineError` and writes nothing.
        """
        for obj in objs:
            if isinstance(obj, Instance):
                raise EngineError(
                    f"Engine.save() would write instance {obj.id} without checking that this engine "
                    "owns it (fencing); change instances through the engine's commands (start, send, "
                    "cancel, terminate, take_over, ...), which commit fenced units of work"
                )
        return super().save(*objs, **kwargs)

    def chart_shape(self, name: str, fingerprint: str) -> Shape | None:
        """The recorded shape of chart ``name`` under ``fingerprint``, if any engine stored it."""
        try:
            version: ChartVersion = self.repository.get(ChartVersion.id_for(name, fingerprint))
        except AggregateNotFoundError:
            return None
        return version.shape

    def require_tasks(self) -> None:
        """Raise :class:`~statechart.errors.ChartInvalid` unless every task the charts invoke is registered.

        Runners call it before they run work: an engine that only starts
        roots, sends events and reads (a web handler, a command-line client)
        needs no task functions, but one that runs work needs all of them.
        """
        if not self._tasks_complete:
            self.registry.validate()
            self._tasks_complete = True

    def register_task(self, name: str, fn: TaskFunction) -> None:
        """Register a task callable (sync or async) under ``name``."""
        if not callable(fn):
            raise ConfigurationError(f"task {name!r} must be callable, got {fn!r}")
        self.registry.add_task(name)
        self.tasks[name] = fn
        self._tasks_complete = False

    # ---------------------------------------------------------- codec

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        """A snapshot as stored data."""
        return self._codecs[chart.name].encode(snapshot)

    def encode_delta(
        self, chart: Chart[Any], before: Snapshot[Any] | None, after: Snapshot[Any]
    ) -> SnapshotDelta:
        """What changed from ``before`` (None: a first macrostep) to ``after``, as stored data."""
        return self._codecs[chart.name].encode_delta(before, after)

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        """The instance's current snapshot, decoded through its registered chart."""
        cached = self._decoded.get(instance.id)
        if cached is not None:
            if cached[0] == instance.version:
                return cached[1]
            # Events pending on top of the remembered version that leave the snapshot as it
            # was (a message accepted in this unit of work) need no decoding of the whole.
            pending = instance.pending_events
            if cached[0] == instance.version - len(pending) and _keep_snapshot(pending):
                return cached[1]
        data = instance.record.snapshot
        if data is None:
            raise CodecError(chart.name, "snapshot", f"instance {instance.id} has no snapshot yet")
        snapshot = self._codecs[chart.name].decode(data)
        return snapshot

    def remember_snapshot(self, instance_id: UUID, version: int, snapshot: Snapshot[Any]) -> None:
        """Keep the decoded snapshot of ``instance_id`` at ``version`` (recovery's ResumePlan decoded it)."""
        with self._cache_lock:
            _make_room(self._decoded, self.cache_size, instance_id)
            self._decoded[instance_id] = (version, snapshot)

    def _remember(
        self, instance: Instance, decoded: Snapshot[Any] | None = None, unchanged_since: int | None = None
    ) -> None:
        """Keep the decoded snapshot of the version just committed, for the next unit of work.

        ``unchanged_since`` is the version before the commit when the commit
        did not change the snapshot (a message accepted, an activation
        settled): a snapshot remembered at that version is carried forward
        instead of decoding the whole snapshot again.
        """
        record = instance.record
        chart = self.charts.get(record.name)
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
                snapshot = self._codecs[chart.name].decode(whole)
            except CodecError:
                return
        with self._cache_lock:
            known = self._decoded.get(instance.id)
            if known is not None and known[0] > instance.version:
                return  # another thread remembered a newer version
            _make_room(self._decoded, self.cache_size, instance.id)
            self._decoded[instance.id] = (instance.version, snapshot)

    # -------------------------------------------------------- commands

    def start(
        self,
        chart: str | Chart[Any],
        input: JsonValue = None,
        *,
        id: UUID | None = None,
        key: str | None = None,
    ) -> InstanceHandle:
        """Start a root instance of ``chart``; its first macrostep is committed with its creation.

        ``chart`` is a registered chart's name, or the registered
        :class:`~statechart.Chart` object itself (which a type checker can
        check, unlike a name).

        Returns an :class:`InstanceHandle`: the new instance's id (a
        :class:`uuid.UUID`) that can also wait for its result.

        ``id`` names the new instance (default: a random UUID); an id the
        store already holds raises :class:`InstanceExists`. With ``key``
        (an idempotency key, instead of ``id``) the id is derived from the
        chart's name and the key (:meth:`id_for_key`), so a repeated start
        with the same key and input returns the instance the first one
        started and starts nothing; the same key with another input raises
        :class:`InstanceExists`.

        ``input`` is validated strictly against the chart's context class
        before anything is stored (see :func:`statechart.context_from_input`):
        an unknown field, a value of another type (no conversion between str,
        int, float and bool; an int is accepted for a float) or a str given
        for a collection raises :class:`~statechart.errors.CodecError`.
        """
        from statechart.codec import context_from_input
        from statechart.errors import IncarnateError

        chart = self._registered_name(chart)
        found = self.charts.get(chart)
        if found is None:
            raise EngineError(f"chart {chart!r} is not registered (registered: {sorted(self.charts)})")
        if key is not None:
            if id is not None:
                raise EngineError(f"start {chart!r} with an id or a key, not both (the key derives the id)")
            if not isinstance(key, str) or not key:
                raise EngineError(f"the key of a start must be a non-empty str, got {key!r}")
            try:
                check_text(key, "the start's key")
            except TypeError as error:
                raise EngineError(f"cannot start {chart!r}: {error}") from error
            id = self.id_for_key(chart, key)
        try:
            check_json(input, "input")
        except TypeError as error:
            raise CodecError(
                chart, "input", f"{error}; fix: pass plain JSON data (lists, not tuples or sets)"
            ) from error
        try:
            context_from_input(found, input)
        except IncarnateError:
            raise
        except Exception as error:  # the author's context_from_input refused it
            raise CodecError(
                chart,
                "input",
                f"context_from_input raised {type(error).__name__}: {error}; fix: pass an input it accepts",
            ) from error
        instance = Instance.start_root(
            id=plain(id) if id is not None else uuid.uuid4(),
            kind=InstanceKind.CHART,
            name=chart,
            fingerprint=found.fingerprint,
            input=input,
            owner=self.engine_id,
        )
        uow = UnitOfWork(self)
        uow.created[instance.id] = instance
        decide(self, uow, instance, careful=False)
        try:
            self.commit(uow)
        except IntegrityError:
            existing = self._existing_start(instance.id, chart, input, key)
            if existing is None:
                raise
            return existing
        if self.has_work(instance):
            uow.follow(instance.id)
        self.enact(uow)
        return InstanceHandle(self, instance.id, chart)

    @staticmethod
    def id_for_key(chart: str, key: str) -> UUID:
        """The id :meth:`start` gives a root of ``chart`` started with idempotency key ``key``."""
        return uuid.uuid5(_START_KEYS, f"{chart}\x00{key}")

    def _existing_start(
        self, instance_id: UUID, chart: str, input: JsonValue, key: str | None
    ) -> InstanceHandle | None:
        """After a start's commit conflicted: the instance a repeated keyed start returns, else why not."""
        try:
            existing = self.instance(instance_id)
        except UnknownInstance:
            return None  # the conflict was not the id: the caller re-raises it
        record = existing.record
        if key is None:
            raise InstanceExists(instance_id, chart, f" (a {record.name!r}, {record.status.value})")
        if record.name != chart or record.parent is not None or record.input != input:
            raise InstanceExists(
                instance_id,
                chart,
                f", started earlier under key {key!r} with another chart or input "
                f"({record.name!r}, input {record.input!r})",
            )
        return InstanceHandle(self, instance_id, chart)

    def handle(self, instance_id: UUID) -> InstanceHandle:
        """A handle on a stored instance (any engine's, in any process); :class:`UnknownInstance` if none."""
        instance = self.instance(plain(instance_id))
        return InstanceHandle(self, instance.id, instance.record.name)

    def result(self, instance_id: UUID, timeout: float | None = None) -> JsonValue:
        """Wait for the output of an instance (see :meth:`InstanceHandle.result`)."""
        return self.handle(instance_id).result(timeout)

    def send_receipt(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> SendReceipt:
        """:meth:`send`, returning a receipt that can wait for the macrostep that consumed the message.

        A repeated ``key`` returns the receipt of the message first accepted
        under it (nothing new is stored).
        """
        instance_id = plain(instance_id)
        seq = self.send(instance_id, event, data, key=key)
        if seq is None:
            assert key is not None  # only a repeated key is accepted without a new message
            return receipt_for_key(self, instance_id, key)
        return SendReceipt(self, instance_id, seq, key)

    def send_and_wait(
        self,
        instance_id: UUID,
        event: str | Event,
        data: JsonValue = None,
        *,
        key: str | None = None,
        timeout: float | None = None,
    ) -> StepOutcome:
        """:meth:`send_receipt`, then wait (up to ``timeout`` seconds) for the step it caused."""
        return self.send_receipt(instance_id, event, data, key=key).wait(timeout)

    task_loop: asyncio.AbstractEventLoop | None = None
    """The event loop async tasks run on (see :meth:`run_tasks_on`); None: ``asyncio.run`` per task."""

    def run_tasks_on(self, loop: asyncio.AbstractEventLoop | None) -> None:
        """Run async task functions on ``loop`` (a running loop of another thread); None to stop.

        A runner thread hands the task's coroutine to the loop and waits for
        it, so tasks share the loop's clients and connections instead of a
        fresh loop per task. :meth:`AsyncEngine.serve` does this for its loop.
        """
        self.task_loop = loop

    def send(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> int | None:
        """Durably accept an event for an instance; returns its inbox sequence number.

        The event is in the store when this returns and is processed exactly
        once. When this engine runs the instance on a ``ThreadedRunner`` and
        no worker is on it, the calling thread also takes the macrostep the
        event causes, in the same commit (see ``ThreadedRunner.inline``).
        With ``key``, a repeated send with the same key is accepted once:
        every repeat returns None, whatever the instance's status (running,
        finished, cancelled, failed). A new key, or no key, to a finished
        instance raises :class:`InstanceTerminated`.

        The name must be a non-empty str and the data plain JSON (no tuple,
        set or object; nothing is converted), else :class:`EngineError` is
        raised and nothing is stored.
        """
        instance_id = plain(instance_id)
        if isinstance(event, str):
            name: object = event
            event = Event(event, data)
        else:
            name = event.name if isinstance(event, Event) else event
        if not isinstance(event, Event) or not isinstance(name, str) or not name:
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: an event needs a non-empty str "
                "name; pass send(id, 'name', data) or send(id, Event('name', data))"
            )
        try:
            check_text(name, "the event's name")
            check_json(event.data, "data")
        except TypeError as error:
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: {error}; event data must be "
                "plain JSON (None, bool, int, float, str, lists, dicts with str keys)"
            ) from error
        if key is not None and not isinstance(key, str):
            raise EngineError(f"the key of a send must be a str, got {type(key).__name__} {key!r}")
        if key is not None:
            try:
                check_text(key, "the send's key")
            except TypeError as error:
                raise EngineError(f"cannot send {name!r} to instance {instance_id}: {error}") from error
        if event.invoke_id is None and name.startswith(RESERVED_PREFIXES):
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: names starting with "
                f"{', '.join(repr(p) for p in RESERVED_PREFIXES)} report a child's outcome and must "
                "name its incarnation; choose another event name, or build the outcome with "
                "done_invoke_event()/error_invoke_event()"
            )
        # Only the holder's last copy is likely current: another engine (a web handler's, a CLI
        # client's) reads fresh, or its save would fail the version check once per send.
        fresh = not self.holdings.holds(instance_id)
        along = True  # consume it in the same commit when this engine runs the instance
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.instance(instance_id, fresh=fresh)
            if fresh:
                self._forget_if_claimed(instance)
            if key is not None and key in instance.record.keys:
                # Keys are only ever added: even this engine's older copy proves the repeat.
                return None
            if instance.record.status.finished:
                if not fresh:
                    fresh = True
                    continue
                raise InstanceTerminated(instance_id, instance.record.status.value)
            message = instance.accept(event, source=None, sent_at=self.clock.now(), key=key)
            if message is None:
                if not fresh:
                    fresh = True
                    continue
                return None
            uow = UnitOfWork(self, fresh=fresh)
            uow.include(instance)
            uow.sent = (instance_id, message.seq)
            uow.follow(instance_id)
            outcome = self.commit_along(uow, instance_id, along=along, careful=fresh)
            if outcome == "conflict":
                fresh = True
                continue
            if outcome == "alone":
                along = False
                continue
            return message.seq
        raise StorageError(f"could not accept an event for {instance_id}: too many concurrent writers")

    def inline(self, instance_id: UUID | None, wanted: bool = True) -> AbstractContextManager[bool]:
        """Whether the calling thread may step ``instance_id`` now, held for the block.

        The runner decides (its ``inline``): a threaded runner while it runs
        and no worker is on the instance, the deterministic runner inside
        ``run_until_idle``; a runner without ``inline`` never. ``send`` and a
        task's outcome use it to commit the macrostep their message causes
        with the message.
        """
        acquired = instance_id is not None and self.holdings.is_acquired(instance_id)
        inline = getattr(self.runner, "inline", None) if wanted and acquired else None
        if inline is None:
            return contextlib.nullcontext(False)
        held: AbstractContextManager[bool] = inline(instance_id)
        return held

    def cancel(self, instance_id: UUID, reason: str = "cancelled by an operator") -> bool:
        """Ask an instance to stop (its children are cancelled in cascade)."""
        instance_id = plain(instance_id)
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.instance(instance_id)
            if not instance.request_cancel(None, reason):
                return False
            try:
                self.save_instances(instance)
            except IntegrityError:
                continue
            self.runner.notify(instance_id)
            return True
        raise StorageError(f"could not cancel {instance_id}: too many concurrent writers")

    def deliver_birth(self, facts: BirthFacts) -> bool:
        """Create the child a retained Birth names, if it does not exist yet (re-delivery).

        Identical facts for an existing child are a no-op (False); different
        facts raise :class:`~aggregates.InputMismatch` and write nothing. The
        parent must retain an activation for the facts' Ref.
        """
        parent = self.instance(facts.ref.parent)
        activation = parent.record.activation(facts.ref.site, facts.ref.key)
        if activation is None or activation.ref != facts.ref:
            raise InvalidCommand(parent.id, "deliver a birth", f"no activation retains {facts.ref}")
        uow = UnitOfWork(self)
        existing = uow.load(facts.child_id)
        if existing is not None:
            theirs = existing.record.birth
            if theirs != facts:
                raise InputMismatch(
                    facts.child_id, facts.differences(theirs) if theirs is not None else ("it is a root",)
                )
            return False
        fingerprint = self.charts[facts.name].fingerprint if facts.name in self.charts else ""
        uow.create(Instance.born(facts, fingerprint=fingerprint, owner=self.engine_id))
        self.commit(uow)
        self.enact(uow)
        return True

    # ---------------------------------------------------------- queries

    def events_of(self, instance_id: UUID) -> list[Any]:
        """Every stored event of an instance, oldest first (:class:`CorruptRecord` if one does not decode)."""
        with _decoding(instance_id):
            events = list(self.events.get(instance_id))
        if not events:
            raise UnknownInstance(instance_id)
        return events

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """The instance aggregate, as stored now (``fresh=False``: this engine's last committed copy)."""
        try:
            instance: object = self.load(instance_id, fresh=fresh)
        except AggregateNotFoundError:
            raise UnknownInstance(instance_id) from None
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance_id}: {error}") from error
        if not isinstance(instance, Instance):
            raise UnknownInstance(instance_id)
        return instance

    def is_current(self, instance: Instance) -> bool:
        """Whether the store holds no event of ``instance`` past its version (one indexed query)."""
        try:
            return not self.recorder.select_events(instance.id, gt=instance.version, limit=1)
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance.id}: {error}") from error

    def load(self, aggregate_id: UUID, *, fresh: bool = True) -> Any:
        """A private copy of a stored aggregate.

        ``fresh`` reads from the store whatever this engine has not seen (the
        library's cache, fast-forwarded). Otherwise the copy this engine last
        committed is used when it has one: a command computed on it that turns
        out stale fails its save on the version conflict and is retried fresh.

        Aggregate state is immutable values throughout (frozen attrs records,
        tuples, JSON data never changed in place), so a shallow copy is as
        safe as the library's deep copy and much cheaper; only the pending
        events must not be shared.
        """
        if not fresh:
            latest = self._latest.get(aggregate_id)
            if latest is not None:
                return _clone(latest)
        with _decoding(aggregate_id):
            cached = self.repository.get(aggregate_id, projector_func=project, deepcopy_from_cache=False)
        return _clone(cached)

    def _saw(self, instances: Iterable[Instance]) -> None:
        """Remember the committed copies (newest version wins; the oldest entries go first)."""
        with self._cache_lock:
            for instance in instances:
                known = self._latest.get(instance.id)
                if known is None or known.version < instance.version:
                    _make_room(self._latest, self.cache_size, instance.id)
                    self._latest[instance.id] = _clone(instance)

    def instances(self) -> Iterator[Instance]:
        """Every instance in the store, in order of creation."""
        for instance_id in self.instance_ids():
            try:
                yield self.instance(instance_id)
            except UnknownInstance:
                continue

    def stored(self, instance_id: UUID) -> tuple[InstanceSnapshot | None, list[Any]]:
        """The latest stored snapshot of an instance (if snapshotting) and the events after it."""
        start: InstanceSnapshot | None = None
        if self.snapshots is not None:
            found = list(self.snapshots.get(instance_id, desc=True, limit=1))
            if found and isinstance(found[0], InstanceSnapshot):
                start = found[0]
                known = self._snapshotted.get(instance_id, 0)
                self._snapshotted[instance_id] = max(known, start.originator_version)
        with _decoding(instance_id):
            events = list(self.events.get(instance_id, gt=start.originator_version if start else None))
        if start is None and not events:
            raise UnknownInstance(instance_id)
        return start, events

    def prefetch(self, instance_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """The stored events of many instances in one query, for :meth:`read` to decode.

        Left out: instances with a stored snapshot (read as usual, from the
        snapshot on), instances with no events, and everything when the
        store reads instances one by one (in memory).
        """
        select = getattr(self.store, "select_many", None)  # a store adapter of an older port may lack it
        if not instance_ids or select is None:
            return {}
        try:
            if self.snapshots is not None:
                snapshotted = select(self.snapshots.recorder, instance_ids, latest=True)
                if snapshotted is None:
                    return {}
                instance_ids = [i for i in instance_ids if i not in snapshotted]
            found = select(self.recorder, instance_ids)
        except PersistenceError as error:
            raise StorageError(f"could not read {len(instance_ids)} instances: {error}") from error
        return found or {}

    def read(
        self, instance_id: UUID, records: Sequence[StoredEvent] | None = None
    ) -> tuple[Instance, InstanceSnapshot | None, list[Any]]:
        """Read an instance once for recovery: the aggregate, and what it was built from.

        The aggregate is built from the latest stored snapshot (if any) and
        the events after it; the same snapshot and events feed its ResumePlan.
        ``records`` are its stored events as :meth:`prefetch` read them (all
        of them: it has no snapshot). The result also becomes this engine's
        latest copy of the instance.
        """
        if records is None:
            start, events = self.stored(instance_id)
        else:
            start = None
            with _decoding(instance_id):
                events = [self.events.mapper.to_domain_event(record) for record in records]
            if not events:
                raise UnknownInstance(instance_id)
        aggregate: Any = start.mutate(None) if start is not None else None
        aggregate = project(aggregate, events)
        if not isinstance(aggregate, Instance):
            raise UnknownInstance(instance_id)
        self._saw([aggregate])
        return _clone(aggregate), start, events

    def plan(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Checkpoint:
        """The ResumePlan of an instance: its checkpoint rebuilt from the store and validated.

        ``chart`` defaults to the registered chart of the instance.
        """
        start, events = self.stored(instance_id)
        if chart is None:
            name = start.state.record.name if start is not None else getattr(events[0], "name", "")
            chart = self.charts.get(name)
        return self.resume_plan(instance_id, chart, start, events)[0]

    def resume_plan(
        self, instance_id: UUID, chart: Chart[Any] | None, start: InstanceSnapshot | None, events: list[Any]
    ) -> tuple[Checkpoint, InstanceSnapshot | None, list[Any]]:
        """The ResumePlan of what :meth:`stored` read, and the snapshot and events it was built from.

        A stored snapshot is only a shortcut: one whose checkpoint does not
        fit the chart (it decodes, but names a state the chart lacks, say)
        while the events are intact is refused (:meth:`refuse_snapshot`) and
        the plan is rebuilt from the events. Only a checkpoint the events
        themselves make raises :class:`~projections.CheckpointError`.
        """
        try:
            return resume_plan(events, chart, start=start), start, events
        except CheckpointUndecodable as error:
            if start is None:
                raise
            self.refuse_snapshot(instance_id, start.originator_version, str(error))
        start, events = self.stored(instance_id)
        return resume_plan(events, chart, start=start), start, events

    def refuse_snapshot(self, instance_id: UUID, version: int, why: str) -> None:
        """Never build ``instance_id`` from its snapshot at ``version`` again here: replay its events.

        The snapshot is left in the store (events stay the truth; a later
        snapshot supersedes it); the warning says why it was refused. So are
        the snapshots stored since (up to the stored head): an aggregate built
        on the refused one may have taken them.
        """
        store = self.snapshots
        if isinstance(store, SnapshotStore):
            head = self.recorder.select_events(instance_id, desc=True, limit=1)
            last = max(version, head[0].originator_version if head else version)
            first, known = version, store.refused.get(instance_id)
            if known is not None:
                first, last = min(first, known[0]), max(last, known[1])
            store.refused = {**store.refused, instance_id: (first, last)}
        self._drop_copies((instance_id,))
        cache = self.repository.cache
        if cache is not None:
            with contextlib.suppress(KeyError):
                cache.get(instance_id, evict=True)
        log.warning(
            "refusing the stored snapshot of %s at version %d, which does not fit its chart (%s); "
            "rebuilding the instance from its events",
            instance_id,
            version,
            why,
        )

    # -------------------------------------------------------- recovery

    def acquire(self, instance_id: UUID) -> bool:
        """Acquire an instance after a restart: validate its ResumePlan and re-enact its children.

        An instance this engine does not hold is taken over first, with its
        whole call tree (:meth:`take_over` of its root). Returns False when
        the instance may not run here: it, or its root, is parked, or another
        live engine holds its tree.
        """
        if self.holdings.holds(instance_id):
            return acquire(self, instance_id)
        return self._adopt(instance_id, "acquired")

    # -------------------------------------------------------- ownership

    def take_over(self, root_id: UUID, *, reason: str = "taken over") -> TakeOver:
        """Claim a whole call tree for this engine in one atomic save, then acquire it.

        Raises :class:`~incarnate.errors.TreeHeld` (writing nothing) when a
        member is owned by another live engine, and
        :class:`~incarnate.errors.NotARoot` for a child its caller still
        awaits. See ``docs/explanation/ownership.md``.
        """
        return take_over(self, root_id, reason=reason)

    @property
    def held(self) -> dict[UUID, int]:
        """A copy of the incarnations this engine holds, by instance (see :attr:`holdings`)."""
        return self.holdings.held()

    @property
    def acquired(self) -> frozenset[UUID]:
        """A copy of the instances acquired here, which may run (see :attr:`holdings`)."""
        return self.holdings.acquired()

    def owns(self, instance_id: UUID) -> bool:
        """Whether this engine holds the instance's current incarnation (read from the store)."""
        held = self.holdings.incarnation(instance_id)
        if held is None:
            return False
        try:
            record = self.instance(instance_id).record
        except UnknownInstance:
            return False
        return record.owner == self.engine_id and record.incarnation == held

    def hold(self, instance_id: UUID, incarnation: int) -> None:
        """Record that this engine now holds ``incarnation`` of the instance (it claimed it).

        It must be acquired again, under the new incarnation, before it runs.
        """
        self.holdings.hold(instance_id, incarnation)

    def check_holds(self, instance: Instance) -> None:
        """Raise :class:`~incarnate.errors.Fenced` unless this engine holds the instance's incarnation."""
        record = instance.record
        held = self.holdings.incarnation(instance.id)
        if record.owner != self.engine_id or record.incarnation != held:
            raise Fenced(instance.id, self.engine_id, held, record.owner, record.incarnation)

    def drop(self, instance_id: UUID, why: object) -> None:
        """Forget an instance another engine now owns: its cached copies, and its queued work and timers.

        Queued work and timers of a dropped instance become no-ops
        (:meth:`process` returns None) until this engine takes it over again.
        """
        log.warning("fenced: %s", why, extra={"engine_id": self.engine_id, "instance_id": str(instance_id)})
        self._forget(instance_id)

    def _forget(self, instance_id: UUID) -> None:
        """Stop holding an instance: its incarnation, its acquisition and its cached copies."""
        self.holdings.fence(instance_id)
        self._drop_copies((instance_id,))

    def _drop_copies(self, instance_ids: Iterable[UUID]) -> None:
        """Forget this engine's committed copies and decoded snapshots of these instances."""
        with self._cache_lock:
            for instance_id in instance_ids:
                self._latest.pop(instance_id, None)
                self._decoded.pop(instance_id, None)

    def _forget_if_claimed(self, instance: Instance) -> None:
        """Stop holding an instance the store shows claimed by another engine since (no work was lost).

        An engine that created an instance and never served it (a client's)
        learns here that a worker took it over; unlike :meth:`drop`, this is
        the normal course of things, not a fenced write.
        """
        held = self.holdings.incarnation(instance.id)
        record = instance.record
        if held is None or (record.owner == self.engine_id and record.incarnation == held):
            return
        log.debug("%s is now held by %s", instance.id, record.owner, extra={"engine_id": self.engine_id})
        self._forget(instance.id)

    def orphan(self, instance_id: UUID, reason: str) -> bool:
        """End an instance whose parent is gone with status ``orphan``; False when it had finished already."""
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.instance(instance_id)
            if instance.record.status.finished:
                return False
            instance.mark_orphan(reason)
            try:
                self.save_instances(instance)
            except IntegrityError:
                continue
            self.holdings.finish(instance_id)
            return True
        raise StorageError(f"could not mark {instance_id} as an orphan: too many concurrent writers")

    def _adopt(self, instance_id: UUID, reason: str) -> bool:
        """Take over the call tree of an instance this engine does not hold; False when it may not run here.

        An instance owned by another live engine is left alone; any other is
        taken over through its root (a child on its own only when its caller
        has ended, to finish it).
        """
        try:
            record = self.instance(instance_id).record
        except UnknownInstance:
            return False
        except CorruptRecord as error:
            park_corrupt(self, error, instance_id)
            return False
        if record.status.finished or (record.owner != self.engine_id and is_live(self, record.owner)):
            return False
        try:
            result = take_over(self, record.root, reason=reason)
            if not self.holdings.holds(instance_id) and record.parent is not None:
                result = take_over(self, instance_id, reason=reason)
        except (TreeHeld, NotARoot) as error:
            log.info("not taking over %s: %s", instance_id, error)
            return False
        return self.holdings.holds(instance_id) and not result.parked

    def parked(self) -> list[ParkedRoot]:
        """Roots held for an operator, with their incidents."""
        return parked(self)

    def migrate(self, instance_id: UUID, mapping: Mapping[str, str]) -> Checkpoint | None:
        """Map a parked instance's stored states onto the registered chart, then unpark its root.

        The mapping is validated before anything is written; the new snapshot
        must fit the chart. Returns the root's checkpoint once it runs again.
        """
        return migrate(self, instance_id, mapping)

    def check(
        self,
        *,
        chart: str | None = None,
        mapping: Mapping[str, str] | None = None,
        ids: Collection[UUID] | None = None,
    ) -> list[InstanceVerdict]:
        """What would become of every live chart instance under the charts registered here; writes nothing.

        Open an engine with the *new* charts over the store and ask before
        deploying them: each instance resumes, migrates (under ``mapping``),
        needs a mapping, parks, or is held by a live worker, with the reasons
        (see :mod:`incarnate._migration`). ``chart`` and ``ids`` narrow it.
        """
        return check(self, chart=chart, mapping=mapping, ids=ids)

    def migrate_all(
        self,
        chart: str,
        mapping: Mapping[str, str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        reason: str = "migrated by an operator",
        progress: Callable[[int, int], None] | None = None,
    ) -> MigrationReport:
        """Migrate every live instance of ``chart`` that :meth:`check` judges *migrates*, in atomic batches.

        Each decision is recorded on its instance (a ``Migrated`` event with
        the batch id and ``reason``) in the commit that changes it; a batch of
        ``batch_size`` is one commit, so a crash leaves each instance migrated
        or untouched and running it again finishes the work. Parked roots
        whose trees then fit are resolved.
        """
        return apply(
            self, chart=chart, mapping=mapping, batch_size=batch_size, reason=reason, progress=progress
        )

    def resolve(self, root_id: UUID, resolution: str = "resolved by an operator") -> Checkpoint | None:
        """Unpark a root whose tree now decodes (e.g. after registering a compatible chart)."""
        return resolve(self, root_id, resolution)

    def terminate(self, root_id: UUID, reason: str = "terminated by an operator") -> int:
        """Dispose of a (parked) call tree without running it; returns how many instances ended."""
        return terminate(self, root_id, reason)

    @overload
    def snapshot(self, instance_id: UUID) -> Snapshot[Any]: ...

    @overload
    def snapshot(self, instance_id: UUID, chart: Chart[C]) -> Snapshot[C]: ...

    def snapshot(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Snapshot[Any]:
        """The decoded current snapshot of a chart instance.

        Given the instance's ``chart`` (the registered object), the snapshot is
        typed by the chart's context class: ``snapshot(id, APPROVAL).context``
        is an ``Approval``. An instance of another chart raises
        :class:`~incarnate.errors.EngineError`.
        """
        instance = self.instance(instance_id)
        name = instance.record.name
        if chart is not None and chart.name != name:
            raise EngineError(
                f"instance {instance_id} runs chart {name!r}, not {chart.name!r}; "
                f"fix: pass the chart {name!r} (or no chart) to snapshot()"
            )
        registered = self.charts.get(name)
        if registered is None:
            raise EngineError(f"chart {name!r} of {instance_id} is not registered")
        return self.decode(registered, instance)

    def _registered_name(self, chart: str | Chart[Any]) -> str:
        """The name of ``chart``; a chart object must be the one registered under its name."""
        if isinstance(chart, str):
            return chart
        registered = self.charts.get(chart.name)
        if registered is not None and registered is not chart and registered.fingerprint != chart.fingerprint:
            raise EngineError(
                f"chart {chart.name!r} given to engine {self.engine_id} differs from the chart registered "
                f"under that name (fingerprint {chart.fingerprint[:12]} vs {registered.fingerprint[:12]}); "
                f"fix: pass the registered chart object, or register this version"
            )
        return chart.name

    def children(self, instance_id: UUID) -> list[Instance]:
        """The current incarnations retained by an instance (its activations)."""
        instance = self.instance(instance_id)
        return [self.instance(a.child_id) for a in instance.record.activations]

    def instance_ids(self) -> Iterator[UUID]:
        """Every instance id in the store, in order of first appearance."""
        seen: set[UUID] = set()
        start = 1
        while True:
            notifications = self.recorder.select_notifications(start=start, limit=500)
            if not notifications:
                return
            for n in notifications:
                originator = (
                    n.originator_id if isinstance(n.originator_id, UUID) else UUID(str(n.originator_id))
                )
                if originator not in seen:
                    seen.add(originator)
                    if ":Instance." in n.topic:
                        yield originator
            start = notifications[-1].id + 1

    # -------------------------------------------------------- processing

    def process(self, instance_id: UUID) -> Decision | None:
        """Commit the next unit of work of one instance, then enact it; None when it is idle.

        Only instances this engine holds are processed. One it does not hold
        is taken over through its root when no live engine owns it; one owned
        by another live engine, or dropped after a fenced write, is left alone
        (None).
        """
        holdings = self.holdings
        if holdings.is_fenced(instance_id):
            return None
        if not holdings.holds(instance_id) and not self._adopt(instance_id, "processed by a new owner"):
            return None
        if not holdings.is_acquired(instance_id):
            try:
                if not acquire(self, instance_id):
                    return None
            except UnknownInstance:
                return None
        try:
            try:
                return self._process(instance_id)
            except PayloadTooLarge as error:
                return self._fail_oversized(instance_id, error)
        except Fenced as error:
            self.drop(instance_id, error)
            return None
        except CorruptRecord as error:
            # A record of this instance (or of one its unit of work reads) does not decode:
            # park the tree it belongs to instead of failing the runner.
            park_corrupt(self, error, instance_id)
            return None

    def _fail_oversized(self, instance_id: UUID, error: PayloadTooLarge) -> Decision | None:
        """A unit of work that would store an oversized event fails its instance instead.

        Nothing of that unit of work was written; the instance fails with an
        incident naming the size and the limit, and its parent is told, as for
        a macrostep that cannot be computed.
        """
        log.warning("%s", error)
        for _ in range(MAX_CONFLICT_RETRIES):
            uow = UnitOfWork(self)
            instance = uow.load(instance_id)
            if instance is None or instance.record.status.finished:
                return None
            uow.fence(instance)
            detail: dict[str, JsonValue] = {"error": type(error).__name__, "message": str(error)}
            instance.record_incident("payload-too-large", str(error), park=False)
            instance.fail(detail)
            uow.tell_parent(instance, self.clock.now(), error_invoke_event, detail)
            try:
                self.commit(uow)
            except IntegrityError:
                continue
            self.enact(uow)
            return Decision("failed", str(error))
        raise StorageError(f"could not record the failure of {instance_id}: too many concurrent writers")

    def _process(self, instance_id: UUID) -> Decision | None:
        careful = False
        fresh = False
        for _ in range(MAX_CONFLICT_RETRIES):
            uow = UnitOfWork(self, fresh=fresh)
            instance = uow.load(instance_id)
            if instance is None:
                return None
            if instance.record.status.finished:
                return None
            uow.fence(instance)  # an owner write: Fenced when another engine claimed it since
            root_id = instance.record.root
            if root_id != instance_id:
                root = uow.load(root_id)
                if root is not None and root.record.status is InstanceStatus.PARKED:
                    return None
            record = instance.record
            if (
                record.kind is InstanceKind.TASK
                and record.status is InstanceStatus.BORN
                and record.cancel is None
            ):
                if on_step_lane():
                    raise TaskDeferred(instance_id)  # the body runs on a task thread, never here
                return run_task(self, instance_id)
            decision = decide(self, uow, instance, careful=careful)
            if decision is None:
                if not fresh:
                    fresh = True  # idle on this engine's copy: confirm with the store
                    continue
                return None
            try:
                self.commit(uow)
            except IntegrityError:
                careful = fresh = True
                continue
            if self.has_work(instance):
                uow.follow(instance_id)
            self.enact(uow)
            return decision
        raise StorageError(f"could not commit work for {instance_id}: too many concurrent writers")

    def step_along(self, uow: UnitOfWork, instance_id: UUID | None, *, careful: bool) -> Instance | None:
        """Add the next macrostep of an instance ``uow`` wrote to if this engine runs it; that instance.

        An event accepted for an instance this engine holds and has
        acquired (a message sent to it, a task's outcome for its parent) is
        then consumed in the same commit as its acceptance, instead of in a
        second one after the runner picks the instance up. Nothing is added
        (None) for an instance not in ``uow``, not held and acquired here,
        fenced, parked or in a parked tree, finished, or a task; the runner
        then steps it as before.
        """
        if instance_id is None or not self.holdings.runnable(instance_id):
            return None
        instance = uow.loaded.get(instance_id)
        if instance is None:
            return None
        record = instance.record
        if (
            record.kind is not InstanceKind.CHART
            or record.status.finished
            or record.status is InstanceStatus.PARKED
            or record.owner != self.engine_id
            or not self.holdings.holds_at(instance_id, record.incarnation)
        ):
            return None
        if record.root != instance_id:
            root = uow.load(record.root)
            if root is not None and root.record.status is InstanceStatus.PARKED:
                return None
        uow.fence(instance)
        if decide(self, uow, instance, careful=careful) is None:
            return None
        return instance

    def commit_along(
        self, uow: UnitOfWork, instance_id: UUID | None, *, along: bool, careful: bool
    ) -> Literal["committed", "conflict", "alone"]:
        """Commit and enact ``uow``, with the next macrostep of ``instance_id`` when this thread may take it.

        ``uow`` wrote to ``instance_id``'s inbox (a message sent, a task's
        outcome for its parent). When ``along`` and the runner lets this
        thread work on that instance now (:meth:`inline`), its macrostep
        joins the commit (:meth:`step_along`), and the runner hears of the
        instance afterwards only if more work is due. Returns
        ``"committed"``; ``"conflict"`` after a version conflict (decide
        again from fresh copies); ``"alone"`` when the macrostep could not be
        added or was refused (an oversized event): decide again without it,
        and the runner's processing meets the problem and reports it.
        """
        with self.inline(instance_id, along) as inline:
            stepped = None
            if inline:
                try:
                    stepped = self.step_along(uow, instance_id, careful=careful)
                except Exception:  # the runner's processing meets it again and reports it
                    log.debug("%s is stepped by the runner", instance_id, exc_info=True)
                    return "alone"
            try:
                self.commit(uow)
            except IntegrityError:
                return "conflict"
            except PayloadTooLarge:
                if stepped is None:
                    raise
                return "alone"
            if stepped is not None:
                if self.has_work(stepped):
                    uow.follow(stepped.id)
                else:
                    uow.unfollow(stepped.id)
            self.enact(uow)
        return "committed"

    def has_work(self, instance: Instance) -> bool:
        """Whether an instance has something to do right now (after a commit)."""
        record = instance.record
        if record.status.finished or record.status is InstanceStatus.PARKED:
            return False
        if record.inbox or record.cancel is not None or record.status is InstanceStatus.BORN:
            return True
        cached = self._decoded.get(instance.id)
        if cached is None or cached[0] != instance.version:
            return False
        now = self.clock.now()
        return any(timer.deadline <= now for timer in cached[1].timers)

    def save_instances(self, *instances: Instance) -> None:
        """Save the instances' pending events in one atomic save (``IntegrityError`` on a conflict).

        The facts saved are logged once stored (see ``incarnate._logs``).
        """
        written = [(i, tuple(i.pending_events)) for i in instances] if _logs.wanted() else None
        try:
            self.group_commit.save(instances)
        except IntegrityError:
            with self._cache_lock:  # every mutation of a cache holds the lock (see _make_room)
                for instance in instances:
                    self._latest.pop(instance.id, None)
            raise
        except PersistenceError as error:
            raise StorageError(f"the store refused a commit: {error}") from error
        self._saw(instances)
        if written:
            _logs.committed(self.engine_id, written)

    def _write(self, instances: Sequence[Instance]) -> None:
        """Store the instances' pending events in one transaction; they stay pending when it fails.

        ``Application.save`` takes the events off the aggregates before
        recording them; here they are taken off only once recorded, so the
        group committer can write the units of a failed joint transaction
        again, each on its own.
        """
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for instance in instances:
            processing.events.extend(instance.pending_events)
            processing.aggregates[instance.id] = instance
        self._store(processing)
        for instance in instances:
            instance.collect_events()
        self._take_snapshots(processing)

    def _store(self, processing: ProcessingEvent[UUID]) -> None:
        """``Application._record`` without building its recordings (nothing here reads them).

        The library builds a ``Recording`` and a ``Notification`` per event
        for ``Application._notify``, a hook the engine does not use.
        """
        events = self.events
        if not isinstance(events, LimitedEventStore):  # pragma: no cover - construct_event_store makes one
            self._notify(self._record(processing))
            return
        events.store(processing.events)
        repository = self.repository
        if repository.cache and not repository.fastforward:
            for aggregate_id, aggregate in processing.aggregates.items():
                repository.cache.put(aggregate_id, aggregate)

    def commit(self, uow: UnitOfWork) -> None:
        """Save a unit of work in one atomic save, fenced: :class:`Fenced` if it writes an instance not held.

        Its new instances are held by this engine at incarnation 1.
        """
        pending = uow.pending()
        if not pending:
            _tracing.committed()
            return
        unchanged = {
            instance.id: instance.version - len(instance.pending_events)
            for instance in pending
            if _keep_snapshot(instance.pending_events)
        }
        try:
            for instance_id in uow.fenced:
                loaded = uow.loaded.get(instance_id)
                if loaded is not None:
                    self.check_holds(loaded)
            self._hook("before-commit", uow)
            self.save_instances(*pending)
        except IntegrityError:
            _tracing.conflicted()
            raise
        except BaseException as error:
            _tracing.abandoned(error)
            raise
        _tracing.committed()  # the step's span ends with its commit
        finished = [instance.id for instance in pending if instance.record.status.finished]
        for instance in pending:
            if not instance.record.status.finished:
                self._remember(instance, uow.decoded.get(instance.id), unchanged.get(instance.id))
        holdings = self.holdings
        holdings.created(
            (instance_id, created.record.incarnation) for instance_id, created in uow.created.items()
        )
        if finished:  # it runs nowhere again: nothing of it stays, so memory stays flat
            for instance_id in finished:
                holdings.finish(instance_id)
                self._snapshotted.pop(instance_id, None)
            self._drop_copies(finished)
        self._hook("after-commit", uow)

    def _hook(self, point: str, uow: UnitOfWork) -> None:
        """Commit points where tests inject crashes (see ``incarnate.testing``)."""
        for hook in self.hooks:
            hook(point, uow)

    def enact(self, uow: UnitOfWork) -> None:
        """Hand a committed unit of work's follow-ups and deadlines to the runner."""
        for deadline, instance_id in uow.deadlines:
            self.runner.notify_at(deadline, instance_id)
        for instance_id in uow.followups:
            self.runner.notify(instance_id)

    # ---------------------------------------------------------- running

    def run_until_idle(self, max_units: int = 100_000) -> int:
        """Process work until nothing is due (the deterministic runner); returns units done."""
        return self.runner.run_until_idle(max_units)

    def resume_all(self) -> int:
        """Take over every unfinished call tree no live engine holds; returns how many were acquired.

        Each in-flight root owned by no live engine is taken over with its
        retained children (:meth:`take_over`; a child is never revived on its
        own), 10 trees claimed in the first save and up to 100 in each
        later one; each tree goes to the runner as soon as its claim has
        landed and its ResumePlan is rebuilt, so the first trees run while
        later ones are read. Trees held by live engines are left alone,
        logged, and listed in :attr:`left_alone` (each a :class:`TreeHeld`
        naming the holder). A leftover child whose caller has ended is finished (its interrupted
        cancel cascade completes). A tree with a stored record that does not
        decode is parked with an incident naming it; the other trees recover
        as usual.
        """
        self.listing.catch_up()
        roots: list[UUID] = []
        children: list[UUID] = []
        for row in self.listing.rows(in_flight=True):
            if self.holdings.is_acquired(row.id) and self.holdings.holds(row.id):
                continue
            (roots if row.parent is None else children).append(row.id)
        before = self.holdings.acquisitions()
        held_elsewhere: list[TreeHeld] = []
        begin, size = 0, RESUME_FIRST_BATCH
        while begin < len(roots):
            _, refused = take_over_batch(self, roots[begin : begin + size], reason="resumed after a restart")
            held_elsewhere.extend(refused)
            begin, size = begin + size, RESUME_BATCH
        for child_id in children:
            if self.holdings.holds(child_id):
                continue
            try:
                self.take_over(child_id, reason="finishing the cancel cascade of an ended caller")
            except (TreeHeld, NotARoot, UnknownInstance):
                continue  # reached through its root, or held by a live engine
        for held in held_elsewhere:
            log.info(
                "left to its live owner: %s",
                held,
                extra={"engine_id": self.engine_id, "instance_id": str(held.root), "holder": held.holder},
            )
        if held_elsewhere:
            log.info("%d call trees are held by live engines and were left alone", len(held_elsewhere))
        self.left_alone = tuple(held_elsewhere)
        return self.holdings.acquisitions() - before

    @property
    def listing(self) -> Listing:
        """The recovery listing of in-flight instances (created on first use)."""
        if self._listing is None:
            self._listing = Listing(self)
        return self._listing

    def __enter__(self) -> Self:
        """``with Engine(...) as engine:`` closes the engine on the way out (see :meth:`close`)."""
        return super().__enter__()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Close the engine, whether or not the block raised; an exception propagates."""
        super().__exit__(exc_type, exc_value, traceback)

    @property
    def coordination(self) -> Coordination:
        """The facts this engine shares with the fleet through the store (created on first use)."""
        with self._coordination_lock:
            if self._coordination is None:
                self._coordination = self.store.coordination()
            return self._coordination

    def close(self) -> None:
        """Stop the runner gracefully, then close the listing, the coordination and the store."""
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.stop()
        heartbeat = getattr(self, "heartbeat", None)
        if heartbeat is not None:
            heartbeat.stop(retire=True)  # what it owned is claimable at once
        listing = getattr(self, "_listing", None)
        if listing is not None:
            listing.close()
        lock = getattr(self, "_coordination_lock", None)
        if lock is not None:
            with lock:
                coordination, self._coordination = self._coordination, None
            if coordination is not None:
                coordination.close()
        super().close()
