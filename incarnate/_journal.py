"""The journal: the engine's private ``eventsourcing`` Application, the one part that talks to the library.

It owns the library's objects — recorder, event store, snapshot store,
repository, mapper — and what goes with them: the cattrs mapper, the payload
limit checked before anything is written, snapshots spaced by size, stored
chart versions, and reads of an instance's raw history (its events, its
latest snapshot and the events after it). Nothing above it constructs or
subclasses the library's Application.

An instance is never saved through :meth:`Journal.save` (which would skip
fencing): the commit path writes instances with :meth:`Journal.write`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any
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

from aggregates import CattrsMapper, ChartVersion, Instance, InstanceSnapshot, stored_topic
from aggregates.errors import CorruptRecord
from incarnate._limits import LimitedEventStore
from incarnate._snapshots import DEFAULT_SNAPSHOT_EVENTS, TolerantZlib, snapshot_due
from incarnate.errors import EngineError, StorageError, UnknownInstance
from incarnate.store import Coordination, Store
from statechart import Chart
from statechart.shape import Shape

log = logging.getLogger("incarnate.engine")

FIRST_PAGE = 8
"""Events the first page of :meth:`Journal.events_newest_first` reads (each later page twice as many)."""
LAST_PAGE = 512
"""The most events one page of :meth:`Journal.events_newest_first` reads."""


def project(aggregate: Any, events: Iterable[Any]) -> Any:
    """Rebuild an aggregate by applying events in order.

    The library's default projector re-checks a runtime ``Protocol`` on every
    event, which costs more than applying it; our events are all mutators.
    """
    for event in events:
        aggregate = event.mutate(aggregate)
    return aggregate


@contextlib.contextmanager
def decoding(instance_id: UUID) -> Iterator[None]:
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


class Journal(Application[UUID]):
    """The engine's event store, as an ``eventsourcing`` Application of its own (see the module)."""

    name = "incarnate"

    def __init__(
        self,
        store: Store,
        *,
        env: Mapping[str, str],
        max_payload_bytes: int,
        snapshot_interval: int | None,
        describe: str,
    ) -> None:
        self.store = store
        self._coordination: Coordination | None = None
        self._coordination_lock = threading.Lock()
        self.described = describe
        """The store, described without secrets (for messages)."""
        self.max_payload_bytes = max_payload_bytes
        self.snapshot_interval = snapshot_interval
        self._snapshotted: dict[UUID, int] = {}
        """The version of the latest snapshot of each instance, as far as this engine knows."""
        self._shapes: dict[tuple[str, str], Shape] = {}
        """Recorded chart shapes by (name, fingerprint), read once each."""
        if snapshot_interval is not None:
            self.snapshotting_intervals = {Instance: snapshot_interval}  # type: ignore[misc]
        try:
            super().__init__(env=env)
        except (PersistenceError, sqlite3.DatabaseError, OSError) as error:
            factory = getattr(self, "factory", None)
            if factory is not None:
                with contextlib.suppress(Exception):
                    factory.close()  # stop the pool's connection attempts
            store.check()
            raise StorageError(f"cannot open {describe}: {error}") from error

    @property
    def coordination(self) -> Coordination:
        """The facts engines share through the store (heartbeats, leases, its clock), opened on first use."""
        with self._coordination_lock:
            if self._coordination is None:
                self._coordination = self.store.coordination()
            return self._coordination

    def close(self) -> None:
        """Close the coordination, then the library's Application (its recorders and pool)."""
        with self._coordination_lock:
            coordination, self._coordination = self._coordination, None
        if coordination is not None:
            coordination.close()
        super().close()

    # ----------------------------------------------------------- the library's construction

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

    # ----------------------------------------------------------- writing

    def save(
        self,
        *objs: MutableOrImmutableAggregate[UUID] | DomainEventProtocol[UUID] | None,
        **kwargs: Any,
    ) -> list[Recording[UUID]]:
        """The library's save, for anything but instances: an instance is written only fenced.

        Every write of an instance goes through a unit of work that checks
        the engine holds the instance's ownership incarnation (the commit
        path); ``save`` would skip that check, so handing it an instance
        raises :class:`EngineError` and writes nothing.
        """
        for obj in objs:
            if isinstance(obj, Instance):
                raise EngineError(
                    f"Journal.save() would write instance {obj.id} without checking that this engine "
                    "owns it (fencing); change instances through the engine's commands (start, send, "
                    "cancel, terminate, take_over, ...), which commit fenced units of work"
                )
        return super().save(*objs, **kwargs)

    def write(self, instances: Sequence[Instance]) -> None:
        """Store the instances' pending events in one transaction; they stay pending when it fails.

        ``Application.save`` takes the events off the aggregates before
        recording them; here they are taken off only once recorded, so the
        group committer can write the units of a failed joint transaction
        again, each on its own. ``Application._record`` would also build a
        ``Recording`` and a ``Notification`` per event for
        ``Application._notify``, a hook the engine does not use.
        """
        processing: ProcessingEvent[UUID] = ProcessingEvent()
        for instance in instances:
            processing.events.extend(instance.pending_events)
            processing.aggregates[instance.id] = instance
        events = self.events
        if isinstance(events, LimitedEventStore):
            events.store(processing.events)
            repository = self.repository
            if repository.cache and not repository.fastforward:
                for aggregate_id, aggregate in processing.aggregates.items():
                    repository.cache.put(aggregate_id, aggregate)
        else:  # pragma: no cover - construct_event_store makes one
            self._notify(self._record(processing))
        for instance in instances:
            instance.collect_events()
        self._take_snapshots(processing)

    def forget(self, instance_ids: Iterable[UUID]) -> None:
        """Forget what the journal remembers of finished instances (their latest snapshot's version)."""
        for instance_id in instance_ids:
            self._snapshotted.pop(instance_id, None)

    # ----------------------------------------------------------- chart versions

    def record_chart_versions(self, charts: Iterable[Chart[Any]]) -> None:
        """Store each chart's shape once, so later versions can be compared with it.

        A version already stored is known by its first event, read without
        decoding it (a shape is the largest record there is to decode, and
        every engine that starts asks this of each chart it registers).
        """
        for chart in charts:
            version_id = ChartVersion.id_for(chart.name, chart.fingerprint)
            if self.recorder.select_events(version_id, limit=1):
                continue
            with contextlib.suppress(IntegrityError):  # another engine recorded it first
                self.save(ChartVersion.register(chart.shape))

    def chart_shape(self, name: str, fingerprint: str) -> Shape | None:
        """The recorded shape of chart ``name`` under ``fingerprint``, if any engine stored it."""
        known = self._shapes.get((name, fingerprint))
        if known is not None:
            return known  # a recorded chart version never changes: read it once
        try:
            version: ChartVersion = self.repository.get(ChartVersion.id_for(name, fingerprint))
        except AggregateNotFoundError:
            return None
        self._shapes[(name, fingerprint)] = version.shape
        return version.shape

    # ----------------------------------------------------------- raw history

    def events_of(self, instance_id: UUID) -> list[Any]:
        """Every stored event of an instance, oldest first (:class:`CorruptRecord` if one does not decode)."""
        with decoding(instance_id):
            events = list(self.events.get(instance_id))
        if not events:
            raise UnknownInstance(instance_id)
        return events

    def events_newest_first(self, instance_id: UUID) -> Iterator[Any]:
        """The stored events of an instance, newest first, read a page at a time as the iteration asks.

        A reader that wants the last few events (the step that consumed a
        message, usually just committed) reads those, not the whole history.
        The first page holds :data:`FIRST_PAGE` events and each later one twice
        as many as the one before, up to :data:`LAST_PAGE`. Nothing is yielded
        for an unknown instance; a record that does not decode raises
        :class:`CorruptRecord` when the iteration reaches it.
        """
        below: int | None = None
        page = FIRST_PAGE
        while True:
            with decoding(instance_id):
                events = list(self.events.get(instance_id, lte=below, desc=True, limit=page))
            yield from events
            if len(events) < page or events[-1].originator_version <= 1:
                return
            below = events[-1].originator_version - 1
            page = min(page * 2, LAST_PAGE)

    def stored(self, instance_id: UUID) -> tuple[InstanceSnapshot | None, list[Any]]:
        """The latest stored snapshot of an instance (if snapshotting) and the events after it."""
        start: InstanceSnapshot | None = None
        if self.snapshots is not None:
            found = list(self.snapshots.get(instance_id, desc=True, limit=1))
            if found and isinstance(found[0], InstanceSnapshot):
                start = found[0]
                known = self._snapshotted.get(instance_id, 0)
                self._snapshotted[instance_id] = max(known, start.originator_version)
        with decoding(instance_id):
            events = list(self.events.get(instance_id, gt=start.originator_version if start else None))
        if start is None and not events:
            raise UnknownInstance(instance_id)
        return start, events

    def decode_records(self, instance_id: UUID, records: Sequence[StoredEvent]) -> list[Any]:
        """Stored records of one instance as domain events (:class:`CorruptRecord` if one does not decode)."""
        with decoding(instance_id):
            return [self.events.mapper.to_domain_event(record) for record in records]

    def aggregate(self, aggregate_id: UUID) -> Any:
        """The library's cached copy of a stored aggregate, fast-forwarded (never to be changed)."""
        with decoding(aggregate_id):
            return self.repository.get(aggregate_id, projector_func=project, deepcopy_from_cache=False)

    def is_current(self, instance: Instance) -> bool:
        """Whether the store holds no event of ``instance`` past its version (one indexed query)."""
        try:
            return not self.recorder.select_events(instance.id, gt=instance.version, limit=1)
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance.id}: {error}") from error

    def select_many(self, instance_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """The stored events of many instances in one query (see ``Reads.prefetch``)."""
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

    def instance_ids(self, *, embedded: bool = False) -> Iterator[UUID]:
        """Every instance id in the store, in order of first appearance.

        With ``embedded``, the ids of embedded task children too, each at
        its birth (the parent's ``Birth`` or ``ChildResume`` that embeds it).
        """
        seen: set[UUID] = set()
        births = (stored_topic(Instance.Birth), stored_topic(Instance.ChildResume))
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
                if embedded and n.topic in births:
                    birth = self.decode_records(originator, [n])[0]
                    if birth.embedded and birth.facts.child_id not in seen:
                        seen.add(birth.facts.child_id)
                        yield birth.facts.child_id
            start = notifications[-1].id + 1

    def refuse_snapshot(self, instance_id: UUID, version: int) -> None:
        """Never build ``instance_id`` from its snapshot at ``version`` again (nor those stored since)."""
        store = self.snapshots
        if isinstance(store, SnapshotStore):
            head = self.recorder.select_events(instance_id, desc=True, limit=1)
            last = max(version, head[0].originator_version if head else version)
            first, known = version, store.refused.get(instance_id)
            if known is not None:
                first, last = min(first, known[0]), max(last, known[1])
            store.refused = {**store.refused, instance_id: (first, last)}
        cache = self.repository.cache
        if cache is not None:
            with contextlib.suppress(KeyError):
                cache.get(instance_id, evict=True)
