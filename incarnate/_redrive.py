"""Fork and redrive: a new root from an instance's past checkpoint, and a failed or parked root run again.

A **fork** starts a new root (a new uuid4 id, never a second incarnation of
any Ref) from an instance's checkpoint at version *k*, read by time travel
(:mod:`incarnate._travel`). Its events are ``Started`` (the source's chart,
fingerprint and input), ``Forked`` (the source id, the version and the
source's root: the provenance), one ``Stepped`` holding the checkpoint's
statechart snapshot (its step counter restarted, as the new instance's
first macrostep), then an ``Accepted`` for each message that waited in
the source's inbox at *k*. They are committed in one save before anything
runs; the source is never written. A checkpoint in which children were
retained is refused: their incarnations belong to the source's Refs.

A **redrive** drives a failed or parked root again, keeping its identity,
from its *last good checkpoint*: the version just before the incident that
failed or parked it (``IncidentRecorded``, which a failing macrostep records
before ``Failed``; a parked root's parking incident). Neither the incident
nor ``Failed`` changes the checkpoint, and the redrive checks that nothing
after that version did; the message whose macrostep failed is still in the
inbox, so it is processed again, under the charts registered now. The
redrive is recorded as a ``Redriven`` event (the version, the status it had,
the reason) before the runner is told.
"""

from __future__ import annotations

import uuid
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError

from aggregates import Instance, InstanceKind, InstanceStatus
from incarnate._committing import MAX_CONFLICT_RETRIES
from incarnate._parts import Parts
from incarnate._travel import History
from incarnate._work import UnitOfWork
from incarnate.errors import ForkRefused, RedriveRefused, StorageError
from statechart.codec import SnapshotCodec
from statechart.errors import IncarnateError
from statechart.snapshot import check_snapshot


@attrs.frozen
class Redrive:
    """What ``Engine.redrive`` did (or, dry, would do): the instance, the status it had, the version it runs
    again from, and whether anything was written."""

    instance_id: UUID
    was: str
    version: int
    reason: str
    written: bool


def fork(parts: Parts, history: History, instance_id: UUID, version: int) -> UUID:
    """Start a new root from ``instance_id``'s checkpoint at ``version``; returns the new root's id."""
    source = history.at(instance_id, version)
    record = source.record

    def refuse(why: str) -> ForkRefused:
        return ForkRefused(instance_id, version, why)

    if record.kind is InstanceKind.TASK:
        raise refuse(
            f"it is a task ({record.name!r}), which has no chart checkpoint; fork its parent instead"
        )
    if record.snapshot_parts is None:
        raise refuse("its first macrostep had not been committed at that version; fork at version 2 or later")
    if record.status.finished:
        raise refuse(f"it had {record.status.value} by then; fork at a version before it finished")
    if record.activations:
        kept = ", ".join(
            f"{a.site}[{a.key}]#{a.generation}" if a.key else f"{a.site}#{a.generation}"
            for a in record.activations
        )
        raise refuse(
            f"children were retained then ({kept}): their incarnations belong to {instance_id}; "
            "fork at a version where no child runs"
        )
    chart = parts.catalog.charts.get(record.name)
    if chart is None:
        raise refuse(f"chart {record.name!r} is not registered with this engine; open it with that chart")
    data = record.snapshot
    assert data is not None
    try:
        decoded = SnapshotCodec(chart).decode(data)
        check_snapshot(chart, decoded)
    except IncarnateError as error:
        raise refuse(
            f"its snapshot then does not fit the registered chart {record.name!r} ({error}); "
            "register the chart version it ran, or fork a version that fits"
        ) from error
    if decoded.children:
        raise refuse("its snapshot then holds child slots; fork at a version where no child runs")
    commits = parts.commits
    now = parts.clock.now()
    new = Instance.start_root(
        id=uuid.uuid4(),
        kind=InstanceKind.CHART,
        name=record.name,
        fingerprint=chart.fingerprint,
        input=record.input,
        owner=parts.engine_id,
    )
    new.record_fork(instance_id, version, record.root)
    restarted = attrs.evolve(decoded, steps=1)  # the fork's first macrostep: births count from it
    new.record_step(
        trigger=None,
        consumed=None,
        timer=None,
        effects=(),
        now=now,
        snapshot=commits.encode(chart, restarted),
    )
    for message in record.inbox:
        new.accept(message.event, source=message.source, sent_at=message.sent_at, key=message.key)
    uow = UnitOfWork(commits)
    uow.create(new)
    for timer in restarted.timers:
        uow.watch(timer.deadline, new.id)
    commits.commit(uow)
    commits.enact(uow)
    return new.id


def last_good_version(history: History, instance: Instance) -> int:
    """The version a failed or parked root is redriven from (see the module's documentation)."""
    record = instance.record
    if record.parent is not None:
        raise RedriveRefused(
            instance.id,
            f"it is a child of {record.parent.parent}: a child runs again only as a retry of its slot "
            "(ChildRetry, then ChildResume on the parent), which its parent decides; redrive or fork "
            f"its root {record.root} instead",
        )
    status = record.status
    if status not in (InstanceStatus.FAILED, InstanceStatus.PARKED):
        hint = {
            InstanceStatus.DONE: "it finished well; fork it from a version to run it again",
            InstanceStatus.CANCELLED: "it was cancelled; fork it from a version before that",
            InstanceStatus.ORPHAN: "it was written off as an orphan; fork it from a version before that",
        }.get(status, "nothing to redrive: it runs (cancel it first, or wait for it)")
        raise RedriveRefused(instance.id, f"it is {status.value}, not failed or parked; {hint}")
    incidents = (
        [i for i in record.incidents if i.parked] if status is InstanceStatus.PARKED else record.incidents
    )
    # A Failed with no incident before it is redriven from the version before it.
    good = incidents[-1].at_version - 1 if incidents else instance.version - 1
    then = history.at(instance.id, good)
    same = (
        then.record.snapshot_parts == record.snapshot_parts
        and then.record.slots == record.slots
        and then.record.retained == record.retained
        and then.record.inbox == record.inbox
    )
    if not same or then.record.status.finished or then.record.status is InstanceStatus.PARKED:
        raise RedriveRefused(
            instance.id,
            f"its checkpoint changed after version {good}, the last before it was {status.value}; "
            f"fork it from version {good} instead (incarnate fork {instance.id} --at {good})",
        )
    return good


def check_fits(parts: Parts, instance: Instance) -> None:
    """Refuse a redrive whose checkpoint does not fit the chart registered now: it would only park again."""
    record = instance.record
    chart = parts.catalog.charts.get(record.name)
    if chart is None:
        raise RedriveRefused(
            instance.id, f"chart {record.name!r} is not registered with this engine; open it with that chart"
        )
    if record.snapshot is None:
        return  # it failed before its first macrostep: the redrive takes that step
    try:
        check_snapshot(chart, SnapshotCodec(chart).decode(record.snapshot))
    except IncarnateError as error:
        raise RedriveRefused(
            instance.id,
            f"its checkpoint does not fit the chart {record.name!r} registered now ({error}), so it would "
            f"park again; register the chart version it ran, or map its states onto this one "
            f"(incarnate migrate {instance.id} --map OLD=NEW)",
        ) from error


def redrive(parts: Parts, history: History, instance_id: UUID, reason: str, *, dry_run: bool) -> Redrive:
    """Record a redrive of a failed or parked root (unless ``dry_run``); the caller tells the runner."""
    for _ in range(MAX_CONFLICT_RETRIES):
        instance = parts.reads.instance(instance_id)
        good = last_good_version(history, instance)
        check_fits(parts, instance)
        was = instance.record.status.value
        if dry_run:
            return Redrive(instance_id, was, good, reason, False)
        instance.redrive(good, reason)
        try:
            parts.commits.save_instances(instance)
        except IntegrityError:
            continue
        return Redrive(instance_id, was, good, reason, True)
    raise StorageError(f"could not redrive {instance_id}: too many concurrent writers")
