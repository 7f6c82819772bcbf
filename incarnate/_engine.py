"""The Engine: an eventsourcing Application that runs chart instances durably."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sqlite3
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import (
    ApplicationRecorder,
    EventStore,
    IntegrityError,
    Mapper,
    MapperDeserialisationError,
    PersistenceError,
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
from incarnate._clock import Clock, SystemClock
from incarnate._limits import LimitedEventStore, positive_int
from incarnate._listing import Listing
from incarnate._process import Decision, decide
from incarnate._recovery import ParkedRoot, acquire, migrate, park_corrupt, parked, resolve, terminate
from incarnate._runners import DeterministicRunner, Runner
from incarnate._storage import Storage
from incarnate._tasks import TaskFunction, run_task
from incarnate._work import UnitOfWork
from incarnate.errors import (
    ConfigurationError,
    EngineError,
    InstanceTerminated,
    PayloadTooLarge,
    StorageError,
    UnknownInstance,
)
from projections import Checkpoint, resume_plan
from statechart import (
    Chart,
    Event,
    JsonValue,
    Registry,
    Shape,
    Snapshot,
    SnapshotCodec,
    check_json,
    error_invoke_event,
)
from statechart.errors import CodecError

log = logging.getLogger("incarnate.engine")

MAX_CONFLICT_RETRIES = 20
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
    """Evict the oldest entries until ``incoming`` fits in ``size`` entries.

    ``popitem`` is atomic, unlike ``del cache[next(iter(cache))]``, so a
    writer that does not hold the cache lock cannot make it fail.
    """
    if incoming in cache:
        return
    while len(cache) >= size:
        try:
            cache.popitem(last=False)
        except KeyError:  # emptied meanwhile
            return


_MEMORY_STORES: dict[str, ApplicationRecorder] = {}
_MEMORY_LOCK = threading.Lock()


def forget_memory_store(name: str) -> None:
    """Drop a named in-memory store (tests call this when done with it)."""
    with _MEMORY_LOCK:
        _MEMORY_STORES.pop(name, None)


@contextlib.contextmanager
def _decoding(instance_id: UUID) -> Iterator[None]:
    """Stored records of ``instance_id`` that do not decode raise :class:`CorruptRecord` (the edge)."""
    try:
        yield
    except MapperDeserialisationError as error:
        raise CorruptRecord.of(instance_id, error) from error


class SnapshotStore(EventStore[UUID]):
    """The snapshot store: a snapshot that does not decode is skipped with a warning.

    Snapshots only save time: without one the aggregate is replayed from its
    events, which stay the truth, so a corrupted snapshot never costs
    correctness.
    """

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
    ) -> None:
        self.storage = storage if storage is not None else Storage.from_env()
        merged = self.storage.env()
        # Checked on each encoded event before the recorder is called (see construct_event_store).
        self.max_payload_bytes = (
            positive_int(max_payload_bytes, "max_payload_bytes")
            if max_payload_bytes is not None
            else self.storage.payload_limit()
        )
        if snapshot_interval is not None:
            if snapshot_interval < 1:
                raise ConfigurationError(f"snapshot_interval must be at least 1, got {snapshot_interval}")
            merged["IS_SNAPSHOTTING_ENABLED"] = "y"
            self.snapshotting_intervals = {Instance: snapshot_interval}  # type: ignore[misc]
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
        if self.storage.kind == "postgres":
            # One direct connection first: an unreachable server, a missing database or a
            # refused user is reported at once, by name, instead of as a pool timeout.
            from incarnate._postgres import check_connection

            check_connection(self.storage, self.storage.timeout("connect_timeout"))
        try:
            super().__init__(env=merged)
        except (PersistenceError, sqlite3.DatabaseError, OSError) as error:
            factory = getattr(self, "factory", None)
            if factory is not None:
                with contextlib.suppress(Exception):
                    factory.close()  # stop the pool's connection attempts
            if self.storage.kind == "postgres":
                from incarnate._postgres import check_connection

                check_connection(self.storage, self.storage.timeout("connect_timeout"))
            raise StorageError(f"cannot open {self.storage.describe()}: {error}") from error
        self.acquired: set[UUID] = set()
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
        self._codecs: dict[str, SnapshotCodec[Any]] = {}
        self._decoded: OrderedDict[UUID, tuple[int, Snapshot[Any]]] = OrderedDict()
        self.hooks: list[Callable[[str, UnitOfWork], None]] = []
        for chart in charts:
            self.register(chart)
        for name, fn in (tasks or {}).items():
            self.register_task(name, fn)
        self.registry.validate()
        self._record_chart_versions()
        self.runner: Runner = runner or DeterministicRunner()
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
        name = self.storage.memory_name if self.storage.kind == "popo" else ""
        if not name:
            return super().construct_recorder()
        with _MEMORY_LOCK:
            recorder = _MEMORY_STORES.get(name)
            if recorder is None:
                recorder = _MEMORY_STORES[name] = super().construct_recorder()
            return recorder

    def construct_event_store(self) -> EventStore[UUID]:
        """Events are refused, before anything is written, when one is over ``max_payload_bytes``."""
        return LimitedEventStore(self.mapper, self.recorder, self.max_payload_bytes)

    def construct_snapshot_store(self) -> EventStore[UUID]:
        """Snapshots that do not decode are skipped (see :class:`SnapshotStore`)."""
        recorder = self.factory.aggregate_recorder(purpose="snapshots")
        return SnapshotStore(mapper=self.mapper, recorder=recorder)

    def register(self, chart: Chart[Any]) -> None:
        """Register a chart under its name."""
        self.registry.add(chart)
        self.charts[chart.name] = chart
        self._codecs[chart.name] = SnapshotCodec(chart)

    def _record_chart_versions(self) -> None:
        """Store each registered chart's shape once, so later versions can be compared with it."""
        for chart in self.charts.values():
            version_id = ChartVersion.id_for(chart.name, chart.fingerprint)
            if version_id in self.repository:
                continue
            with contextlib.suppress(IntegrityError):  # another engine recorded it first
                self.save(ChartVersion.register(chart.shape))

    def chart_shape(self, name: str, fingerprint: str) -> Shape | None:
        """The recorded shape of chart ``name`` under ``fingerprint``, if any engine stored it."""
        try:
            version: ChartVersion = self.repository.get(ChartVersion.id_for(name, fingerprint))
        except AggregateNotFoundError:
            return None
        return version.shape

    def register_task(self, name: str, fn: TaskFunction) -> None:
        """Register a task callable (sync or async) under ``name``."""
        if not callable(fn):
            raise ConfigurationError(f"task {name!r} must be callable, got {fn!r}")
        self.registry.add_task(name)
        self.tasks[name] = fn

    # ---------------------------------------------------------- codec

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        """A snapshot as stored data."""
        return self._codecs[chart.name].encode(snapshot)

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        """The instance's current snapshot, decoded through its registered chart."""
        cached = self._decoded.get(instance.id)
        if cached is not None and cached[0] == instance.version:
            return cached[1]
        data = instance.record.snapshot
        if data is None:
            raise CodecError(chart.name, "snapshot", f"instance {instance.id} has no snapshot yet")
        snapshot = self._codecs[chart.name].decode(data)
        return snapshot

    def _remember(self, instance: Instance, decoded: Snapshot[Any] | None = None) -> None:
        """Keep the decoded snapshot of the version just committed, for the next unit of work."""
        record = instance.record
        chart = self.charts.get(record.name)
        if chart is None or record.snapshot is None or record.kind is not InstanceKind.CHART:
            return
        snapshot = decoded
        if snapshot is None:
            try:
                snapshot = self._codecs[chart.name].decode(record.snapshot)
            except CodecError:
                return
        with self._cache_lock:
            known = self._decoded.get(instance.id)
            if known is not None and known[0] > instance.version:
                return  # another thread remembered a newer version
            _make_room(self._decoded, self.cache_size, instance.id)
            self._decoded[instance.id] = (instance.version, snapshot)

    # -------------------------------------------------------- commands

    def start(self, chart: str, input: JsonValue = None, *, id: UUID | None = None) -> UUID:
        """Start a root instance of ``chart``; its first macrostep is committed with its creation.

        ``input`` is validated strictly against the chart's context class
        before anything is stored (see :func:`statechart.context_from_input`):
        an unknown field, a value of another type (no conversion between str,
        int, float and bool; an int is accepted for a float) or a str given
        for a collection raises :class:`~statechart.errors.CodecError`.
        """
        from statechart import context_from_input
        from statechart.errors import IncarnateError

        found = self.charts.get(chart)
        if found is None:
            raise EngineError(f"chart {chart!r} is not registered (registered: {sorted(self.charts)})")
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
            id=id or uuid.uuid4(),
            kind=InstanceKind.CHART,
            name=chart,
            fingerprint=found.fingerprint,
            input=input,
            owner=self.engine_id,
        )
        uow = UnitOfWork(self)
        uow.created[instance.id] = instance
        decide(self, uow, instance, careful=False)
        self._commit(uow)
        if self._has_work(instance):
            uow.follow(instance.id)
        self._enact(uow)
        return instance.id

    def send(
        self, instance_id: UUID, event: str | Event, data: JsonValue = None, *, key: str | None = None
    ) -> int | None:
        """Durably accept an event for an instance; returns its inbox sequence number.

        The event is in the store when this returns and is processed exactly
        once. With ``key``, a repeated send with the same key is accepted once:
        every repeat returns None, whatever the instance's status (running,
        finished, cancelled, failed). A new key, or no key, to a finished
        instance raises :class:`InstanceTerminated`.

        The name must be a non-empty str and the data plain JSON (no tuple,
        set or object; nothing is converted), else :class:`EngineError` is
        raised and nothing is stored.
        """
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
            check_json(event.data, "data")
        except TypeError as error:
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: {error}; event data must be "
                "plain JSON (None, bool, int, float, str, lists, dicts with str keys)"
            ) from error
        if key is not None and not isinstance(key, str):
            raise EngineError(f"the key of a send must be a str, got {type(key).__name__} {key!r}")
        if event.invoke_id is None and name.startswith(RESERVED_PREFIXES):
            raise EngineError(
                f"cannot send {name!r} to instance {instance_id}: names starting with "
                f"{', '.join(repr(p) for p in RESERVED_PREFIXES)} report a child's outcome and must "
                "name its incarnation; choose another event name, or build the outcome with "
                "done_invoke_event()/error_invoke_event()"
            )
        fresh = False
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.instance(instance_id, fresh=fresh)
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
            try:
                self._save(instance)
            except IntegrityError:
                fresh = True
                continue
            self.runner.notify(instance_id)
            return message.seq
        raise StorageError(f"could not accept an event for {instance_id}: too many concurrent writers")

    def cancel(self, instance_id: UUID, reason: str = "cancelled by an operator") -> bool:
        """Ask an instance to stop (its children are cancelled in cascade)."""
        for _ in range(MAX_CONFLICT_RETRIES):
            instance = self.instance(instance_id)
            if not instance.request_cancel(None, reason):
                return False
            try:
                self._save(instance)
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
        self._commit(uow)
        self._enact(uow)
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
        with _decoding(instance_id):
            events = list(self.events.get(instance_id, gt=start.originator_version if start else None))
        if start is None and not events:
            raise UnknownInstance(instance_id)
        return start, events

    def read(self, instance_id: UUID) -> tuple[Instance, InstanceSnapshot | None, list[Any]]:
        """Read an instance once for recovery: the aggregate, and what it was built from.

        The aggregate is built from the latest stored snapshot (if any) and
        the events after it; the same snapshot and events feed its ResumePlan.
        The result also becomes this engine's latest copy of the instance.
        """
        start, events = self.stored(instance_id)
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
        return resume_plan(events, chart, start=start)

    # -------------------------------------------------------- recovery

    def acquire(self, instance_id: UUID) -> bool:
        """Acquire an instance after a restart: validate its ResumePlan and re-enact its children.

        Returns False when the instance may not run (it, or its root, is parked).
        """
        return acquire(self, instance_id)

    def parked(self) -> list[ParkedRoot]:
        """Roots held for an operator, with their incidents."""
        return parked(self)

    def migrate(self, instance_id: UUID, mapping: Mapping[str, str]) -> Checkpoint | None:
        """Map a parked instance's stored states onto the registered chart, then unpark its root.

        The mapping is validated before anything is written; the new snapshot
        must fit the chart. Returns the root's checkpoint once it runs again.
        """
        return migrate(self, instance_id, mapping)

    def resolve(self, root_id: UUID, resolution: str = "resolved by an operator") -> Checkpoint | None:
        """Unpark a root whose tree now decodes (e.g. after registering a compatible chart)."""
        return resolve(self, root_id, resolution)

    def terminate(self, root_id: UUID, reason: str = "terminated by an operator") -> int:
        """Dispose of a (parked) call tree without running it; returns how many instances ended."""
        return terminate(self, root_id, reason)

    def snapshot(self, instance_id: UUID) -> Snapshot[Any]:
        """The decoded current snapshot of a chart instance."""
        instance = self.instance(instance_id)
        chart = self.charts.get(instance.record.name)
        if chart is None:
            raise EngineError(f"chart {instance.record.name!r} of {instance_id} is not registered")
        return self.decode(chart, instance)

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
        """Commit the next unit of work of one instance, then enact it; None when it is idle."""
        if instance_id not in self.acquired:
            try:
                if not self.acquire(instance_id):
                    return None
            except UnknownInstance:
                return None
        try:
            return self._process(instance_id)
        except CorruptRecord as error:
            # A record of this instance (or of one its unit of work reads) does not decode:
            # park the tree it belongs to instead of failing the runner.
            park_corrupt(self, error, instance_id)
            return None
        except PayloadTooLarge as error:
            return self._fail_oversized(instance_id, error)

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
            detail: dict[str, JsonValue] = {"error": type(error).__name__, "message": str(error)}
            instance.record_incident("payload-too-large", str(error), park=False)
            instance.fail(detail)
            uow.tell_parent(instance, self.clock.now(), error_invoke_event, detail)
            try:
                self._commit(uow)
            except IntegrityError:
                continue
            self._enact(uow)
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
                return run_task(self, instance_id)
            decision = decide(self, uow, instance, careful=careful)
            if decision is None:
                if not fresh:
                    fresh = True  # idle on this engine's copy: confirm with the store
                    continue
                return None
            try:
                self._commit(uow)
            except IntegrityError:
                careful = fresh = True
                continue
            if self._has_work(instance):
                uow.follow(instance_id)
            self._enact(uow)
            return decision
        raise StorageError(f"could not commit work for {instance_id}: too many concurrent writers")

    def _has_work(self, instance: Instance) -> bool:
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

    def _save(self, *instances: Instance) -> None:
        try:
            self.save(*instances)
        except IntegrityError:
            for instance in instances:
                self._latest.pop(instance.id, None)
            raise
        except PersistenceError as error:
            raise StorageError(f"the store refused a commit: {error}") from error
        self._saw(instances)

    def _commit(self, uow: UnitOfWork) -> None:
        pending = uow.pending()
        if pending:
            self._hook("before-commit", uow)
            self._save(*pending)
            for instance in pending:
                self._remember(instance, uow.decoded.get(instance.id))
            self.acquired.update(uow.created)
            self._hook("after-commit", uow)

    def _hook(self, point: str, uow: UnitOfWork) -> None:
        """Commit points where tests inject crashes (see ``incarnate.testing``)."""
        for hook in self.hooks:
            hook(point, uow)

    def _enact(self, uow: UnitOfWork) -> None:
        for deadline, instance_id in uow.deadlines:
            self.runner.notify_at(deadline, instance_id)
        for instance_id in uow.followups:
            self.runner.notify(instance_id)

    # ---------------------------------------------------------- running

    def run_until_idle(self, max_units: int = 100_000) -> int:
        """Process work until nothing is due (the deterministic runner); returns units done."""
        return self.runner.run_until_idle(max_units)

    def resume_all(self) -> int:
        """Acquire every unfinished call tree after a restart; returns how many instances were acquired.

        Roots are acquired first, each with its retained children (a child is
        never revived on its own); a leftover child whose caller has finished
        is cancelled, finishing the interrupted cascade. A tree with a stored
        record that does not decode is parked with an incident naming it; the
        other trees recover as usual.
        """
        self.listing.catch_up()
        roots: list[UUID] = []
        children: list[UUID] = []
        for row in self.listing.rows(in_flight=True):
            if row.id in self.acquired:
                continue
            (roots if row.parent is None else children).append(row.id)
        before = len(self.acquired)
        for root_id in roots:
            self.acquire(root_id)
        for child_id in children:
            if child_id not in self.acquired:
                self.acquire(child_id)
        return len(self.acquired) - before

    @property
    def listing(self) -> Listing:
        """The recovery listing of in-flight instances (created on first use)."""
        if self._listing is None:
            self._listing = Listing(self)
        return self._listing

    def close(self) -> None:
        """Stop the runner gracefully, then close the listing and the store."""
        runner = getattr(self, "runner", None)
        if runner is not None:
            runner.stop()
        listing = getattr(self, "_listing", None)
        if listing is not None:
            listing.close()
        super().close()
