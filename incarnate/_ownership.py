"""Ownership: claims, incarnations and fencing; a call tree is taken over as a unit.

Every instance has one owner (an engine id) and an *incarnation*, the
fencing token: 1 when it is created, +1 per ``Claimed`` event. An engine
writes an instance's macrosteps, task outcomes and births only while it
holds the current incarnation (:meth:`Engine.commit` checks it in the
loaded aggregate, and the save's optimistic concurrency makes the check
and the write one compare-and-swap).

:func:`take_over` moves a whole call tree to this engine (SRD-087): it
walks the tree from its root through the retained activations (each id
once, FR-5), refuses a child (FR-1), claims every unfinished member in
ONE atomic save (FR-2) — or, when one member is owned by another live
engine, raises :class:`~incarnate.errors.TreeHeld` and writes nothing
(FR-3) — then acquires the tree, children restored before their parent
(FR-4). A child whose caller has ended is finished, not revived (FR-6).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError

from aggregates import Instance
from aggregates.errors import CorruptRecord
from incarnate._parts import Parts
from incarnate._recovery import Stored, acquire, caller_ended, park_corrupt
from incarnate.errors import NotARoot, StorageError, TreeHeld, UnknownInstance

log = logging.getLogger("incarnate.ownership")

RETRIES = 20
DEFAULT_REASON = "taken over"


@attrs.frozen
class TakeOver:
    """What :func:`take_over` did: the root, the instances it claimed, and whether the tree is parked."""

    root: UUID
    claimed: tuple[UUID, ...]
    parked: bool


def is_live(parts: Parts, owner: str) -> bool:
    """Whether ``owner`` is an engine with an unexpired heartbeat (this engine counts as not live here)."""
    if not owner or owner == parts.engine_id:
        return False
    return parts.coordination.is_live(owner)


@attrs.define
class _Survey:
    """One call tree as read for a take-over: its members, parents first, and each one's history."""

    root: UUID
    start: Instance
    members: list[Instance]
    cascade: list[UUID]
    loaded: dict[UUID, Stored]
    previous: set[str] = attrs.field(factory=set)
    """The owners its claimed members had before the claim."""


def take_over(parts: Parts, root_id: UUID, *, reason: str = DEFAULT_REASON) -> TakeOver:
    """Claim the call tree of ``root_id`` for ``engine`` in one atomic save, then acquire it.

    Raises :class:`TreeHeld` (writing nothing) when a member is owned by
    another live engine, :class:`NotARoot` for a child whose caller still
    awaits it, and :class:`UnknownInstance` for an id the store does not
    know. A child whose caller has ended (or gone, or moved on) is taken
    over on its own only to finish it: its cancel cascade completes.
    """
    for _ in range(RETRIES):
        try:
            survey = _survey(parts, root_id)
        except CorruptRecord as error:
            park_corrupt(parts, error, root_id)
            return TakeOver(root_id, (), True)
        claims = _claims(parts, root_id, survey.members)
        try:
            _claim(parts, [(survey, claims)], reason)
        except IntegrityError:
            continue  # someone wrote meanwhile: walk the tree again
        return _acquire_tree(parts, survey, claims, reason)
    raise StorageError(f"could not take over the call tree of {root_id}: too many concurrent writers")


def take_over_batch(
    parts: Parts, roots: Sequence[UUID], *, reason: str = DEFAULT_REASON
) -> tuple[list[TakeOver], list[TreeHeld]]:
    """:func:`take_over` of many roots, their claims in one atomic save; what was taken and what is held.

    Each tree is read once (the same histories build its members and their
    ResumePlans), every member to claim of every tree is claimed in one
    save, and the trees are then acquired one after another, each handed to
    the runner as soon as it is planned. A tree held by a live engine is
    returned in the second list and nothing of it is written; an unknown id
    or an awaited child is skipped. When the joint save meets a concurrent
    write, each tree of the batch is taken over on its own.
    """
    taken: list[TakeOver] = []
    held: list[TreeHeld] = []
    surveyed: list[tuple[_Survey, list[Instance]]] = []
    live: dict[str, bool] = {}  # each previous owner's liveness, looked up once per batch
    read = _prefetched(parts, roots)
    for root_id in roots:
        try:
            survey = _survey(parts, root_id, read)
            surveyed.append((survey, _claims(parts, root_id, survey.members, live)))
        except TreeHeld as error:
            held.append(error)
        except (NotARoot, UnknownInstance):
            continue
        except CorruptRecord as error:
            park_corrupt(parts, error, root_id)
            taken.append(TakeOver(root_id, (), True))
    try:
        _claim(parts, surveyed, reason)
    except IntegrityError:
        for survey, _ in surveyed:
            try:
                taken.append(take_over(parts, survey.root, reason=reason))
            except TreeHeld as error:
                held.append(error)
            except (NotARoot, UnknownInstance):
                continue
        return taken, held
    for survey, claims in surveyed:
        taken.append(_acquire_tree(parts, survey, claims, reason))
    return taken, held


Reader = Callable[[UUID], Stored]
"""Reads one instance for a take-over (``Engine.read``, or from what a batch prefetched)."""


def _prefetched(parts: Parts, roots: Sequence[UUID]) -> Reader:
    """A reader over the roots and their retained children, read in two queries where the store can."""
    records = parts.reads.prefetch(roots)
    known: dict[UUID, Stored] = {}
    children: list[UUID] = []
    for root_id in roots:
        found = records.pop(root_id, None)
        if found is None:
            continue
        try:
            known[root_id] = parts.reads.read(root_id, found)
        except (CorruptRecord, UnknownInstance):
            continue  # read again, and reported, when its tree is surveyed
        children.extend(a.child_id for a in known[root_id][0].record.activations if not a.embedded)
    records.update(parts.reads.prefetch(children))

    def read(instance_id: UUID) -> Stored:
        stored = known.pop(instance_id, None)
        if stored is not None:
            return stored
        return parts.reads.read(instance_id, records.pop(instance_id, None))

    return read


def _survey(parts: Parts, root_id: UUID, read: Reader | None = None) -> _Survey:
    """Read the tree of ``root_id`` (:class:`NotARoot` for an awaited child), each member once."""
    read = read or parts.reads.read
    loaded: dict[UUID, Stored] = {}
    loaded[root_id] = read(root_id)
    start = loaded[root_id][0]
    if start.record.parent is not None:
        _refuse_awaited_child(parts, start)
    members, cascade = _walk(start, loaded, read)
    return _Survey(root_id, start, members, cascade, loaded)


def _claim(parts: Parts, trees: Sequence[tuple[_Survey, list[Instance]]], reason: str) -> None:
    """Claim the given members of the trees in one atomic save (``IntegrityError`` on a conflict).

    Each claimed member's known history gains its ``Claimed`` event, so
    acquiring it needs no second read.
    """
    claimed: list[tuple[_Survey, Instance]] = []
    for survey, claims in trees:
        survey.previous = {member.record.owner for member in claims}
        for member in claims:
            # The compare-and-swap is the save's version check: a claim that lands at the version
            # surveyed replaced exactly the incarnation surveyed (a newer claim conflicts).
            member.claim(parts.engine_id, reason=reason)
            claimed.append((survey, member))
    if not claimed:
        return
    written = [(survey, member, list(member.pending_events)) for survey, member in claimed]
    try:
        parts.commits.save_instances(*(member for _, member in claimed))
    except IntegrityError:
        for survey, member in claimed:
            survey.loaded.pop(member.id, None)
        raise
    for survey, member, events in written:
        _, snapshot, history = survey.loaded[member.id]
        survey.loaded[member.id] = (member, snapshot, [*history, *events])
        parts.holdings.hold(member.id, member.record.incarnation)


def _acquire_tree(parts: Parts, survey: _Survey, claims: list[Instance], reason: str) -> TakeOver:
    """Acquire a claimed tree from what its survey read; log the take-over."""
    root_id = survey.root
    claimed = tuple(member.id for member in claims)
    if claimed:
        previous = survey.previous
        log.info(
            "engine %s took over the call tree of %s (%d claimed, from %s): %s",
            parts.engine_id,
            root_id,
            len(claimed),
            ", ".join(sorted(previous)) or "nobody",
            reason,
            extra={
                "engine_id": parts.engine_id,
                "owner": parts.engine_id,
                "instance_id": str(root_id),
                "root_id": str(root_id),
                "chart": survey.start.record.name,
                "claimed": len(claimed),
                "previous_owners": sorted(previous),
            },
        )
    parked = not acquire(parts, root_id, known=survey.loaded)
    if not parked:
        for child_id in survey.cascade:
            if parts.holdings.holds(child_id) and not parts.holdings.is_acquired(child_id):
                acquire(parts, child_id, known=survey.loaded)  # its caller ended: finish it (FR-6)
    return TakeOver(root_id, claimed, parked)


def _refuse_awaited_child(parts: Parts, child: Instance) -> None:
    """FR-1: a child whose caller still retains it is recovered only through its root."""
    if caller_ended(parts, child) is None:
        ref = child.record.parent
        assert ref is not None
        raise NotARoot(child.id, ref.parent, child.record.root)


def _walk(start: Instance, loaded: dict[UUID, Stored], read: Reader) -> tuple[list[Instance], list[UUID]]:
    """The tree's members, parents before children, each once; and the unfinished children of ended callers.

    The walk follows every retained activation, also through finished
    members: a child an ended caller still retains is an interrupted cancel
    cascade, taken over to be finished (FR-6).
    """
    members: list[Instance] = []
    cascade: list[UUID] = []
    seen = {start.id}
    pending = [start]
    while pending:
        instance = pending.pop(0)
        members.append(instance)
        for activation in instance.record.activations:
            if activation.embedded:
                continue  # an embedded task is its parent's: claimed, and recovered, with it
            child_id = activation.child_id
            if child_id in seen:
                continue  # FR-5: a repeat or a cycle is visited once
            seen.add(child_id)
            try:
                loaded[child_id] = read(child_id)
            except UnknownInstance:
                continue  # vanished: the parent's re-attach reports it
            child = loaded[child_id][0]
            if instance.record.status.finished and not child.record.status.finished:
                cascade.append(child_id)
            pending.append(child)
    return members, cascade


def _claims(
    parts: Parts, root_id: UUID, members: list[Instance], live: dict[str, bool] | None = None
) -> list[Instance]:
    """The members to claim; :class:`TreeHeld` when one is owned by another live engine (FR-3).

    ``live`` remembers the owners already looked up (a batch asks once per owner).
    """
    claims: list[Instance] = []
    live = {} if live is None else live
    for member in members:
        record = member.record
        if record.status.finished:
            continue
        if record.owner == parts.engine_id and parts.holdings.holds_at(member.id, record.incarnation):
            continue  # held already
        if record.owner not in live:
            live[record.owner] = is_live(parts, record.owner)
        if live[record.owner]:
            raise TreeHeld(root_id, member.id, record.name, record.owner)
        claims.append(member)
    return claims


# ----------------------------------------------------------------- what this engine holds


def owns(parts: Parts, instance_id: UUID) -> bool:
    """Whether this engine holds the instance's current incarnation (read from the store)."""
    held = parts.holdings.incarnation(instance_id)
    if held is None:
        return False
    try:
        record = parts.reads.instance(instance_id).record
    except UnknownInstance:
        return False
    return record.owner == parts.engine_id and record.incarnation == held


def drop(parts: Parts, instance_id: UUID, why: object) -> None:
    """Forget an instance another engine now owns: its cached copies, and its queued work and timers.

    Queued work and timers of a dropped instance become no-ops (the engine's
    ``process`` returns None) until this engine takes it over again.
    """
    log.warning("fenced: %s", why, extra={"engine_id": parts.engine_id, "instance_id": str(instance_id)})
    _forget(parts, instance_id)


def _forget(parts: Parts, instance_id: UUID) -> None:
    """Stop holding an instance: its incarnation, its acquisition and its cached copies."""
    parts.holdings.fence(instance_id)
    parts.copies.drop((instance_id,))


def forget_if_claimed(parts: Parts, instance: Instance) -> None:
    """Stop holding an instance the store shows claimed by another engine since (no work was lost).

    An engine that created an instance and never served it (a client's)
    learns here that a worker took it over; unlike :func:`drop`, this is
    the normal course of things, not a fenced write.
    """
    held = parts.holdings.incarnation(instance.id)
    record = instance.record
    if held is None or (record.owner == parts.engine_id and record.incarnation == held):
        return
    log.debug("%s is now held by %s", instance.id, record.owner, extra={"engine_id": parts.engine_id})
    _forget(parts, instance.id)


def acquire_or_adopt(parts: Parts, instance_id: UUID) -> bool:
    """Acquire an instance after a restart: validate its ResumePlan and re-enact its children.

    An instance this engine does not hold is taken over first, with its
    whole call tree (:func:`adopt`). Returns False when the instance may not
    run here: it, or its root, is parked, or another live engine holds its tree.
    """
    if parts.holdings.holds(instance_id):
        return acquire(parts, instance_id)
    return adopt(parts, instance_id, "acquired")


def adopt(parts: Parts, instance_id: UUID, reason: str) -> bool:
    """Take over the call tree of an instance this engine does not hold; False when it may not run here.

    An instance owned by another live engine is left alone; any other is
    taken over through its root (a child on its own only when its caller
    has ended, to finish it).
    """
    try:
        record = parts.reads.instance(instance_id).record
    except UnknownInstance:
        return False
    except CorruptRecord as error:
        park_corrupt(parts, error, instance_id)
        return False
    if record.status.finished or (record.owner != parts.engine_id and is_live(parts, record.owner)):
        return False
    try:
        result = take_over(parts, record.root, reason=reason)
        if not parts.holdings.holds(instance_id) and record.parent is not None:
            result = take_over(parts, instance_id, reason=reason)
    except (TreeHeld, NotARoot) as error:
        log.info("not taking over %s: %s", instance_id, error)
        return False
    return parts.holdings.holds(instance_id) and not result.parked


def orphan(parts: Parts, instance_id: UUID, reason: str) -> bool:
    """End an instance whose parent is gone with status ``orphan``; False when it had finished already."""
    for _ in range(RETRIES):
        instance = parts.reads.instance(instance_id)
        if instance.record.status.finished:
            return False
        instance.mark_orphan(reason)
        try:
            parts.commits.save_instances(instance)
        except IntegrityError:
            continue
        parts.holdings.finish(instance_id)
        return True
    raise StorageError(f"could not mark {instance_id} as an orphan: too many concurrent writers")
