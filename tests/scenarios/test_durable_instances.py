"""Durable instances: commit before enact, identity, retries, outcomes, cancellation (every store)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import attrs
import pytest

from aggregates import ActivationState, InputMismatch, Instance, InstanceStatus, Provenance
from incarnate import Engine, InstanceTerminated, TaskCall, UnknownInstance, VirtualClock
from incarnate._recovery import deliver_birth
from incarnate.testing import CrashPoint, SimulatedCrash, crash_at, restart
from statechart.event import done_invoke_event
from tests.scenarios import charts
from tests.scenarios.conftest import EngineFactory


def stored(engine: Engine) -> list[tuple[UUID, str]]:
    """Every stored instance event as (originator id, event class name), in commit order."""
    out = []
    for n in engine.parts.journal.recorder.select_notifications(start=1, limit=10_000):
        if ":Instance." not in n.topic:
            continue
        originator = n.originator_id if isinstance(n.originator_id, UUID) else UUID(str(n.originator_id))
        out.append((originator, n.topic.rsplit(".", 1)[-1].partition("@")[0]))
    return out


def count(engine: Engine, topic: str, instance_id: UUID | None = None) -> int:
    """How many events of a class are stored (for one instance, or all)."""
    return sum(1 for i, t in stored(engine) if t == topic and (instance_id is None or i == instance_id))


def parent_engine(make_engine: EngineFactory, **kwargs: Any) -> Engine:
    return make_engine(charts.ALL, {"charge": lambda call: {"ok": call.attempt}}, **kwargs)


# ------------------------------------------------------- commit before enact


@pytest.mark.parametrize("point", list(CrashPoint), ids=lambda p: p.value)
def test_commit_before_enact_is_all_or_nothing(make_engine: EngineFactory, point: CrashPoint) -> None:
    """A crash at any write boundary of a birth leaves all of it or none of it, and nothing enacted."""
    engine = parent_engine(make_engine)
    if point is CrashPoint.DURING_COMMIT and not engine.storage.transactional:
        pytest.skip("the in-memory store writes a commit under one lock; there is no inside to crash in")
    with pytest.raises(SimulatedCrash), crash_at(engine, point):
        engine.start("parent", {"members": ["a", "b"]})
    events = stored(engine)
    if point is CrashPoint.AFTER_COMMIT:
        topics = [t for _, t in events]
        assert topics.count("Started") == 3  # the parent and both children
        assert topics.count("Birth") == 2
        assert topics.count("Stepped") == 1  # the parent's first macrostep only: no child enacted
        parent_id = events[0][0]
        kids = engine.children(parent_id)
        assert [k.record.status for k in kids] == [InstanceStatus.BORN, InstanceStatus.BORN]
        fresh = restart(engine)
        fresh.run_until_idle()
        assert [k.record.status for k in fresh.children(parent_id)] == [InstanceStatus.RUNNING] * 2
        assert count(fresh, "Birth") == 2
    else:
        assert events == []


def test_a_birth_commit_is_one_insert(make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parent's macrostep, its Births and the children's creation reach the store in one insert."""
    engine = parent_engine(make_engine)
    batches: list[list[str]] = []
    original = engine.parts.journal.recorder.insert_events

    def spy(stored_events: Any, **kwargs: Any) -> Any:
        batches.append([s.topic.rsplit(".", 1)[-1].partition("@")[0] for s in stored_events])
        return original(stored_events, **kwargs)

    monkeypatch.setattr(engine.parts.journal.recorder, "insert_events", spy)
    engine.start("parent", {"members": ["a", "b"]})
    assert batches == [["Started", "Stepped", "Birth", "Birth", "Started", "Started"]]


def test_crash_after_a_later_commit_keeps_the_earlier_one(make_engine: EngineFactory) -> None:
    """A crash in a child's first macrostep loses only that macrostep; the parent's commit stands."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    before = stored(engine)
    with pytest.raises(SimulatedCrash), crash_at(engine, CrashPoint.BEFORE_COMMIT):
        engine.run_until_idle()
    assert stored(engine) == before
    fresh = restart(engine)
    fresh.run_until_idle()
    assert [k.record.status for k in fresh.children(parent_id)] == [InstanceStatus.RUNNING]


# ---------------------------------------------------------------- identity


def test_child_id_is_derived_from_its_ref(make_engine: EngineFactory) -> None:
    """Each child's instance id is the uuid5 of its Ref, and its birth facts name the parent."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a", "b"]})
    for activation, kid in zip(
        engine.instance(parent_id).record.activations, engine.children(parent_id), strict=True
    ):
        assert kid.id == activation.ref.child_id
        assert kid.record.parent == activation.ref
        assert kid.record.birth is not None and kid.record.birth.ref.parent == parent_id
        assert kid.record.root == parent_id


def test_redelivered_identical_birth_is_a_no_op(make_engine: EngineFactory) -> None:
    """Delivering a Birth again with identical facts changes nothing."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    kid = engine.children(parent_id)[0]
    assert kid.record.birth is not None
    before = stored(engine)
    assert deliver_birth(engine.parts, kid.record.birth) is False
    assert stored(engine) == before


def test_conflicting_birth_raises_input_mismatch_and_writes_nothing(make_engine: EngineFactory) -> None:
    """A Birth for an existing child id with another input raises InputMismatch and creates nothing."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    facts = engine.children(parent_id)[0].record.birth
    assert facts is not None
    before = stored(engine)
    with pytest.raises(InputMismatch, match="input"):
        deliver_birth(engine.parts, attrs.evolve(facts, input={"name": "someone else"}))
    assert stored(engine) == before


def test_max_depth_refuses_a_birth_with_an_event_the_chart_handles(make_engine: EngineFactory) -> None:
    """A recursive site refuses the birth past max_depth with error.invoke, which the chart handles."""
    engine = parent_engine(make_engine)
    root = engine.start("tree")
    engine.run_until_idle()
    chain = [engine.instance(root)]
    while chain[-1].record.activations:
        chain.append(engine.instance(chain[-1].record.activations[0].child_id))
    assert len(chain) == 4  # the root and three recursive levels
    assert [len(i.record.ancestry) for i in chain] == [0, 1, 2, 3]
    assert engine.snapshot(chain[-1].id).configuration == ("leaf",)
    assert engine.snapshot(chain[-1].id).context.refused is True
    engine.send(chain[-1].id, "wither")
    engine.run_until_idle()
    assert engine.instance(root).record.status is InstanceStatus.DONE


# ------------------------------------------------- restart vs retry vs re-add


def test_runner_restart_preserves_the_incarnation(make_engine: EngineFactory) -> None:
    """A restart keeps generation, Ref, attempt and ancestry, and commits nothing on the parent."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    before = engine.instance(parent_id).record.activations[0]
    parent_version = engine.instance(parent_id).version
    fresh = restart(engine)
    fresh.run_until_idle()
    after = fresh.instance(parent_id).record.activations[0]
    assert (after.generation, after.ref, after.attempt) == (before.generation, before.ref, before.attempt)
    assert fresh.instance(parent_id).version == parent_version + 1  # its one Claimed: ownership moved
    assert count(fresh, "Birth") == 1


def test_child_retry_is_a_fresh_incarnation(make_engine: EngineFactory, clock: VirtualClock) -> None:
    """A failed child is retried as ChildRetry then ChildResume: new generation and Ref, attempt + 1."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    first = engine.instance(parent_id).record.activations[0]
    engine.cancel(first.child_id, "the worker gave up")  # an operator cancel reaches the parent as a failure
    engine.run_until_idle()
    retrying = engine.instance(parent_id).record.activations[0]
    assert retrying.state is ActivationState.RETRYING
    assert retrying.journal[-1].ref == first.ref
    clock.advance(5.0)
    engine.run_until_idle()
    second = engine.instance(parent_id).record.activations[0]
    assert second.state is ActivationState.RUNNING
    assert second.generation > first.generation and second.ref != first.ref
    assert second.attempt == first.attempt + 1
    assert second.provenance is Provenance.RETRY
    topics = [t for i, t in stored(engine) if i == parent_id]
    assert topics.index("ChildRetry") < topics.index("ChildResume")
    assert engine.instance(second.child_id).record.status is InstanceStatus.RUNNING


def test_removed_and_readded_key_is_a_fresh_generation_at_attempt_one(make_engine: EngineFactory) -> None:
    """Removing a member key and adding it back births a fresh generation at attempt 1."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a", "b"]})
    engine.run_until_idle()
    old = engine.instance(parent_id).record.activation("team", "b")
    assert old is not None
    engine.send(parent_id, "regroup", ["a"])
    engine.run_until_idle()
    assert engine.instance(parent_id).record.activation("team", "b") is None
    assert engine.instance(old.child_id).record.status is InstanceStatus.CANCELLED
    engine.send(parent_id, "regroup", ["a", "b"])
    engine.run_until_idle()
    new = engine.instance(parent_id).record.activation("team", "b")
    assert new is not None
    assert new.generation > old.generation and new.ref != old.ref
    assert new.attempt == 1 and new.provenance is Provenance.BIRTH


# ---------------------------------------------------------------- outcomes


def test_child_output_reaches_the_parent_exactly_once(make_engine: EngineFactory) -> None:
    """A finished child's output is consumed once, even across a restart between commit and processing."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a", "b"]})
    engine.run_until_idle()
    for kid in engine.children(parent_id):
        engine.send(kid.id, "finish")
    # Process the children only: their completions land in the parent's inbox.
    for kid in engine.children(parent_id):
        engine.process(kid.id)
        engine.process(kid.id)
    assert len(engine.instance(parent_id).record.inbox) == 2
    fresh = restart(engine)
    fresh.run_until_idle()
    parent = fresh.instance(parent_id)
    assert fresh.snapshot(parent_id).configuration == ("reviewing",)
    assert sorted(fresh.snapshot(parent_id).context.results) == ["done:a", "done:b"]
    assert parent.record.inbox == () and parent.record.activations == ()
    # Each settlement is stored once: on the macrostep that consumed the outcome (format 2).
    steps = [e for e in fresh.events_of(parent_id) if isinstance(e, Instance.Stepped)]
    settled = [ref.site for e in steps for ref, _ in e.settled]
    assert settled == ["team", "team"] and count(fresh, "ChildSettled", parent_id) == 0


def test_stale_outcome_is_rejected_and_recorded(make_engine: EngineFactory, clock: VirtualClock) -> None:
    """An outcome carrying an older generation is recorded as rejected and never applied."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    first = engine.instance(parent_id).record.activations[0]
    engine.cancel(first.child_id)
    engine.run_until_idle()
    clock.advance(5.0)
    engine.run_until_idle()
    snapshot_before = engine.snapshot(parent_id)
    engine.send(parent_id, done_invoke_event(first.ref.invoke_id, "late news"))
    engine.run_until_idle()
    assert engine.snapshot(parent_id) == snapshot_before
    rejected = [e for e in engine.events_of(parent_id) if type(e).__name__ == "EvidenceRejected"]
    assert len(rejected) == 1 and "stale" in rejected[0].reason
    assert engine.instance(parent_id).record.inbox == ()


def test_child_messages_reach_the_parent(make_engine: EngineFactory) -> None:
    """send_parent delivers an event to the parent's inbox with the child's invoke id."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    engine.send(engine.children(parent_id)[0].id, "shout")
    engine.run_until_idle()
    assert engine.snapshot(parent_id).context.note == "heard"


def test_leaving_the_state_cancels_children_in_cascade_across_a_restart(make_engine: EngineFactory) -> None:
    """Leaving the invoking state cancels the child and its child, even if the engine dies right after."""
    engine = parent_engine(make_engine)
    top = engine.start("cascade")
    engine.run_until_idle()
    middle = engine.children(top)[0]
    inner = engine.children(middle.id)[0]
    assert inner.record.status is InstanceStatus.RUNNING
    engine.send(top, "drop")
    with pytest.raises(SimulatedCrash), crash_at(engine, CrashPoint.AFTER_COMMIT):
        engine.run_until_idle()
    assert engine.instance(middle.id).record.cancel is not None
    fresh = restart(engine)
    fresh.run_until_idle()
    assert fresh.instance(middle.id).record.status is InstanceStatus.CANCELLED
    assert fresh.instance(inner.id).record.status is InstanceStatus.CANCELLED
    assert fresh.instance(top).record.activations == ()


# ------------------------------------------------------------------- tasks


def test_task_child_receives_an_idempotency_key_and_is_retried(
    make_engine: EngineFactory, clock: VirtualClock
) -> None:
    """A failing task is retried under the site's policy; each attempt gets its own idempotency key."""
    calls: list[TaskCall] = []

    def charge(call: TaskCall) -> str:
        calls.append(call)
        if call.attempt == 1:
            raise RuntimeError("card declined")
        assert isinstance(call.input, dict)
        return f"receipt-{call.input['amount']}"

    engine = make_engine(charts.ALL, {"charge": charge})
    root = engine.start("charging")
    engine.run_until_idle()
    assert len(calls) == 1
    clock.advance(2.0)
    engine.run_until_idle()
    assert [c.attempt for c in calls] == [1, 2]
    assert calls[0].idempotency_key != calls[1].idempotency_key
    assert calls[0].ref.generation < calls[1].ref.generation
    assert engine.instance(root).record.output == "receipt-10"


def test_task_cancelled_by_an_operator_is_reported_to_its_parent(make_engine: EngineFactory) -> None:
    """A task cancelled from outside while it runs reaches its parent as a failure, which the site retries."""
    engines: list[Engine] = []

    def charge(call: TaskCall) -> str:
        engines[0].cancel(call.instance_id, "the card was reported stolen")  # an operator, mid-run
        return "too late"

    engine = make_engine(charts.ALL, {"charge": charge})
    engines.append(engine)
    root = engine.start("charging")
    task = engine.instance(root).record.activations[0]
    engine.run_until_idle()
    assert engine.instance(task.child_id).record.status is InstanceStatus.CANCELLED
    activation = engine.instance(root).record.activations[0]
    assert activation.state is ActivationState.RETRYING
    assert activation.journal[-1].error == {"reason": "cancelled", "detail": "the card was reported stolen"}


def test_async_task_runs(make_engine: EngineFactory) -> None:
    """An async task callable is awaited and its result is the child's output."""

    async def charge(call: TaskCall) -> str:
        return f"async-{call.attempt}"

    engine = make_engine(charts.ALL, {"charge": charge})
    root = engine.start("charging")
    engine.run_until_idle()
    assert engine.instance(root).record.output == "async-1"


def test_task_interrupted_before_its_outcome_runs_again_with_the_same_key(make_engine: EngineFactory) -> None:
    """A crash after a task ran but before its outcome committed reruns it with the same key."""
    keys: list[str] = []

    def charge(call: TaskCall) -> str:
        keys.append(call.idempotency_key)
        return "ok"

    engine = make_engine(charts.ALL, {"charge": charge})
    root = engine.start("charging")
    with pytest.raises(SimulatedCrash), crash_at(engine, CrashPoint.BEFORE_COMMIT):
        engine.run_until_idle()
    fresh = restart(engine)
    fresh.run_until_idle()
    assert len(keys) == 2 and keys[0] == keys[1]
    assert fresh.instance(root).record.output == "ok"


# ------------------------------------------------------------------- inbox


def test_accepted_event_survives_death_before_processing(make_engine: EngineFactory) -> None:
    """An event accepted by send() is processed exactly once by a fresh engine."""
    engine = parent_engine(make_engine)
    gate = engine.start("gate")
    assert engine.send(gate, "answer", {"ok": True}) == 1
    fresh = restart(engine)  # the first engine never processed it
    fresh.run_until_idle()
    assert fresh.instance(gate).record.output == {"ok": True}
    assert count(fresh, "Stepped", gate) == 2


def test_send_with_a_key_is_accepted_once(make_engine: EngineFactory) -> None:
    """A repeated send with the same idempotency key is accepted once."""
    engine = parent_engine(make_engine)
    gate = engine.start("timed")
    assert engine.send(gate, "poke", key="k1") == 1
    assert engine.send(gate, "poke", key="k1") is None
    assert count(engine, "Accepted", gate) == 1


def test_send_to_unknown_or_finished_instance_is_a_clear_error(make_engine: EngineFactory) -> None:
    """Sending to an unknown id or a finished instance raises an error naming it."""
    engine = parent_engine(make_engine)
    missing = UUID(int=7)
    with pytest.raises(UnknownInstance, match=str(missing)):
        engine.send(missing, "hello")
    gate = engine.start("gate")
    engine.send(gate, "answer", 1)
    engine.run_until_idle()
    with pytest.raises(InstanceTerminated, match="done"):
        engine.send(gate, "answer", 2)


# ------------------------------------------------------------------ timers


def test_overdue_timers_fire_once_each_in_deadline_order(
    make_engine: EngineFactory, clock: VirtualClock
) -> None:
    """After a long outage, overdue timers fire once each, earliest deadline first."""
    engine = parent_engine(make_engine)
    timed = engine.start("timed")
    engine.run_until_idle()
    clock.advance(100.0)
    fresh = restart(engine)
    fresh.run_until_idle()
    fresh = restart(fresh)
    fresh.run_until_idle()
    fired = [e.timer for e in fresh.events_of(timed) if type(e).__name__ == "Stepped" and e.timer]
    assert fired == ["send.1", "send.2", "send.0", "after.waiting.2"]
    assert fresh.snapshot(timed).context.seen == ("a", "b", "c")
    assert fresh.snapshot(timed).configuration == ("late",)
    assert fresh.snapshot(timed).timers == ()


def test_timers_fire_when_due_and_not_before(make_engine: EngineFactory, clock: VirtualClock) -> None:
    """A delayed event waits for its deadline on the engine's clock."""
    engine = parent_engine(make_engine)
    timed = engine.start("timed")
    clock.advance(9.9)
    engine.run_until_idle()
    assert engine.snapshot(timed).context.seen == ()
    clock.advance(0.1)
    engine.run_until_idle()
    assert engine.snapshot(timed).context.seen == ("a",)


def test_human_gate_survives_many_restarts(make_engine: EngineFactory) -> None:
    """A state waiting for an answer survives any number of restarts, then continues."""
    engine = parent_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    for _ in range(5):
        engine = restart(engine)
        engine.run_until_idle()
    kid = engine.children(parent_id)[0]
    assert engine.snapshot(kid.id).configuration == ("working",)
    engine.send(kid.id, "finish")
    engine.run_until_idle()
    engine.send(parent_id, "approve")
    engine.run_until_idle()
    assert engine.instance(parent_id).record.output == {"results": ["done:a"]}
