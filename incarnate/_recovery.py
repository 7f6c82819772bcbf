"""Cold recovery: acquire instances through their ResumePlan, re-attach children, park or migrate.

A fresh engine knows nothing but the store. The first time it touches an
instance it *acquires* it: it rebuilds the checkpoint from the stored events
(:func:`projections.resume_plan`), checks it against the registered chart,
and re-enacts the retained children — the same incarnations, armed again.
Acquisition publishes no statechart step, no parent commit and no Birth.

When a checkpoint does not decode under the registered chart, or its
activations do not match exactly, the engine records an incident and parks
the owning root: nothing of that call tree runs until an operator migrates
or terminates it.

A stored record that does not decode at all (a corrupted event) parks the
tree too. The broken instance cannot be loaded, so its incident (and, when
an operator terminates it, its end) is appended at the next stored version
without decoding the records before it (:func:`park_corrupt`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any
from uuid import UUID

import attrs
from eventsourcing.domain import Aggregate
from eventsourcing.persistence import IntegrityError, MapperDeserialisationError

from aggregates import (
    Activation,
    ActivationState,
    AncestryFrame,
    BirthFacts,
    Incident,
    Instance,
    InstanceKind,
    InstanceSnapshot,
    InstanceStatus,
    Message,
    Provenance,
)
from aggregates.errors import CorruptRecord, InputMismatch, InvalidCommand
from incarnate._parts import Parts
from incarnate._runners import notify_due_task
from incarnate._work import UnitOfWork
from incarnate.errors import StorageError, UnknownInstance
from projections import Checkpoint, CheckpointError, CheckpointUndecodable
from statechart import Chart, Event
from statechart.errors import CodecError
from statechart.event import done_invoke_event, error_invoke_event
from statechart.model import StateKind
from statechart.shape import compare
from statechart.snapshot import Snapshot, snapshot_problems

log = logging.getLogger("incarnate.recovery")

RETRIES = 20
CORRUPT_RECORD = "corrupt-record"
"""The incident kind of a stored record that does not decode."""

Stored = tuple[Instance, InstanceSnapshot | None, list[Any]]
"""An instance as read for recovery: the aggregate, the snapshot it started from, the events after it."""


@attrs.frozen
class ParkedRoot:
    """A root held for an operator, with the incidents recorded in its tree."""

    root: UUID
    name: str
    incidents: tuple[Incident, ...]


# ----------------------------------------------------------------- acquire


def acquire(
    parts: Parts,
    instance_id: UUID,
    seen: set[UUID] | None = None,
    *,
    loaded: Stored | None = None,
    caller: Instance | None = None,
    known: Mapping[UUID, Stored] | None = None,
) -> bool:
    """Acquire an instance (and, first, the children it retains); False when it must not run.

    Idempotent: an instance this engine has acquired (or created) is not
    acquired again. Cycles and repeats in malformed records are visited once.
    Each instance is read from the store once: the same events build the
    aggregate and its ResumePlan. ``loaded`` and ``caller`` pass down what a
    parent's acquisition has read already, ``known`` what a take-over read
    (and claimed) of the whole tree. A record of the tree that does not
    decode parks the tree (:func:`park_corrupt`) and returns False.
    """
    if parts.holdings.is_acquired(instance_id):
        return True
    if loaded is None and known is not None:
        loaded = known.get(instance_id)
    if seen is None:
        before = parts.holdings.acquisitions()
        try:
            acquired = _acquire(parts, instance_id, set(), loaded=loaded, caller=caller, known=known)
        except CorruptRecord as error:
            park_corrupt(parts, error, instance_id)
            return False
        if acquired and log.isEnabledFor(logging.INFO):
            _log_acquired(parts, instance_id, parts.holdings.acquisitions() - before)
        return acquired
    return _acquire(parts, instance_id, seen, loaded=loaded, caller=caller, known=known)


def _log_acquired(parts: Parts, instance_id: UUID, count: int) -> None:
    """INFO: an instance (and the children it retains) now runs on this parts."""
    try:
        record = parts.reads.instance(instance_id, fresh=False).record
    except (UnknownInstance, CorruptRecord):
        return
    log.info(
        "acquired %s (%r) with %d instances of its tree: its checkpoint is rebuilt and its children re-armed",
        instance_id,
        record.name,
        count,
        extra={
            "instance_id": str(instance_id),
            "chart": record.name,
            "root_id": str(record.root),
            "owner": record.owner,
            "engine_id": parts.engine_id,
            "acquired": count,
        },
    )


def _acquire(
    parts: Parts,
    instance_id: UUID,
    seen: set[UUID],
    *,
    loaded: Stored | None,
    caller: Instance | None,
    known: Mapping[UUID, Stored] | None,
) -> bool:
    if parts.holdings.is_acquired(instance_id):
        return True
    if instance_id in seen:
        return True
    seen.add(instance_id)
    instance, start, events = loaded if loaded is not None else parts.reads.read(instance_id)
    record = instance.record
    if record.status.finished:
        parts.holdings.finish(instance_id)  # nothing of it runs again: nothing to remember
        return True
    if record.status is InstanceStatus.PARKED or _root_parked(parts, instance, caller):
        return False
    chart: Chart[Any] | None = None
    if record.kind is InstanceKind.CHART:
        chart = parts.charts.get(record.name)
        if chart is None:
            detail = f"chart {record.name!r} is not registered with this engine"
            park(parts, instance_id, "unknown-chart", detail)
            return False
        breaking = breaking_changes(parts, record.name, record.fingerprint, chart)
        if breaking:
            park(
                parts,
                instance_id,
                "revalidation",
                f"chart {record.name!r} changed incompatibly since this instance was stored: "
                + "; ".join(breaking),
            )
            return False
    try:
        plan, used, _ = parts.reads.resume_plan(instance_id, chart, start, events)
        if used is not start:  # its snapshot was refused: the aggregate is rebuilt from the events too
            instance = parts.reads.read(instance_id)[0]
            record = instance.record
    except CheckpointUndecodable as error:
        park(parts, instance_id, "revalidation", str(error))
        return False
    except CheckpointError as error:
        park(parts, instance_id, "checkpoint", str(error))
        return False
    if plan.snapshot is not None:
        parts.copies.remember_snapshot(instance_id, instance.version, plan.snapshot)
    if record.parent is not None and _caller_gone(parts, instance, caller):
        parts.holdings.acquire(instance_id)
        return True
    runnable = True
    for activation in plan.activations:
        if activation.embedded:
            continue  # its body is handed to the runner with its parent (see _arm)
        if activation.state is ActivationState.RUNNING and not reattach(
            parts, instance, activation, seen, known
        ):
            runnable = False  # the tree was parked while re-attaching: nothing of it may run
    if not runnable:
        return False
    parts.holdings.acquire(instance_id)
    _arm(parts, instance, plan)
    return True


def _arm(parts: Parts, instance: Instance, plan: Checkpoint) -> None:
    """Hand the instance to the runner if it has work now; watch its future timers.

    Its embedded tasks still running go first, as re-attached children do
    (their bodies run again, with the same idempotency keys): an outcome
    waiting in the inbox is the parent's to consume instead.
    """
    record = instance.record
    told = {message.source for message in record.inbox}
    for activation in plan.activations:
        running = activation.embedded and activation.state is ActivationState.RUNNING
        if running and activation.child_id not in told:
            parts.commits.run_embedded(activation.ref)
    now = parts.clock.now()
    timers = plan.snapshot.timers if plan.snapshot is not None else ()
    due = any(timer.deadline <= now for timer in timers)
    # A Basic HTTP send recorded before the crash and not settled is posted again (at least once).
    waiting = record.inbox or record.outbox or record.cancel is not None
    if due or waiting or record.status is InstanceStatus.BORN:
        if record.kind is InstanceKind.TASK and not waiting:
            notify_due_task(parts.runner, instance.id)  # its body is due: straight to a task lane
        else:
            parts.runner.notify(instance.id)
    for timer in timers:
        if timer.deadline > now:
            parts.runner.notify_at(timer.deadline, instance.id)


def _root_parked(parts: Parts, instance: Instance, caller: Instance | None) -> bool:
    root_id = instance.record.root
    if root_id == instance.id:
        return False
    if caller is not None and caller.id == root_id:
        return caller.record.status is InstanceStatus.PARKED
    try:
        return parts.reads.instance(root_id, fresh=False).record.status is InstanceStatus.PARKED
    except UnknownInstance:
        return False


def breaking_changes(parts: Parts, name: str, fingerprint: str, chart: Chart[Any]) -> tuple[str, ...]:
    if not fingerprint or fingerprint == chart.fingerprint:
        return ()
    old = parts.journal.chart_shape(name, fingerprint)
    if old is None:
        return ()  # unknown old shape: the decode check below still guards
    return compare(old, chart.shape).breaking


def caller_ended(parts: Parts, instance: Instance, caller: Instance | None = None) -> str | None:
    """Why the caller of a child no longer awaits it (ended, gone, moved on); None while it does.

    ``caller`` is the parent when the caller already loaded it.
    """
    ref = instance.record.parent
    if ref is None:
        return None
    try:
        parent = (
            caller if caller is not None and caller.id == ref.parent else parts.reads.instance(ref.parent)
        )
        status = parent.record.status
        activation = parent.record.activation(ref.site, ref.key)
        retained = activation is not None and activation.ref == ref
    except UnknownInstance:
        return f"caller {ref.parent} is gone"
    if retained and not status.finished:
        return None
    if status is InstanceStatus.RUNNING:
        return f"caller {ref.parent} moved on"
    return f"caller {ref.parent} is {status.value}"


def _caller_gone(parts: Parts, instance: Instance, caller: Instance | None) -> bool:
    """Finish an interrupted cancel cascade: a child whose caller is terminal, gone or moved on (FR-6)."""
    reason = caller_ended(parts, instance, caller)
    if reason is None:
        return False
    ref = instance.record.parent
    assert ref is not None
    for _ in range(RETRIES):
        child = parts.reads.instance(instance.id)
        if not child.request_cancel(ref.parent, f"{reason}; recovery finished the cancel cascade"):
            parts.runner.notify(child.id)  # already asked to stop: let it
            return True
        try:
            parts.commits.save_instances(child)
        except IntegrityError:
            continue
        parts.runner.notify(child.id)
        return True
    raise StorageError(f"could not finish the cancel cascade of {instance.id}")


def reattach(
    parts: Parts,
    parent: Instance,
    activation: Activation,
    seen: set[UUID],
    known: Mapping[UUID, Stored] | None = None,
) -> bool:
    """Decide from the child's real status: consume, re-park, or report the failure for a retry.

    Returns False when the call tree must not run (it was parked, here or
    below). ``known`` holds children a take-over has read already.
    """
    ref = activation.ref
    if parts.holdings.is_acquired(activation.child_id):
        return True
    loaded: Stored | None = known.get(activation.child_id) if known is not None else None
    if loaded is None:
        try:
            loaded = parts.reads.read(activation.child_id)
        except UnknownInstance:
            loaded = None
    if loaded is None:
        _deliver(parts, parent.id, error_invoke_event(ref.invoke_id, {"reason": "vanished"}))
        return True
    child = loaded[0]
    differences = _birth_differences(parts, parent, activation, child)
    if differences:
        # The parent and the child disagree about which incarnation this is: running it, or
        # consuming its outcome, would resume an approximate child. An operator decides.
        slot = f"{ref.site}[{ref.key}]" if ref.key else ref.site
        park(
            parts,
            parent.id,
            "checkpoint",
            f"slot {slot} retains child {child.id}, whose own birth facts differ from the parent's "
            f"(parent's != child's): {'; '.join(differences)}; the child is neither run nor consumed: "
            "restore both records from a backup, or terminate the tree",
        )
        return False
    status = child.record.status
    if status is InstanceStatus.DONE:
        _deliver(parts, parent.id, done_invoke_event(ref.invoke_id, child.record.output))
    elif status in (InstanceStatus.FAILED, InstanceStatus.CANCELLED):
        error = child.record.error or {"reason": status.value}
        _deliver(parts, parent.id, error_invoke_event(ref.invoke_id, error))
    else:
        return acquire(parts, child.id, seen, loaded=loaded, caller=parent, known=known)
    return True


def _deliver(parts: Parts, parent_id: UUID, event: Event) -> None:
    """Put a child's outcome in the parent's inbox unless it is already there."""
    for _ in range(RETRIES):
        parent = parts.reads.instance(parent_id)
        if any(_same_outcome(m, event) for m in parent.record.inbox):
            return
        parent.accept(event, source=None, sent_at=parts.clock.now())
        try:
            parts.commits.save_instances(parent)
        except IntegrityError:
            continue
        parts.runner.notify(parent_id)
        return
    raise StorageError(f"could not deliver a child outcome to {parent_id}")


def _same_outcome(message: Message, event: Event) -> bool:
    return (
        message.event.invoke_id == event.invoke_id
        and message.event.name.split(".")[:2] == event.name.split(".")[:2]
    )


# -------------------------------------------------------------------- park


def park(parts: Parts, instance_id: UUID, kind: str, detail: str) -> None:
    """Record an incident on the instance and park its root."""
    for _ in range(RETRIES):
        uow = UnitOfWork(parts.commits)
        instance = uow.load(instance_id)
        if instance is None:
            raise UnknownInstance(instance_id)
        root = uow.load(instance.record.root)
        if root is None or root is instance:
            instance.record_incident(kind, detail, park=not instance.record.status.finished)
        else:
            instance.record_incident(kind, detail, park=False)
            if not root.record.status.finished:
                root.record_incident(kind, f"in {instance.id} ({instance.record.name}): {detail}", park=True)
        try:
            parts.commits.commit(uow)
        except IntegrityError:
            continue
        parts.holdings.unacquire(instance_id, instance.record.root)
        log.warning(
            "recovery parked the call tree of %s: %s in %s (%r): %s",
            instance.record.root,
            kind,
            instance_id,
            instance.record.name,
            detail,
            extra={
                "instance_id": str(instance_id),
                "chart": instance.record.name,
                "root_id": str(instance.record.root),
                "owner": instance.record.owner,
                "engine_id": parts.engine_id,
                "incident": kind,
            },
        )
        return
    raise StorageError(f"could not park the tree of {instance_id}")


def parked(parts: Parts) -> list[ParkedRoot]:
    """Every parked root, with the incidents recorded in its tree."""
    parts.listing.catch_up()
    out = []
    for row in parts.listing.rows(in_flight=True, roots=True):
        if row.status != InstanceStatus.PARKED.value:
            continue
        try:
            record = parts.reads.instance(row.id).record  # the listing may lag: decide on the aggregate
        except CorruptRecord:
            found = salvage(parts, row.id)
            if found.status is InstanceStatus.PARKED:
                out.append(ParkedRoot(row.id, found.name or row.name, found.incidents))
            continue
        if record.status is InstanceStatus.PARKED:
            out.append(ParkedRoot(row.id, record.name, record.incidents))
    return out


# --------------------------------------------------------- corrupt records


@attrs.frozen
class Salvaged:
    """What the records of an instance that do decode say about it (its events are not all readable)."""

    instance_id: UUID
    version: int
    """The version of its last stored record, readable or not."""
    name: str = ""
    root: UUID | None = None
    """None when its ``Started`` record does not decode."""
    status: InstanceStatus = InstanceStatus.BORN
    incidents: tuple[Incident, ...] = ()


_SALVAGED_STATUS: dict[type[Any], InstanceStatus] = {
    Instance.Completed: InstanceStatus.DONE,
    Instance.Failed: InstanceStatus.FAILED,
    Instance.Cancelled: InstanceStatus.CANCELLED,
    Instance.Orphaned: InstanceStatus.ORPHAN,
}


def salvage(parts: Parts, instance_id: UUID) -> Salvaged:
    """Fold the readable records of an instance into its name, root, status and incidents.

    Only for operator views and for deciding whether a broken instance is
    parked or finished already: records that do not decode are skipped, so
    this is never a checkpoint.
    """
    found = Salvaged(instance_id, 0)
    for event in _readable(parts, instance_id):
        found = attrs.evolve(found, version=event.originator_version)
        if isinstance(event, Instance.Started):
            found = attrs.evolve(found, name=event.name, root=event.root)
        elif isinstance(event, Instance.IncidentRecorded):
            status = InstanceStatus.PARKED if event.incident.parked else found.status
            found = attrs.evolve(found, incidents=(*found.incidents, event.incident), status=status)
        elif isinstance(event, Instance.Resolved | Instance.Redriven) or (
            isinstance(event, Instance.Stepped) and found.status is InstanceStatus.BORN
        ):
            found = attrs.evolve(found, status=InstanceStatus.RUNNING)
        elif type(event) in _SALVAGED_STATUS:
            found = attrs.evolve(found, status=_SALVAGED_STATUS[type(event)])
    last = parts.journal.recorder.select_events(instance_id, desc=True, limit=1)
    return attrs.evolve(found, version=last[0].originator_version if last else 0)


def _readable(parts: Parts, instance_id: UUID) -> Iterator[Any]:
    for record in parts.journal.recorder.select_events(instance_id):
        try:
            yield parts.journal.mapper.to_domain_event(record)
        except MapperDeserialisationError:
            continue


def park_corrupt(parts: Parts, error: CorruptRecord, near: UUID) -> None:
    """Park the tree of the instance whose record does not decode, found while working on ``near``.

    The root (if it decodes) records the incident as usual, naming the
    broken instance; the broken instance records it too, appended at its
    next stored version without decoding the records before it. Both are
    idempotent: an incident already recorded for the same record is not
    recorded again, so every fresh engine that meets it parks it once.
    """
    broken = error.instance_id
    root = _root_of(parts, near if near != broken else broken)
    log.warning(
        "parking the call tree of %s: %s",
        root,
        error.fact,
        extra={
            "instance_id": str(broken),
            "root_id": str(root),
            "engine_id": parts.engine_id,
            "incident": CORRUPT_RECORD,
        },
    )
    if root != broken:
        _record_incident(parts, root, f"in {broken}: {error.fact}")
    _record_incident(parts, broken, error.fact)
    parts.holdings.unacquire(root, broken, near)


def _root_of(parts: Parts, instance_id: UUID) -> UUID:
    """The root of an instance, from its aggregate, its readable records or the listing."""
    try:
        return parts.reads.instance(instance_id, fresh=False).record.root
    except CorruptRecord:
        pass
    root = salvage(parts, instance_id).root
    if root is not None:
        return root
    row = parts.listing.get(instance_id)
    return row.root if row is not None else instance_id


def _record_incident(parts: Parts, instance_id: UUID, detail: str) -> None:
    """Park ``instance_id`` with a corrupt-record incident, unless it has one for ``detail`` or ended."""
    for _ in range(RETRIES):
        try:
            instance = parts.reads.instance(instance_id)
        except CorruptRecord:
            found = salvage(parts, instance_id)
            if found.status.finished or _recorded(found.incidents, detail):
                return
            incident = Incident(CORRUPT_RECORD, detail, found.version + 1, True)
            event = Instance.IncidentRecorded(  # type: ignore[call-arg]
                originator_id=instance_id,
                originator_version=found.version + 1,
                timestamp=Instance.IncidentRecorded.create_timestamp(),
                incident=incident,
            )
            if _append(parts, event):
                return
            continue
        except UnknownInstance:
            return
        if instance.record.status.finished or _recorded(instance.record.incidents, detail):
            return
        instance.record_incident(CORRUPT_RECORD, detail, park=True)
        try:
            parts.commits.save_instances(instance)
        except IntegrityError:
            continue
        return
    raise StorageError(f"could not record the corrupt-record incident of {instance_id}")


def _recorded(incidents: tuple[Incident, ...], detail: str) -> bool:
    return any(i.kind == CORRUPT_RECORD and i.detail == detail for i in incidents)


def _append(parts: Parts, event: Aggregate.Event) -> bool:
    """Store one event of an instance that cannot be loaded; False on a version conflict."""
    try:
        parts.journal.events.put([event])
    except IntegrityError:
        return False
    return True


# -------------------------------------------------------------- operators


def _complete_configuration(chart: Chart[Any], states: set[int]) -> set[int]:
    """Add ancestors, and default descendants where a compound or parallel state lacks them."""
    out = set(states)
    for s in list(out):
        out.update(a for a in chart.ancestors[s] if a != 0)
    changed = True
    while changed:
        changed = False
        for s in sorted(out):
            kind = chart.kind[s]
            if kind is StateKind.COMPOUND and not any(c in out for c in chart.children[s]):
                for target in chart.initial[s]:
                    out.add(target)
                    out.update(a for a in chart.ancestors[target] if a != 0)
                changed = True
            elif kind is StateKind.PARALLEL:
                for c in chart.children[s]:
                    if c not in out:
                        out.add(c)
                        changed = True
    return out


def migrated_snapshot(
    chart: Chart[Any], data: dict[str, Any], mapping: Mapping[str, str]
) -> tuple[dict[str, Any], Snapshot[Any]]:
    """Apply a state mapping to stored snapshot data; return the new data and its decoded form.

    Mapped states replace their old ids; the configuration is completed with
    ancestors and default children; history entries of states that no longer
    exist are dropped, as are delayed-transition timers of states no longer
    active. Raises ``ValueError`` listing what still does not fit.
    """
    from statechart.codec import SnapshotCodec

    index = chart.index
    unknown_targets = [new for new in mapping.values() if new not in index]
    if unknown_targets:
        raise ValueError(f"the mapping targets states the chart does not have: {unknown_targets}")
    configuration = [mapping.get(s, s) for s in data["configuration"]]
    missing = [s for s in configuration if s not in index]
    if missing:
        raise ValueError(f"states {missing} no longer exist and the mapping does not name them")
    active = _complete_configuration(chart, {index[s] for s in configuration})
    new = dict(data)
    new["configuration"] = [chart.ids[i] for i in sorted(active)]
    history = []
    for entry in data.get("history", []):
        hid = mapping.get(entry["id"], entry["id"])
        states = [mapping.get(s, s) for s in entry["states"]]
        if hid in index and all(s in index for s in states):
            history.append({"id": hid, "states": states})
    new["history"] = history
    active_ids = set(new["configuration"])
    new["timers"] = [
        t
        for t in data.get("timers", [])
        if not t["id"].startswith("after.") or t["id"].rsplit(".", 1)[0].removeprefix("after.") in active_ids
    ]
    new["children"] = [dict(c, state=mapping.get(c["state"], c["state"])) for c in data.get("children", [])]
    try:
        snapshot = SnapshotCodec(chart).decode(new)
    except CodecError as error:
        raise ValueError(str(error)) from error
    problems = snapshot_problems(chart, snapshot)
    if problems:
        raise ValueError("; ".join(problems))
    return new, snapshot


def terminate(parts: Parts, root_id: UUID, reason: str) -> int:
    """Dispose of a whole call tree (children first, in one commit) without running it; returns how many.

    Instances whose records do not decode cannot be loaded: each gets its
    ``Cancelled`` appended at its next stored version, before the commit.
    """
    broken: list[UUID] = []
    members = call_tree(parts, root_id, broken)
    ended = sum(_end_broken(parts, instance_id, reason) for instance_id in reversed(broken))
    if not members:
        return ended
    for _ in range(RETRIES):
        uow = UnitOfWork(parts.commits)
        count = ended
        for instance in reversed(members):
            loaded = uow.load(instance.id)
            if loaded is None or loaded.record.status.finished:
                continue
            loaded.mark_cancelled(f"terminated: {reason}")
            count += 1
        try:
            parts.commits.commit(uow)
        except IntegrityError:
            continue
        return count
    raise StorageError(f"could not terminate the tree of {root_id}")


def _end_broken(parts: Parts, instance_id: UUID, reason: str) -> int:
    """Append ``Cancelled`` to an instance that cannot be loaded; 1 if it ended now, else 0."""
    for _ in range(RETRIES):
        found = salvage(parts, instance_id)
        if found.status.finished:
            return 0
        event = Instance.Cancelled(  # type: ignore[call-arg]
            originator_id=instance_id,
            originator_version=found.version + 1,
            timestamp=Instance.Cancelled.create_timestamp(),
            reason=f"terminated: {reason}",
        )
        if _append(parts, event):
            return 1
    raise StorageError(f"could not terminate {instance_id}")


def call_tree(parts: Parts, root_id: UUID, broken: list[UUID] | None = None) -> list[Instance]:
    """The instances of a call tree, parents before children, each once.

    With ``broken``, instances whose records do not decode are collected
    there instead of raising :class:`CorruptRecord`; their children are
    found through the listing.
    """
    out: list[Instance] = []
    seen: set[UUID] = set()
    pending = [root_id]
    while pending:
        instance_id = pending.pop(0)
        if instance_id in seen:
            continue
        seen.add(instance_id)
        try:
            instance = parts.reads.instance(instance_id)
        except UnknownInstance:
            continue
        except CorruptRecord:
            if broken is None:
                raise
            broken.append(instance_id)
            parts.listing.catch_up()
            pending.extend(row.id for row in parts.listing.rows() if row.parent == instance_id)
            continue
        out.append(instance)
        pending.extend(a.child_id for a in instance.record.activations if not a.embedded)
    return out


def _birth_differences(parts: Parts, parent: Instance, activation: Activation, child: Instance) -> list[str]:
    """How the child's own stored birth facts differ from those its parent retains (empty: none).

    The parent retains each birth fact somewhere: the Ref, chart or task,
    attempt, armed step and provenance in the activation (with the previous
    Ref last in its retry journal), the state and input in its snapshot's
    slot, the root and ancestry in its own record. The child keeps its birth
    facts, and again its kind, chart, root, Ref, input and ancestry, in its
    first event.
    """
    record = child.record
    birth = record.birth
    if birth is None:
        return [f"the child is a root of {record.name!r}, not an incarnation of {activation.ref}"]
    found = [
        f"the child's first event has {field} {own!r}, its birth facts {theirs!r}"
        for field, own, theirs in (
            ("kind", record.kind, birth.kind),
            ("name", record.name, birth.name),
            ("root", record.root, birth.root),
            ("Ref", record.parent, birth.ref),
            ("input", record.input, birth.input),
            ("ancestry", record.ancestry, birth.ancestry),
        )
        if own != theirs
    ]
    kept = parent.record
    slot = kept.slots.get((activation.site, activation.key))
    chart = parts.charts.get(kept.name)
    site = chart.site_by_id.get(activation.site) if chart is not None else None
    ancestry = birth.ancestry if site is None else kept.ancestry
    if site is not None and site.group is not None:
        ancestry = (*ancestry, AncestryFrame(site.group, activation.ref))
    journal = activation.journal
    retained = BirthFacts(
        type(parent).__name__,
        activation.ref,
        kept.root,
        activation.kind,
        activation.name,
        slot["state"] if slot is not None else birth.state,
        activation.attempt,
        slot.get("input") if slot is not None else birth.input,
        ancestry,
        activation.armed_step,
        activation.provenance,
        journal[-1].ref if activation.provenance is Provenance.RETRY and journal else None,
    )
    if retained.state != birth.state:
        # A migration renames the state a slot sits on, never a birth fact: the parent's own
        # stored Birth (or ChildResume) keeps the state the child was born in.
        for event in parts.journal.events_of(parent.id):
            facts = getattr(event, "facts", None)
            if isinstance(facts, BirthFacts) and facts.ref == activation.ref:
                retained = attrs.evolve(retained, state=facts.state)
    return [*found, *retained.differences(birth)]


def deliver_birth(parts: Parts, facts: BirthFacts) -> bool:
    """Create the child a retained Birth names, if it does not exist yet (re-delivery).

    Identical facts for an existing child are a no-op (False); different
    facts raise :class:`~aggregates.InputMismatch` and write nothing. The
    parent must retain an activation for the facts' Ref.
    """
    parent = parts.reads.instance(facts.ref.parent)
    activation = parent.record.activation(facts.ref.site, facts.ref.key)
    if activation is None or activation.ref != facts.ref:
        raise InvalidCommand(parent.id, "deliver a birth", f"no activation retains {facts.ref}")
    uow = UnitOfWork(parts.commits)
    existing = uow.load(facts.child_id)
    if existing is not None:
        theirs = existing.record.birth
        if theirs != facts:
            raise InputMismatch(
                facts.child_id, facts.differences(theirs) if theirs is not None else ("it is a root",)
            )
        return False
    chart = parts.catalog.charts.get(facts.name)
    fingerprint = chart.fingerprint if chart is not None else ""
    uow.create(Instance.born(facts, fingerprint=fingerprint, owner=parts.engine_id))
    parts.commits.commit(uow)
    parts.commits.enact(uow)
    return True
