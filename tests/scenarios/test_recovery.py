"""Cold recovery: exact incarnations, re-attach (ADR-084), decode-or-park, migration (every store)."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

import pytest

from aggregates import BirthFacts, Instance, InstanceKind, InstanceStatus, Provenance, Ref, Settlement
from incarnate import DeterministicRunner, Engine, MigrationRejected, VirtualClock
from incarnate._ownership import acquire_or_adopt
from incarnate.testing import restart
from projections import Checkpoint
from statechart import Chart, RetryPolicy, final, invoke, start, state, transition
from statechart.event import done_invoke_event
from tests.scenarios import charts
from tests.scenarios.conftest import EngineFactory
from tests.scenarios.test_durable_instances import count, stored


def build(make_engine: EngineFactory, *extra: Chart[Any], **kwargs: Any) -> Engine:
    return make_engine([*charts.ALL, *extra], {"charge": lambda call: "ok"}, **kwargs)


def cold(engine: Engine, *extra: Chart[Any]) -> Engine:
    """A fresh engine over the same store that has acquired nothing yet."""
    charts_ = list(engine.charts.values())
    for chart in extra:
        charts_ = [c for c in charts_ if c.name != chart.name] + [chart]
    storage, clock = engine.storage, engine.clock
    engine.close()
    return Engine(charts_, dict(engine.parts.catalog.tasks), storage=storage, clock=clock)


def chain(engine: Engine, root: UUID) -> list[Instance]:
    """The root and its line of single retained children."""
    out = [engine.instance(root)]
    while out[-1].record.activations:
        out.append(engine.instance(out[-1].record.activations[0].child_id))
    return out


# ------------------------------------------------------- the cold recovery recipe


def test_cold_recovery_reenacts_the_same_incarnation(make_engine: EngineFactory) -> None:
    """A fresh engine re-arms the committed child: same generation, Ref, attempt, ancestry; no new commits."""
    engine = build(make_engine)
    root = engine.start("tree")
    engine.run_until_idle()
    before = chain(engine, root)
    committed = [(i.record.parent, i.record.birth, i.record.ancestry, i.record.snapshot) for i in before]
    births, total = count(engine, "Birth"), len(stored(engine))
    fresh = cold(engine)
    assert acquire_or_adopt(fresh.parts, root) is True  # an ordinary acquisition, as any command would do
    after = chain(fresh, root)
    assert [
        (i.record.parent, i.record.birth, i.record.ancestry, i.record.snapshot) for i in after
    ] == committed
    # Only ownership moved (one Claimed per instance): no statechart step, parent commit or Birth.
    unclaimed = [e for e in stored(fresh) if e[1] != "Claimed"]
    assert count(fresh, "Birth") == births and len(unclaimed) == total
    assert count(fresh, "Claimed") == len(after)
    assert {
        i.id for i in after
    } <= fresh.parts.holdings.acquired()  # arm admission again: every incarnation is live here
    assert isinstance(fresh.runner, DeterministicRunner)
    assert list(fresh.runner.queue) == []  # waiting at a gate, none of them has work to do now
    fresh.run_until_idle()
    assert len(stored(fresh)) == total + len(after)  # re-arming a waiting child commits nothing
    fresh.send(after[-1].id, "wither")
    fresh.run_until_idle()
    assert fresh.instance(root).record.status is InstanceStatus.DONE
    fresh.close()


def test_resume_all_takes_over_the_trees_of_a_long_log_in_two_parts_each_once(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trees found in the first part of the log run before the rest is folded; every tree is taken once."""
    engine = build(make_engine)
    roots = [engine.start("tree") for _ in range(6)]
    finished = engine.start("gate")
    engine.run_until_idle()
    engine.send(finished, "answer", "early")  # in the first part in flight, finished by the end
    engine.run_until_idle()
    members = {root: chain(engine, root) for root in roots}
    fresh = cold(engine)
    monkeypatch.setattr("incarnate._engine.RESUME_FIRST_CATCH_UP", 5)
    folded: list[int | None] = []
    catch_up = fresh.parts.listing.catch_up

    def recorded(limit: int | None = None) -> int:
        folded.append(limit)
        return catch_up(limit)

    monkeypatch.setattr(fresh.parts.listing, "catch_up", recorded)
    assert fresh.resume_all() == sum(len(m) for m in members.values())
    assert folded == [5, None]  # the first part, then the rest
    for chained in members.values():
        assert {i.id for i in chained} <= fresh.parts.holdings.acquired()
        for member in chained:
            assert sum(1 for i, t in stored(fresh) if i == member.id and t == "Claimed") == 1
    assert fresh.instance(finished).record.status is InstanceStatus.DONE
    assert not any(i == finished and t == "Claimed" for i, t in stored(fresh))
    fresh.close()


def test_plan_of_every_instance_equals_its_live_checkpoint(make_engine: EngineFactory) -> None:
    """The ResumePlan rebuilt from the store equals each instance's live checkpoint."""
    engine = build(make_engine)
    engine.start("parent", {"members": ["a", "b"]})
    engine.start("tree")
    engine.run_until_idle()
    for instance in engine.instances():
        assert engine.plan(instance.id) == Checkpoint.of(instance, engine.charts.get(instance.record.name))


def test_plan_from_snapshots_equals_plan_from_events(make_engine: EngineFactory, clock: VirtualClock) -> None:
    """With eventsourcing snapshots every 3 versions, the plan equals the one rebuilt from all events."""
    engine = build(make_engine, snapshot_interval=3)
    parent = engine.start("parent", {"members": ["a", "b", "c"]})
    engine.run_until_idle()
    for kid in engine.children(parent)[:2]:
        engine.send(kid.id, "finish")
    engine.run_until_idle()
    start_, events = engine.parts.journal.stored(parent)
    assert start_ is not None
    full = list(engine.parts.journal.events.get(parent))
    chart = engine.charts["parent"]
    from projections import resume_plan

    assert resume_plan(events, chart, start=start_) == resume_plan(full, chart)
    assert engine.plan(parent) == Checkpoint.of(engine.instance(parent), chart)


def test_retry_after_recovery_is_a_fresh_incarnation(make_engine: EngineFactory, clock: VirtualClock) -> None:
    """After a restart, a failed child is retried with a fresh generation, Ref and attempt."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    first = engine.instance(parent).record.activations[0]
    fresh = cold(engine)
    acquire_or_adopt(fresh.parts, parent)
    fresh.cancel(first.child_id, "the worker died")
    fresh.run_until_idle()
    clock.advance(5.0)
    fresh.run_until_idle()
    second = fresh.instance(parent).record.activations[0]
    assert (second.generation, second.attempt) == (first.generation + 1, 2)
    assert second.ref != first.ref and second.provenance is Provenance.RETRY
    fresh.close()


# ------------------------------------------------------------------- ADR-084


def test_child_paused_on_a_human_gate_reparks_across_a_restart(make_engine: EngineFactory) -> None:
    """A child waiting for an answer is re-parked, not replaced, and the parent keeps waiting."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    fresh = cold(engine)
    fresh.resume_all()
    fresh.run_until_idle()
    assert [k.id for k in fresh.children(parent)] == [kid.id]
    assert fresh.snapshot(kid.id).configuration == ("working",)
    assert fresh.snapshot(parent).configuration == ("gathering",)
    assert count(fresh, "Birth") == 1
    fresh.close()


def test_answer_after_the_restart_reaches_the_parent(make_engine: EngineFactory) -> None:
    """A child answered after the restart delivers its output to its parent."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    fresh = cold(engine)
    fresh.send(kid.id, "finish")  # an ordinary command acquires the child's tree as needed
    fresh.resume_all()
    fresh.run_until_idle()
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    assert fresh.snapshot(parent).context.results == ("done:a",)
    fresh.close()


def test_finished_child_whose_outcome_never_arrived_is_consumed(make_engine: EngineFactory) -> None:
    """A finished child whose output is missing from the parent's inbox is consumed on recovery."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    engine.send(kid.id, "finish")
    engine.process(kid.id)  # accept
    engine.process(kid.id)  # step to the final state: the parent's inbox gets the outcome
    # Simulate a store that lost the parent's side: drop the outcome without applying it.
    inbox_parent = engine.instance(parent)
    inbox_parent.reject(inbox_parent.record.inbox[0], "lost in a test")
    engine.parts.commits.save_instances(inbox_parent)
    fresh = cold(engine)
    fresh.resume_all()
    fresh.run_until_idle()
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    fresh.close()


def test_looped_site_never_reconsumes_an_earlier_round(make_engine: EngineFactory) -> None:
    """Each round of a loop is a fresh child; an earlier round's outcome, delivered again, is rejected."""
    engine = build(make_engine)
    loop = engine.start("loop")
    engine.run_until_idle()
    first = engine.instance(loop).record.activations[0]
    engine.send(first.child_id, "finish")
    engine.run_until_idle()
    engine = cold(engine)
    engine.resume_all()
    engine.run_until_idle()
    engine.send(loop, done_invoke_event(first.ref.invoke_id, "done:round-1"))  # a duplicate of round 1
    engine.run_until_idle()
    assert engine.snapshot(loop).context.rounds == 1
    for _ in range(2):
        current = engine.instance(loop).record.activations[0]
        assert current.generation > first.generation
        engine.send(current.child_id, "finish")
        engine.run_until_idle()
        engine = cold(engine)
        engine.resume_all()
        engine.run_until_idle()
    assert engine.instance(loop).record.output == ["done:round-1", "done:round-2", "done:round-3"]
    assert count(engine, "Birth", loop) == 3
    assert count(engine, "EvidenceRejected", loop) == 1
    engine.close()


def test_parallel_fanout_branches_stay_distinct(make_engine: EngineFactory) -> None:
    """Two branches fanning out over the same keys have distinct incarnations that never collide."""
    engine = build(make_engine)
    root = engine.start("branches", {"members": ["x", "y"]})
    engine.run_until_idle()
    activations = engine.instance(root).record.activations
    assert len(activations) == 4 and len({a.child_id for a in activations}) == 4
    left_x = engine.instance(root).record.activation("left_team", "x")
    right_x = engine.instance(root).record.activation("right_team", "x")
    assert left_x is not None and right_x is not None
    engine = cold(engine)
    engine.resume_all()
    engine.send(left_x.child_id, "finish")
    engine.run_until_idle()
    assert engine.instance(left_x.child_id).record.status is InstanceStatus.DONE
    assert engine.instance(right_x.child_id).record.status is InstanceStatus.RUNNING
    assert engine.instance(root).record.activation("right_team", "x") == right_x
    engine.close()


def test_vanished_child_is_retried_per_the_site_policy(
    make_engine: EngineFactory, clock: VirtualClock
) -> None:
    """A retained child that does not exist in the store is treated as failed and retried fresh."""
    engine = build(make_engine)
    parent_id = uuid4()
    chart = engine.charts["parent"]
    snapshot, effects = start(chart, input={"members": ["a"]}, now=clock.now())
    parent = Instance.start_root(
        id=parent_id,
        kind=InstanceKind.CHART,
        name="parent",
        fingerprint=chart.fingerprint,
        input=None,
        owner="x",
    )
    parent.record_step(
        trigger=None,
        consumed=None,
        timer=None,
        snapshot=engine.parts.copies.encode(chart, snapshot),
        effects=effects,
        now=0.0,
    )
    slot = snapshot.children[0]
    ref = Ref(parent_id, slot.site, slot.key, slot.generation)
    facts = BirthFacts(
        "Instance",
        ref,
        parent_id,
        InstanceKind.CHART,
        "kid",
        slot.state,
        1,
        slot.input,
        (),
        0,
        Provenance.BIRTH,
    )
    parent.record_birth(facts)
    engine.parts.commits.save_instances(parent)  # the child's Started never reached the store
    fresh = cold(engine)
    fresh.resume_all()
    fresh.run_until_idle()
    clock.advance(5.0)
    fresh.run_until_idle()
    activation = fresh.instance(parent_id).record.activations[0]
    assert activation.attempt == 2 and activation.generation > ref.generation
    assert fresh.instance(activation.child_id).record.status is InstanceStatus.RUNNING
    fresh.close()


def test_child_of_a_terminal_caller_is_cancelled_with_a_fact(make_engine: EngineFactory) -> None:
    """A live child whose caller already finished is written cancelled, naming the caller."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    ended = engine.instance(parent)
    ended.complete({"forced": True})  # a caller that finished without its cascade
    engine.parts.commits.save_instances(ended)
    fresh = cold(engine)
    fresh.resume_all()
    fresh.run_until_idle()
    record = fresh.instance(kid.id).record
    assert record.status is InstanceStatus.CANCELLED
    assert str(parent) in str(record.error)
    fresh.close()


# ---------------------------------------------------------- decode or park

PARENT_V2_BREAKING = Chart(
    "parent",
    state(
        "collecting",
        invoke=[invoke("team", chart="kid", map=charts.team)],
        on=[transition("done.invoke.team", "reviewing")],
    ),
    state("reviewing", on=[transition("approve", "approved")]),
    final("approved"),
    context=charts.Family,
)
"""Version 2 of ``parent``: the state ``gathering`` was renamed ``collecting``."""

PARENT_V2_COMPATIBLE = Chart(
    "parent",
    state(
        "gathering",
        invoke=[
            invoke(
                "team",
                chart="kid",
                map=charts.team,
                output=charts.keep_output,
                retry=RetryPolicy(max_attempts=3, backoff=5.0),
            )
        ],
        on=[
            transition("done.invoke.team", "reviewing"),
            transition("error.invoke.team", "failed"),
            transition("regroup", actions=[charts.set_members]),
            transition("leave", "idle"),
            transition("hurry", "reviewing"),
        ],
    ),
    state("idle", on=[transition("back", "gathering")]),
    state("reviewing", on=[transition("approve", "approved"), transition("escalate", "escalated")]),
    state("escalated"),
    final("approved", done_data=lambda f, e: {"results": list(f.results)}),
    final("failed"),
    context=charts.Family,
)
"""Version 2 of ``parent`` with only additions: a state and two transitions."""


def test_incompatible_chart_change_parks_the_root(make_engine: EngineFactory) -> None:
    """A stored checkpoint that no longer decodes records an incident and parks the root; nothing runs."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    fresh = cold(engine, PARENT_V2_BREAKING)
    fresh.resume_all()
    fresh.send(kid.id, "finish")
    fresh.run_until_idle()
    assert fresh.instance(parent).record.status is InstanceStatus.PARKED
    assert fresh.instance(kid.id).record.inbox != ()  # the child of a parked root does not run
    [held] = fresh.parked()
    assert held.root == parent and "gathering" in held.incidents[-1].detail
    fresh.close()


def test_migration_is_validated_then_resumes_the_tree(make_engine: EngineFactory) -> None:
    """A bad mapping is refused with nothing written; a good one unparks the root and the tree runs on."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    kid = engine.children(parent)[0]
    fresh = cold(engine, PARENT_V2_BREAKING)
    fresh.resume_all()
    version = fresh.instance(parent).version
    with pytest.raises(MigrationRejected, match="gathering"):
        fresh.migrate(parent, {"nowhere": "reviewing"})
    with pytest.raises(MigrationRejected, match="does not have"):
        fresh.migrate(parent, {"gathering": "no_such_state"})
    assert fresh.instance(parent).version == version
    fresh.migrate(parent, {"gathering": "collecting"})
    assert fresh.instance(parent).record.status is InstanceStatus.RUNNING
    fresh.send(kid.id, "finish")
    fresh.run_until_idle()
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    fresh.close()


def test_terminate_disposes_of_a_parked_tree(make_engine: EngineFactory) -> None:
    """Terminating a parked root ends it and its children without running them."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a", "b"]})
    engine.run_until_idle()
    fresh = cold(engine, PARENT_V2_BREAKING)
    fresh.resume_all()
    assert fresh.terminate(parent, "chart retired") == 3
    assert fresh.instance(parent).record.status is InstanceStatus.CANCELLED
    assert all(k.record.status is InstanceStatus.CANCELLED for k in fresh.children(parent))
    assert fresh.parked() == []
    fresh.close()


def test_compatible_chart_change_resumes_without_parking(make_engine: EngineFactory) -> None:
    """Added states and transitions do not park: the instance resumes and can use them."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    fresh = cold(engine, PARENT_V2_COMPATIBLE)
    fresh.resume_all()
    fresh.send(parent, "hurry")
    fresh.run_until_idle()
    assert fresh.instance(parent).record.status is InstanceStatus.RUNNING
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    fresh.close()


def test_corrupted_activations_park_instead_of_guessing(make_engine: EngineFactory) -> None:
    """A checkpoint whose activations no longer cover its live slots parks the root with the slot named."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    corrupted = engine.instance(parent)
    corrupted.record_settled(corrupted.record.activations[0].ref, Settlement.DONE)  # no such outcome happened
    engine.parts.commits.save_instances(corrupted)
    fresh = cold(engine)
    fresh.resume_all()
    fresh.run_until_idle()
    record = fresh.instance(parent).record
    assert record.status is InstanceStatus.PARKED
    assert record.incidents[-1].kind == "checkpoint" and "team[a]" in record.incidents[-1].detail
    fresh.close()


def test_listing_lag_never_decides(make_engine: EngineFactory) -> None:
    """Recovery decides on the aggregate: an instance finished since any listing was read is not revived."""
    engine = build(make_engine)
    gate = engine.start("gate")
    engine.send(gate, "answer", 1)
    engine.run_until_idle()
    fresh = cold(engine)
    assert fresh.resume_all() == 0
    fresh.close()


def test_unknown_chart_parks_instead_of_crashing(make_engine: EngineFactory) -> None:
    """An instance whose chart is not registered parks its root with an incident; the engine runs on."""
    engine = build(make_engine)
    gate = engine.start("gate")
    others = [c for c in engine.charts.values() if c.name != "gate"]
    storage, clock = engine.storage, engine.clock
    engine.close()
    fresh = Engine(others, {"charge": lambda call: "ok"}, storage=storage, clock=clock)
    fresh.resume_all()
    fresh.run_until_idle()
    assert fresh.instance(gate).record.status is InstanceStatus.PARKED
    assert fresh.instance(gate).record.incidents[-1].kind == "unknown-chart"
    fresh.close()


def test_restart_helper_recovers(make_engine: EngineFactory) -> None:
    """incarnate.testing.restart acquires every tree, so a test can continue after it."""
    engine = build(make_engine)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    fresh = restart(engine)
    assert parent in fresh.parts.holdings.acquired()
    fresh.close()
