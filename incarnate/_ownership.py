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
from typing import TYPE_CHECKING
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError

from aggregates import Instance
from aggregates.errors import CorruptRecord
from incarnate._recovery import Stored, acquire, caller_ended, park_corrupt
from incarnate.errors import NotARoot, StorageError, TreeHeld, UnknownInstance

if TYPE_CHECKING:
    from incarnate._engine import Engine

log = logging.getLogger("incarnate.ownership")

RETRIES = 20
DEFAULT_REASON = "taken over"


@attrs.frozen
class TakeOver:
    """What :func:`take_over` did: the root, the instances it claimed, and whether the tree is parked."""

    root: UUID
    claimed: tuple[UUID, ...]
    parked: bool


def is_live(engine: Engine, owner: str) -> bool:
    """Whether ``owner`` is an engine with an unexpired heartbeat (this engine counts as not live here)."""
    if not owner or owner == engine.engine_id:
        return False
    return engine.coordination.is_live(owner)


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


def take_over(engine: Engine, root_id: UUID, *, reason: str = DEFAULT_REASON) -> TakeOver:
    """Claim the call tree of ``root_id`` for ``engine`` in one atomic save, then acquire it.

    Raises :class:`TreeHeld` (writing nothing) when a member is owned by
    another live engine, :class:`NotARoot` for a child whose caller still
    awaits it, and :class:`UnknownInstance` for an id the store does not
    know. A child whose caller has ended (or gone, or moved on) is taken
    over on its own only to finish it: its cancel cascade completes.
    """
    for _ in range(RETRIES):
        try:
            survey = _survey(engine, root_id)
        except CorruptRecord as error:
            park_corrupt(engine, error, root_id)
            return TakeOver(root_id, (), True)
        claims = _claims(engine, root_id, survey.members)
        try:
            _claim(engine, [(survey, claims)], reason)
        except IntegrityError:
            continue  # someone wrote meanwhile: walk the tree again
        return _acquire_tree(engine, survey, claims, reason)
    raise StorageError(f"could not take over the call tree of {root_id}: too many concurrent writers")


def take_over_batch(
    engine: Engine, roots: Sequence[UUID], *, reason: str = DEFAULT_REASON
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
    read = _prefetched(engine, roots)
    for root_id in roots:
        try:
            survey = _survey(engine, root_id, read)
            surveyed.append((survey, _claims(engine, root_id, survey.members, live)))
        except TreeHeld as error:
            held.append(error)
        except (NotARoot, UnknownInstance):
            continue
        except CorruptRecord as error:
            park_corrupt(engine, error, root_id)
            taken.append(TakeOver(root_id, (), True))
    try:
        _claim(engine, surveyed, reason)
    except IntegrityError:
        for survey, _ in surveyed:
            try:
                taken.append(take_over(engine, survey.root, reason=reason))
            except TreeHeld as error:
                held.append(error)
            except (NotARoot, UnknownInstance):
                continue
        return taken, held
    for survey, claims in surveyed:
        taken.append(_acquire_tree(engine, survey, claims, reason))
    return taken, held


Reader = Callable[[UUID], Stored]
"""Reads one instance for a take-over (``Engine.read``, or from what a batch prefetched)."""


def _prefetched(engine: Engine, roots: Sequence[UUID]) -> Reader:
    """A reader over the roots and their retained children, read in two queries where the store can."""
    records = engine.prefetch(roots)
    known: dict[UUID, Stored] = {}
    children: list[UUID] = []
    for root_id in roots:
        found = records.pop(root_id, None)
        if found is None:
            continue
        try:
            known[root_id] = engine.read(root_id, found)
        except (CorruptRecord, UnknownInstance):
            continue  # read again, and reported, when its tree is surveyed
        children.extend(a.child_id for a in known[root_id][0].record.activations)
    records.update(engine.prefetch(children))

    def read(instance_id: UUID) -> Stored:
        stored = known.pop(instance_id, None)
        if stored is not None:
            return stored
        return engine.read(instance_id, records.pop(instance_id, None))

    return read


def _survey(engine: Engine, root_id: UUID, read: Reader | None = None) -> _Survey:
    """Read the tree of ``root_id`` (:class:`NotARoot` for an awaited child), each member once."""
    read = read or engine.read
    loaded: dict[UUID, Stored] = {}
    loaded[root_id] = read(root_id)
    start = loaded[root_id][0]
    if start.record.parent is not None:
        _refuse_awaited_child(engine, start)
    members, cascade = _walk(start, loaded, read)
    return _Survey(root_id, start, members, cascade, loaded)


def _claim(engine: Engine, trees: Sequence[tuple[_Survey, list[Instance]]], reason: str) -> None:
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
            member.claim(engine.engine_id, reason=reason)
            claimed.append((survey, member))
    if not claimed:
        return
    written = [(survey, member, list(member.pending_events)) for survey, member in claimed]
    try:
        engine.save_instances(*(member for _, member in claimed))
    except IntegrityError:
        for survey, member in claimed:
            survey.loaded.pop(member.id, None)
        raise
    for survey, member, events in written:
        _, snapshot, history = survey.loaded[member.id]
        survey.loaded[member.id] = (member, snapshot, [*history, *events])
        engine.hold(member.id, member.record.incarnation)


def _acquire_tree(engine: Engine, survey: _Survey, claims: list[Instance], reason: str) -> TakeOver:
    """Acquire a claimed tree from what its survey read; log the take-over."""
    root_id = survey.root
    claimed = tuple(member.id for member in claims)
    if claimed:
        previous = survey.previous
        log.info(
            "engine %s took over the call tree of %s (%d claimed, from %s): %s",
            engine.engine_id,
            root_id,
            len(claimed),
            ", ".join(sorted(previous)) or "nobody",
            reason,
            extra={
                "engine_id": engine.engine_id,
                "owner": engine.engine_id,
                "instance_id": str(root_id),
                "root_id": str(root_id),
                "chart": survey.start.record.name,
                "claimed": len(claimed),
                "previous_owners": sorted(previous),
            },
        )
    parked = not acquire(engine, root_id, known=survey.loaded)
    if not parked:
        for child_id in survey.cascade:
            if engine.holdings.holds(child_id) and not engine.holdings.is_acquired(child_id):
                acquire(engine, child_id, known=survey.loaded)  # its caller ended: finish it (FR-6)
    return TakeOver(root_id, claimed, parked)


def _refuse_awaited_child(engine: Engine, child: Instance) -> None:
    """FR-1: a child whose caller still retains it is recovered only through its root."""
    if caller_ended(engine, child) is None:
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
    engine: Engine, root_id: UUID, members: list[Instance], live: dict[str, bool] | None = None
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
        if record.owner == engine.engine_id and engine.holdings.holds_at(member.id, record.incarnation):
            continue  # held already
        if record.owner not in live:
            live[record.owner] = is_live(engine, record.owner)
        if live[record.owner]:
            raise TreeHeld(root_id, member.id, record.name, record.owner)
        claims.append(member)
    return claims
