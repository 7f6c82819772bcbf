"""Properties of time travel: an instance at version k is exactly what it was live at version k."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from aggregates import Instance, InstanceRecord
from incarnate._copies import clone
from incarnate._travel import History
from projections import instance_at
from tests.properties.test_resume_plan import HISTORIES, PROPERTY, Operation, World


def _live_states(world: World) -> dict[tuple[UUID, int], InstanceRecord]:
    """Record every instance's record as it was committed, at each committed version."""
    seen: dict[tuple[UUID, int], InstanceRecord] = {}
    journal = world.engine.parts.journal
    write = journal.write

    def spying(instances: Sequence[Instance]) -> None:
        write(instances)
        for instance in instances:
            seen[(instance.id, instance.version)] = instance.record

    journal.write = spying  # type: ignore[method-assign]
    return seen


@PROPERTY
@given(
    history=HISTORIES,
    interval=st.one_of(st.none(), st.integers(min_value=1, max_value=5)),
    every=st.integers(min_value=1, max_value=4),
    embed=st.booleans(),
)
def test_every_version_equals_the_live_instance_then(
    history: list[Operation], interval: int | None, every: int, embed: bool
) -> None:
    """With or without stored snapshots and in-memory checkpoints, the instance at version k equals the
    live aggregate as it was committed at k, and a plain fold of its first k events, for every k.

    Drawn: task children embedded in their parents (each read rebuilt from its parent's events), or
    with streams of their own.
    """
    world = World(interval, embed_tasks=embed)
    try:
        live = _live_states(world)
        for operation in history:
            operation.apply(world)
            world.engine.run_until_idle(max_units=5_000)
        parts = world.engine.parts
        history_ = History(parts.journal, every=every, embedded=parts.reads.embedded_events)
        for instance in world.engine.instances():
            events: list[Any] = world.engine.events_of(instance.id)
            for k in range(1, instance.version + 1):
                # Stepping back and forth: checkpoints kept by later positions serve earlier ones.
                for version in (k, instance.version - k + 1):
                    at = history_.at(instance.id, version)
                    assert at.version == version
                    assert at.record == instance_at(events, version).record, (instance, version)
                    if (instance.id, version) in live:
                        assert at.record == live[(instance.id, version)], (instance, version)
            assert history_.at(instance.id, instance.version).record == instance.record
            assert world.engine.at(instance.id, instance.version).instance.record == instance.record
    finally:
        world.close()


@PROPERTY
@given(history=HISTORIES)
def test_a_tree_position_holds_each_instance_at_its_last_event_then(history: list[Operation]) -> None:
    """At every position of a call tree's history, each instance is at the version of its last event so
    far, and the last position is the tree as stored now."""
    world = World()
    try:
        for operation in history:
            operation.apply(world)
            world.engine.run_until_idle(max_units=5_000)
        engine = world.engine
        roots = [i for i in engine.instances() if i.record.parent is None]
        for root in roots[:2]:
            last = engine.at(root.id, 1, tree=True).positions
            for position in range(1, last + 1):
                moment = engine.at(root.id, position, tree=True)
                for instance_id, instance in moment.instances.items():
                    mine = [e for e in moment.events[:position] if e.originator_id == instance_id]
                    assert instance.version == mine[-1].originator_version
            final = engine.at(root.id, last, tree=True)
            for instance_id, instance in final.instances.items():
                assert instance.record == engine.instance(instance_id).record
    finally:
        world.close()


def test_a_clone_of_a_kept_checkpoint_is_not_changed_by_folding_on() -> None:
    """Folding on from a copy leaves the copy it was made of as it was."""
    world = World()
    try:
        world.engine.start("timed", {})
        world.engine.run_until_idle()
        world.clock.advance(11)
        world.engine.run_until_idle()
        instance = next(iter(world.engine.instances()))
        events = world.engine.events_of(instance.id)
        early = instance_at(events, 2)
        kept = clone(early)
        later = instance_at(events, instance.version, start=clone(kept))
        assert kept.version == 2 and kept.record == early.record
        assert later.record == instance.record
    finally:
        world.close()
