"""A store written before ``Stepped`` events carried deltas still loads, recovers and validates exactly."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from aggregates import Instance, InstanceStatus
from incarnate import Engine, Storage, VirtualClock
from projections import Checkpoint, resume_plan
from tests.integration.data.make_whole_snapshot_store import PARENT_ID, START
from tests.scenarios import charts

STORE = Path(__file__).parent / "data" / "whole_snapshot_store.db"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    """An engine over a copy of the stored file (the file itself is never written)."""
    copy = tmp_path / "store.db"
    shutil.copyfile(STORE, copy)
    engine = Engine(
        charts.ALL,
        {"charge": lambda call: "ok"},
        storage=Storage.sqlite(str(copy)),
        clock=VirtualClock(START + 60),
    )
    yield engine
    engine.close()


def stepped(engine: Engine) -> list[Instance.Stepped]:
    return [e for e in engine.events_of(PARENT_ID) if isinstance(e, Instance.Stepped)]


def test_whole_snapshot_events_load_into_the_same_checkpoint(engine: Engine) -> None:
    """The parent's old-form events rebuild its record and ResumePlan exactly."""
    events = stepped(engine)
    assert events and all(e.snapshot is not None and e.parts is None for e in events)
    parent = engine.instance(PARENT_ID)
    chart = engine.charts["parent"]
    assert parent.record.snapshot == events[-1].snapshot
    plan = engine.plan(PARENT_ID)
    assert plan == Checkpoint.of(parent, chart)
    assert plan.snapshot is not None
    assert [(s.key, s.status.value) for s in plan.snapshot.children] == [
        ("b", "running"),
        ("c", "running"),
        ("d", "running"),
    ]
    assert plan.snapshot.context.note == "heard"
    assert [a.key for a in plan.activations] == ["b", "c", "d"]
    assert resume_plan(engine.events_of(PARENT_ID), chart) == plan


def test_an_old_store_recovers_and_goes_on_in_deltas(engine: Engine) -> None:
    """Recovered from old-form events, the parent finishes its family in exact delta events."""
    engine.resume_all()
    engine.run_until_idle()
    for kid in engine.children(PARENT_ID):
        if not kid.record.status.finished:
            engine.send(kid.id, "finish")
    engine.run_until_idle()
    parent = engine.instance(PARENT_ID)
    assert parent.record.status is InstanceStatus.RUNNING
    assert engine.snapshot(PARENT_ID).configuration == ("reviewing",)
    assert sorted(engine.snapshot(PARENT_ID).context.results) == ["done:a", "done:b", "done:c", "done:d"]
    new = [e for e in stepped(engine) if e.snapshot is None]
    assert new and all(e.parts is not None for e in new)
    assert engine.plan(PARENT_ID) == Checkpoint.of(parent, engine.charts["parent"])
