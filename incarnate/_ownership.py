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
from typing import TYPE_CHECKING
from uuid import UUID

import attrs
from eventsourcing.persistence import IntegrityError

from aggregates import Instance
from aggregates.errors import CorruptRecord
from incarnate._recovery import acquire, caller_ended, park_corrupt
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
            start = engine.instance(root_id)
            if start.record.parent is not None:
                _refuse_awaited_child(engine, start)
            members, cascade = _walk(engine, start)
        except CorruptRecord as error:
            park_corrupt(engine, error, root_id)
            return TakeOver(root_id, (), True)
        claims = _claims(engine, root_id, members)
        previous = {member.record.owner for member in claims}
        for member in claims:
            member.claim(engine.engine_id, previous_incarnation=member.record.incarnation, reason=reason)
        if claims:
            try:
                engine.save_instances(*claims)
            except IntegrityError:
                continue  # someone wrote meanwhile: walk the tree again
        for member in claims:
            engine.hold(member.id, member.record.incarnation)
        claimed = tuple(member.id for member in claims)
        if claimed:
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
                    "chart": start.record.name,
                    "claimed": len(claimed),
                    "previous_owners": sorted(previous),
                },
            )
        parked = not acquire(engine, root_id)
        if not parked:
            for child_id in cascade:
                if child_id in engine.held and child_id not in engine.acquired:
                    acquire(engine, child_id)  # its caller ended: finish it (FR-6)
        return TakeOver(root_id, claimed, parked)
    raise StorageError(f"could not take over the call tree of {root_id}: too many concurrent writers")


def _refuse_awaited_child(engine: Engine, child: Instance) -> None:
    """FR-1: a child whose caller still retains it is recovered only through its root."""
    if caller_ended(engine, child) is None:
        ref = child.record.parent
        assert ref is not None
        raise NotARoot(child.id, ref.parent, child.record.root)


def _walk(engine: Engine, start: Instance) -> tuple[list[Instance], list[UUID]]:
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
                child = engine.instance(child_id)
            except UnknownInstance:
                continue  # vanished: the parent's re-attach reports it
            if instance.record.status.finished and not child.record.status.finished:
                cascade.append(child_id)
            pending.append(child)
    return members, cascade


def _claims(engine: Engine, root_id: UUID, members: list[Instance]) -> list[Instance]:
    """The members to claim; :class:`TreeHeld` when one is owned by another live engine (FR-3)."""
    claims: list[Instance] = []
    live: dict[str, bool] = {}
    for member in members:
        record = member.record
        if record.status.finished:
            continue
        if record.owner == engine.engine_id and engine.held.get(member.id) == record.incarnation:
            continue  # held already
        if record.owner not in live:
            live[record.owner] = is_live(engine, record.owner)
        if live[record.owner]:
            raise TreeHeld(root_id, member.id, record.name, record.owner)
        claims.append(member)
    return claims
