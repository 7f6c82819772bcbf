"""Keyed sends stay idempotent for the whole life of an instance, on every store."""

from __future__ import annotations

from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import Engine, InstanceTerminated
from statechart import Chart, always, final, state, transition
from tests.scenarios.conftest import EngineFactory

GATE = Chart(
    "keyed_gate",
    state(
        "awaiting",
        on=[
            transition("approve", "approved"),
            transition("reject", "rejected"),
            transition("explode", "boom"),
        ],
    ),
    final("approved", done_data=lambda context, event: {"approved_by": event.data}),
    final("rejected"),
    state("boom", on=[always("boom")]),  # never settles: the macrostep fails the instance
)


def accepted(engine: Engine, instance_id: UUID) -> int:
    """How many events the instance has accepted into its inbox so far."""
    return engine.instance(instance_id).record.message_seq


def finish(engine: Engine, instance_id: UUID, key: str) -> None:
    """Approve the gate under ``key`` and process it to the end."""
    assert engine.send(instance_id, "approve", "alice", key=key) == 1
    engine.run_until_idle()
    assert engine.instance(instance_id).status is InstanceStatus.DONE


def test_repeat_after_the_gate_finished_returns_none(make_engine: EngineFactory) -> None:
    """A repeated keyed send returns None after the first was processed and finished the instance."""
    engine = make_engine([GATE])
    gate = engine.start("keyed_gate")
    finish(engine, gate, "form-8812")
    assert engine.send(gate, "approve", "alice", key="form-8812") is None
    assert engine.send(gate, "approve", "alice", key="form-8812") is None
    assert accepted(engine, gate) == 1
    assert engine.instance(gate).record.output == {"approved_by": "alice"}


def test_repeat_before_processing_returns_none(make_engine: EngineFactory) -> None:
    """A repeat that arrives before the first was processed is accepted once and returns None."""
    engine = make_engine([GATE])
    gate = engine.start("keyed_gate")
    assert engine.send(gate, "approve", "alice", key="form-1") == 1
    assert engine.send(gate, "approve", "alice", key="form-1") is None
    engine.run_until_idle()
    assert engine.send(gate, "approve", "alice", key="form-1") is None
    assert accepted(engine, gate) == 1


def test_new_key_or_no_key_to_a_finished_instance_raises(make_engine: EngineFactory) -> None:
    """A send with a key the finished instance never accepted, or with no key, raises InstanceTerminated."""
    engine = make_engine([GATE])
    gate = engine.start("keyed_gate")
    finish(engine, gate, "form-1")
    with pytest.raises(InstanceTerminated, match="done"):
        engine.send(gate, "approve", "bob", key="form-2")
    with pytest.raises(InstanceTerminated):
        engine.send(gate, "approve", "bob")


def test_repeat_from_a_fresh_engine_returns_none(make_engine: EngineFactory) -> None:
    """A fresh engine over the same store recognises a key accepted before the instance finished."""
    first = make_engine([GATE])
    gate = first.start("keyed_gate")
    finish(first, gate, "form-8812")
    first.close()
    second = make_engine([GATE])
    assert second.send(gate, "approve", "alice", key="form-8812") is None
    with pytest.raises(InstanceTerminated):
        second.send(gate, "approve", "alice", key="form-other")


def test_repeat_from_a_fresh_engine_reading_a_snapshot_returns_none(make_engine: EngineFactory) -> None:
    """Accepted keys survive the library's snapshots: a fresh engine rebuilt from one still knows them."""
    first = make_engine([GATE], snapshot_interval=1)
    gate = first.start("keyed_gate")
    finish(first, gate, "form-8812")
    snapshot, _ = first.parts.journal.stored(gate)
    assert snapshot is not None
    assert snapshot.mutate(None).record.keys == ("form-8812",)
    assert first.send(gate, "approve", "alice", key="form-8812") is None
    first.close()
    second = make_engine([GATE], snapshot_interval=1)
    assert second.send(gate, "approve", "alice", key="form-8812") is None


@pytest.mark.parametrize("ending", ["cancelled", "rejected", "failed"])
def test_repeat_after_other_endings_returns_none(make_engine: EngineFactory, ending: str) -> None:
    """A repeat of an accepted key returns None when the instance was cancelled, failed or ended otherwise."""
    engine = make_engine([GATE])
    gate = engine.start("keyed_gate")
    if ending == "cancelled":
        assert engine.send(gate, "ping", key="form-1") == 1
        engine.cancel(gate)
        engine.run_until_idle()
        assert engine.instance(gate).status is InstanceStatus.CANCELLED
    elif ending == "failed":
        assert engine.send(gate, "explode", key="form-1") == 1
        engine.run_until_idle()
        assert engine.instance(gate).status is InstanceStatus.FAILED
    else:
        assert engine.send(gate, "reject", key="form-1") == 1
        engine.run_until_idle()
        assert engine.instance(gate).status is InstanceStatus.DONE
    assert engine.send(gate, "ping", key="form-1") is None
    with pytest.raises(InstanceTerminated):
        engine.send(gate, "ping", key="form-2")


def test_the_aggregate_accepts_a_known_key_after_it_finished() -> None:
    """Instance.accept returns None for a key it accepted before, even once finished; a new key is refused."""
    from uuid import uuid4

    from aggregates import Instance, InstanceKind, InvalidCommand
    from statechart import Event

    instance = Instance.start_root(
        id=uuid4(), kind=InstanceKind.CHART, name="keyed_gate", fingerprint="", input=None, owner="test"
    )
    assert instance.accept(Event("approve"), source=None, sent_at=0.0, key="form-1") is not None
    instance.complete(None)
    assert instance.accept(Event("approve"), source=None, sent_at=1.0, key="form-1") is None
    with pytest.raises(InvalidCommand, match="done"):
        instance.accept(Event("approve"), source=None, sent_at=1.0, key="form-2")


@pytest.mark.parametrize("name", ["done.invoke.site.0", "error.invoke.x", "retry.invoke.y.1"])
def test_child_outcome_names_are_refused_by_send(make_engine: EngineFactory, name: str) -> None:
    """A send named like a child's outcome but naming no incarnation is refused before anything is stored."""
    from incarnate import EngineError

    engine = make_engine([GATE])
    gate = engine.start("keyed_gate")
    with pytest.raises(EngineError, match="report a child's outcome"):
        engine.send(gate, name, {"forged": True})
    assert accepted(engine, gate) == 0
    finish(engine, gate, "after-refusal")
