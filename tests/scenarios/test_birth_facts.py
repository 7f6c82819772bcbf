"""Birth facts end to end: cross-checked on recovery, idempotent on a conflict, committed before enacted.

Every scenario runs on each store (POPO, a SQLite file, PostgreSQL). The
stored events are altered the way a faulty write or a hand edit would alter
them: the commit that records a parent's Birth and its child's first event
is rewritten just before it is saved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid4

import attrs
import pytest

from aggregates import (
    AncestryFrame,
    BirthFacts,
    InputMismatch,
    Instance,
    InstanceKind,
    InstanceStatus,
    Provenance,
    Ref,
)
from incarnate import DeterministicRunner, Engine
from incarnate._work import UnitOfWork
from tests.scenarios.conftest import EngineFactory
from tests.scenarios.test_recovery import build, cold

Alteration = Callable[[BirthFacts], BirthFacts]

ALTERATIONS: dict[str, Alteration] = {
    "name": lambda facts: attrs.evolve(facts, name="parent"),
    "kind": lambda facts: attrs.evolve(facts, kind=InstanceKind.TASK),
    "root": lambda facts: attrs.evolve(facts, root=uuid4()),
    "state": lambda facts: attrs.evolve(facts, state="reviewing"),
    "parent_type": lambda facts: attrs.evolve(facts, parent_type="Aggregate"),
    "ancestry": lambda facts: attrs.evolve(facts, ancestry=(AncestryFrame("tree", facts.ref),)),
}
"""One wrong value for each birth fact that says what a child runs and where it sits."""


def rewrite_next_commit(engine: Engine, rewrite: Callable[[UnitOfWork], None]) -> None:
    """Let ``rewrite`` change the pending events of the next commit, just before they are saved."""

    def hook(point: str, uow: UnitOfWork) -> None:
        if point == "before-commit":
            engine.parts.commits.hooks.remove(hook)
            rewrite(uow)

    engine.parts.commits.hooks.append(hook)


def replace_pending(instance: Instance, kind: type, change: Callable[[Any], Any]) -> None:
    """Replace the instance's pending event of ``kind`` by ``change(event)``."""
    pending = instance.pending_events
    index = next(n for n, e in enumerate(pending) if isinstance(e, kind))
    pending[index] = change(pending[index])


def start_parent(engine: Engine, rewrite: Callable[[UnitOfWork], None] | None = None) -> tuple[UUID, UUID]:
    """A ``parent`` with one kid, ``team[a]``, its first commit rewritten by ``rewrite``; both ids."""
    if rewrite is not None:
        rewrite_next_commit(engine, rewrite)
    parent = engine.start("parent", {"members": ["a"]})
    [activation] = engine.instance(parent).record.activations
    return parent, activation.child_id


def the_child(uow: UnitOfWork) -> Instance:
    """The one child a commit creates."""
    [child] = [i for i in uow.created.values() if i.record.parent is not None]
    return child


def the_parent(uow: UnitOfWork) -> Instance:
    """The parent whose macrostep a commit records."""
    [parent] = [i for i in uow.created.values() if i.record.parent is None]
    return parent


def assert_parked_for_checkpoint(fresh: Engine, parent: UUID, child: UUID, *words: str) -> None:
    """The root is parked by a checkpoint incident naming the slot and ``words``; the child never ran."""
    fresh.run_until_idle()
    record = fresh.instance(parent).record
    assert record.status is InstanceStatus.PARKED
    incident = record.incidents[-1]
    assert incident.kind == "checkpoint" and incident.parked
    assert "team[a]" in incident.detail
    for word in words:
        assert word in incident.detail, incident.detail
    assert [held.root for held in fresh.parked()] == [parent]
    assert parent not in fresh.parts.holdings.acquired()  # a parked tree is not held as runnable
    kid = fresh.instance(child)
    assert kid.record.status is InstanceStatus.BORN  # never ran: only its ownership moved
    assert [type(e).__name__ for e in fresh.events_of(child)][1:] in ([], ["Claimed"])


# ------------------------------------------------------- recovery cross-checks birth facts


@pytest.mark.parametrize("field", sorted(ALTERATIONS))
def test_a_child_whose_first_event_names_other_birth_facts_parks_the_root(
    make_engine: EngineFactory, field: str
) -> None:
    """A child whose stored birth facts differ from its parent's is never run: the root parks, naming both."""

    def rewrite(uow: UnitOfWork) -> None:
        replace_pending(
            the_child(uow),
            Instance.Started,
            lambda started: dataclasses.replace(started, birth=ALTERATIONS[field](started.birth)),
        )

    engine = build(make_engine)
    parent, child = start_parent(engine, rewrite)
    fresh = cold(engine)
    fresh.resume_all()
    assert_parked_for_checkpoint(fresh, parent, child, str(child), f"{field}:")
    fresh.close()


def test_a_child_whose_first_event_names_another_chart_parks_the_root(make_engine: EngineFactory) -> None:
    """A child's first event naming another chart than its own birth facts is never run as that chart."""

    def rewrite(uow: UnitOfWork) -> None:
        replace_pending(
            the_child(uow), Instance.Started, lambda started: dataclasses.replace(started, name="tree")
        )

    engine = build(make_engine)
    parent, child = start_parent(engine, rewrite)
    fresh = cold(engine)
    fresh.resume_all()
    assert_parked_for_checkpoint(fresh, parent, child, str(child), "name 'tree'")
    fresh.close()


@pytest.mark.parametrize("field", sorted(ALTERATIONS))
def test_a_parent_birth_naming_other_facts_parks_the_root(make_engine: EngineFactory, field: str) -> None:
    """A parent's stored Birth whose facts differ from its own macrostep's is a checkpoint incident."""

    def rewrite(uow: UnitOfWork) -> None:
        replace_pending(
            the_parent(uow),
            Instance.Birth,
            lambda birth: dataclasses.replace(birth, facts=ALTERATIONS[field](birth.facts)),
        )

    engine = build(make_engine)
    parent, child = start_parent(engine, rewrite)
    fresh = cold(engine)
    fresh.resume_all()
    assert_parked_for_checkpoint(fresh, parent, child, "mismatched activation", field)
    fresh.close()


def test_matching_birth_facts_recover_without_an_incident(make_engine: EngineFactory) -> None:
    """When the parent's Birth and the child's first event agree, recovery runs the child on."""
    engine = build(make_engine)
    parent, child = start_parent(engine, lambda uow: None)
    fresh = cold(engine)
    fresh.resume_all()
    fresh.send(child, "finish")
    fresh.run_until_idle()
    assert fresh.instance(parent).record.incidents == ()
    assert fresh.instance(child).record.status is InstanceStatus.DONE
    fresh.close()


# ----------------------------------------------- a conflicting birth after a commit conflict


def existing_member(engine: Engine, parent: UUID, key: str, input: Any) -> BirthFacts:
    """The birth facts of the kid ``key`` that the parent's next macrostep will decide, with ``input``."""
    snapshot = engine.snapshot(parent)
    ref = Ref(parent, "team", key, snapshot.next_generation)
    return BirthFacts(
        "Instance",
        ref,
        parent,
        InstanceKind.CHART,
        "kid",
        "gathering",
        1,
        input,
        (),
        snapshot.steps,
        Provenance.BIRTH,
    )


def precreate(engine: Engine, facts: BirthFacts) -> None:
    """Store the child of ``facts`` as another engine would have, behind this engine's back."""
    other = Instance.born(facts, fingerprint=engine.charts["kid"].fingerprint, owner="another engine")
    engine.parts.commits.save_instances(other)


def test_an_existing_child_with_other_facts_raises_input_mismatch_after_the_conflict(
    make_engine: EngineFactory,
) -> None:
    """A commit meeting an existing child with another input raises InputMismatch and saves nothing."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["b"]})
    engine.run_until_idle()
    theirs = existing_member(engine, parent, "a", {"name": "someone else"})
    precreate(engine, theirs)
    engine.send(parent, "regroup", ["b", "a"])
    version = engine.instance(parent).version
    with pytest.raises(
        InputMismatch, match=r"input: \{'name': 'a'\} != \{'name': 'someone else'\}"
    ) as caught:
        engine.run_until_idle()
    assert caught.value.child_id == theirs.child_id
    assert engine.instance(parent).version == version  # the macrostep was not committed
    assert engine.instance(parent).record.activation("team", "a") is None
    [stored] = engine.events_of(theirs.child_id)
    assert stored.birth == theirs


def test_an_existing_child_with_the_same_facts_is_adopted_after_the_conflict(
    make_engine: EngineFactory,
) -> None:
    """A macrostep whose commit meets an existing child with identical facts retains it (idempotent birth)."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["b"]})
    engine.run_until_idle()
    same = existing_member(engine, parent, "a", {"name": "a"})
    precreate(engine, same)
    engine.send(parent, "regroup", ["b", "a"])
    engine.run_until_idle()
    activation = engine.instance(parent).record.activation("team", "a")
    assert activation is not None and activation.ref == same.ref
    assert engine.events_of(same.child_id)[0].birth == same


# ------------------------------------------------------------- commit before enact


class StoreCheckingRunner(DeterministicRunner):
    """A deterministic runner that notes, at each notification, the version the store holds."""

    def __init__(self) -> None:
        super().__init__()
        self.notified: list[tuple[UUID, int | None]] = []

    def notify(self, instance_id: UUID) -> None:
        assert isinstance(self.engine, Engine)
        stored = self.engine.parts.journal.recorder.select_events(instance_id, desc=True, limit=1)
        self.notified.append((instance_id, stored[0].originator_version if stored else None))
        super().notify(instance_id)


def test_the_runner_is_notified_only_after_the_commit(make_engine: EngineFactory) -> None:
    """Every instance handed to the runner, roots and newly born children alike, is already in the store."""
    runner = StoreCheckingRunner()
    engine = build(make_engine, runner=runner)
    parent = engine.start("parent", {"members": ["a", "b"]})  # children born as the root starts
    engine.run_until_idle()
    engine.send(parent, "regroup", ["a", "b", "c"])  # a child born by a later macrostep
    engine.run_until_idle()
    kids = [a.child_id for a in engine.instance(parent).record.activations]
    assert len(kids) == 3
    engine.send(kids[0], "finish")
    engine.run_until_idle()
    notified = {instance_id for instance_id, _ in runner.notified}
    assert {parent, *kids} <= notified
    unstored = [instance_id for instance_id, version in runner.notified if version is None]
    assert unstored == [], f"notified before their commit: {unstored}"
