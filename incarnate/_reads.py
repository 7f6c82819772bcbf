"""Reading instances: private copies of stored instances, their snapshots, and their ResumePlans.

Every read goes through the journal (the store) and the engine's copies;
nothing here writes. A copy handed out is private: changing it (a command
appends events to it) changes nothing anyone else sees until it is saved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar, overload
from uuid import UUID

import attrs
from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import PersistenceError, StoredEvent

from aggregates import Instance, InstanceKind, InstanceRecord, InstanceSnapshot, InstanceStatus, stored_topic
from incarnate._copies import Catalog, Copies, clone
from incarnate._journal import Journal, project
from incarnate.errors import EngineError, StorageError, UnknownInstance
from projections import (
    Checkpoint,
    CheckpointUndecodable,
    embedded_history,
    embedded_tasks,
    instance_at,
    resume_plan,
)
from statechart import Chart, JsonValue
from statechart.snapshot import Snapshot

log = logging.getLogger("incarnate.engine")

C = TypeVar("C")

_ENDINGS = (Instance.Completed, Instance.Failed, Instance.Cancelled, Instance.Orphaned)
"""The facts that end an instance."""
_LIVE_ONLY = (
    Instance.Started,
    Instance.Stepped,
    Instance.Birth,
    Instance.ChildRetry,
    Instance.ChildResume,
    Instance.Accepted,
    Instance.CancelRequested,
    Instance.Claimed,
    Instance.Migrated,
    Instance.Resolved,
)
"""Facts the aggregate records only while the instance has not ended: an instance whose last one is
one of them has not ended. After an ending, only the others (an incident, a settlement, a refused
message) may follow it."""
_LIVE_ONLY_TOPICS = frozenset(stored_topic(cls) for cls in _LIVE_ONLY)
"""The topics those facts are stored under now: a last event under one of them is not decoded to
tell that the instance runs (one stored in an older format is, and tells the same)."""


@attrs.frozen
class Ending:
    """How an instance ended: its final status, and its output or error."""

    instance_id: UUID
    status: InstanceStatus
    output: JsonValue
    error: JsonValue

    @classmethod
    def of(cls, instance: Instance) -> Ending:
        record = instance.record
        return cls(instance.id, record.status, record.output, record.error)


class _Shell:
    """Just enough of an aggregate for an ending fact to apply to: a record and nothing else."""

    def __init__(self, instance_id: UUID) -> None:
        self.record = InstanceRecord(InstanceKind.CHART, "", "", None, "", instance_id, None, None, ())


def _nobody(task_id: UUID) -> UUID | None:
    return None


EMBEDDED_COPY = "_incarnate_embedded_copy"
"""The attribute that marks an embedded task rebuilt from its parent's events (never saved)."""


def embedded_copy(instance: Instance) -> Instance:
    """Mark a rebuilt embedded task as a copy for reading (see :func:`is_embedded_copy`)."""
    setattr(instance, EMBEDDED_COPY, True)
    return instance


def is_embedded_copy(instance: Instance) -> bool:
    """Whether ``instance`` is an embedded task rebuilt from its parent's events (no stream to save)."""
    return getattr(instance, EMBEDDED_COPY, False)


class Reads:
    """Instances as stored, this engine's copies of them, their snapshots and ResumePlans."""

    def __init__(self, journal: Journal, copies: Copies, catalog: Catalog) -> None:
        self.journal = journal
        self.copies = copies
        self.catalog = catalog
        self.parent_of: Callable[[UUID], UUID | None] = _nobody
        """The parent an embedded task child lives in, by the task's id (None: not an embedded task).

        The engine answers from the tasks it runs and from the listing."""

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """The instance aggregate, as stored now (``fresh=False``: this engine's last committed copy).

        An embedded task child (no stream of its own) is rebuilt from its
        parent's events (see :meth:`embedded_events`); such a copy is for
        reading only: the commit path refuses to save it.
        """
        try:
            instance: object = self.load(instance_id, fresh=fresh)
        except AggregateNotFoundError:
            events = self.embedded_events(instance_id)
            if not events:
                raise UnknownInstance(instance_id) from None
            return embedded_copy(instance_at(events, len(events)))
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance_id}: {error}") from error
        if not isinstance(instance, Instance):
            raise UnknownInstance(instance_id)
        return instance

    def embedded_events(self, task_id: UUID) -> list[Any]:
        """The events of an embedded task child, rebuilt from its parent's ([] if it is none)."""
        parent_id = self.parent_of(task_id)
        if parent_id is None:
            return []
        try:
            parent_events = self.journal.events_of(parent_id)
        except UnknownInstance:
            return []
        return embedded_history(parent_events, task_id)

    def embedded_children(self, parent: Instance) -> dict[UUID, Instance]:
        """The embedded task children of ``parent``, each rebuilt, by id (one read of its events)."""
        if not any(a.embedded for a in parent.record.activations):
            return {}
        tasks = embedded_tasks(self.journal.events_of(parent.id))
        return {task_id: embedded_copy(instance_at(events, len(events))) for task_id, events in tasks.items()}

    def load(self, aggregate_id: UUID, *, fresh: bool = True) -> Any:
        """A private copy of a stored aggregate.

        ``fresh`` reads from the store whatever this engine has not seen: the
        copy this engine last committed when the store holds nothing past it
        (one indexed query), else the library's cache, fast-forwarded (a first
        read of an instance reads its whole history). Otherwise the copy this
        engine last committed is used when it has one: a command computed on
        it that turns out stale fails its save on the version conflict and is
        retried fresh.

        Aggregate state is immutable values throughout (frozen attrs records,
        tuples, JSON data never changed in place), so a shallow copy is as
        safe as the library's deep copy and much cheaper; only the pending
        events must not be shared.
        """
        latest = self.copies.latest(aggregate_id)
        if latest is not None and (not fresh or self.journal.is_current(latest)):
            return latest
        return clone(self.journal.aggregate(aggregate_id))

    def ending(self, instance_id: UUID) -> Ending | None:
        """How the instance ended, or None while it has not; usually from its last stored event alone.

        A final ending this engine committed, or a finished copy it holds,
        answers at once, without reading the store. Otherwise the last
        stored event decides: an ending fact
        (``Completed``, ``Failed``, ``Cancelled``, ``Orphaned``) is the
        answer; a fact recorded only while an instance runs means it runs
        (told by its stored topic, without decoding it);
        anything else (a fact that may follow an ending) sends the question
        to the whole instance.
        """
        known = self.copies.ending(instance_id)
        if known is not None:
            return Ending(instance_id, *known)
        latest = self.copies.latest(instance_id)
        if latest is not None and latest.record.status.finished:
            return Ending.of(latest)
        try:
            last = self.journal.recorder.select_events(instance_id, desc=True, limit=1)
        except PersistenceError as error:
            raise StorageError(f"could not read instance {instance_id}: {error}") from error
        if not last:
            found = self.embedded_events(instance_id)
            if not found:
                raise UnknownInstance(instance_id)
            task = instance_at(found, len(found))
            return Ending.of(task) if task.record.status.finished else None
        if last[0].topic in _LIVE_ONLY_TOPICS:
            return None  # it runs: what ``handle.result()`` asks of a running instance, answered undecoded
        [event] = self.journal.decode_records(instance_id, last)
        if isinstance(event, _ENDINGS):
            shell = _Shell(instance_id)
            event.apply(shell)
            record = shell.record
            return Ending(instance_id, record.status, record.output, record.error)
        if isinstance(event, _LIVE_ONLY):
            return None
        instance = self.instance(instance_id)
        return Ending.of(instance) if instance.record.status.finished else None

    def instances(self) -> Iterator[Instance]:
        """Every instance in the store, in order of creation (embedded task children at their birth)."""
        for instance_id in self.journal.instance_ids(embedded=True):
            try:
                yield self.instance(instance_id)
            except UnknownInstance:
                continue

    def children(self, instance_id: UUID) -> list[Instance]:
        """The current incarnations retained by an instance (its activations)."""
        instance = self.instance(instance_id)
        embedded = self.embedded_children(instance)
        return [
            embedded[a.child_id] if a.embedded and a.child_id in embedded else self.instance(a.child_id)
            for a in instance.record.activations
        ]

    def prefetch(self, instance_ids: Sequence[UUID]) -> dict[UUID, list[StoredEvent]]:
        """The stored events of many instances in one query, for :meth:`read` to decode.

        Left out: instances with a stored snapshot (read as usual, from the
        snapshot on), instances with no events, and everything when the
        store reads instances one by one (in memory).
        """
        return self.journal.select_many(instance_ids)

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
            start, events = self.journal.stored(instance_id)
        else:
            start = None
            events = self.journal.decode_records(instance_id, records)
            if not events:
                raise UnknownInstance(instance_id)
        aggregate: Any = start.mutate(None) if start is not None else None
        aggregate = project(aggregate, events)
        if not isinstance(aggregate, Instance):
            raise UnknownInstance(instance_id)
        self.copies.saw([aggregate])
        return clone(aggregate), start, events

    @overload
    def snapshot(self, instance_id: UUID) -> Snapshot[Any]: ...

    @overload
    def snapshot(self, instance_id: UUID, chart: Chart[C]) -> Snapshot[C]: ...

    def snapshot(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Snapshot[Any]:
        """The decoded current snapshot of a chart instance (see ``Engine.snapshot``)."""
        instance = self.instance(instance_id)
        name = instance.record.name
        if chart is not None and chart.name != name:
            raise EngineError(
                f"instance {instance_id} runs chart {name!r}, not {chart.name!r}; "
                f"fix: pass the chart {name!r} (or no chart) to snapshot()"
            )
        registered = self.catalog.charts.get(name)
        if registered is None:
            raise EngineError(f"chart {name!r} of {instance_id} is not registered")
        return self.copies.decode(registered, instance)

    # ----------------------------------------------------------- ResumePlans

    def plan(self, instance_id: UUID, chart: Chart[Any] | None = None) -> Checkpoint:
        """The ResumePlan of an instance: its checkpoint rebuilt from the store and validated.

        ``chart`` defaults to the registered chart of the instance. An
        embedded task's plan is folded from its events rebuilt from its parent's.
        """
        try:
            start, events = self.journal.stored(instance_id)
        except UnknownInstance:
            rebuilt = self.embedded_events(instance_id)
            if not rebuilt:
                raise
            return resume_plan(rebuilt, None)
        if chart is None:
            name = start.state.record.name if start is not None else getattr(events[0], "name", "")
            chart = self.catalog.charts.get(name)
        return self.resume_plan(instance_id, chart, start, events)[0]

    def resume_plan(
        self, instance_id: UUID, chart: Chart[Any] | None, start: InstanceSnapshot | None, events: list[Any]
    ) -> tuple[Checkpoint, InstanceSnapshot | None, list[Any]]:
        """The ResumePlan of what the journal read, and the snapshot and events it was built from.

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
        start, events = self.journal.stored(instance_id)
        return resume_plan(events, chart, start=start), start, events

    def refuse_snapshot(self, instance_id: UUID, version: int, why: str) -> None:
        """Never build ``instance_id`` from its snapshot at ``version`` again here: replay its events.

        The snapshot is left in the store (events stay the truth; a later
        snapshot supersedes it); the warning says why it was refused. So are
        the snapshots stored since (up to the stored head): an aggregate built
        on the refused one may have taken them.
        """
        self.journal.refuse_snapshot(instance_id, version)
        self.copies.drop((instance_id,))
        log.warning(
            "refusing the stored snapshot of %s at version %d, which does not fit its chart (%s); "
            "rebuilding the instance from its events",
            instance_id,
            version,
            why,
        )
