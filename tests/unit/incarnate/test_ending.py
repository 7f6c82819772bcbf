"""``Engine.ending``: how an instance ended, read from its last stored event whenever that tells.

``handle.result()`` polls it, so a finished instance's result costs one
stored row to read, not its whole history; the answer is always the one the
whole instance gives.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from aggregates import InstanceStatus
from incarnate import DeterministicRunner, Engine, InstanceCancelled, InstanceFailed, Storage, TaskCall
from incarnate.errors import UnknownInstance
from statechart import Chart, final, invoke, state, transition

GATE = Chart("gate", state("waiting", on=[transition("answer", "done")]), final("done"))


BROKEN = Chart(
    "broken",
    state("working", invoke=[invoke("boom", task="boom")], on=[transition("error.invoke.boom", "failed")]),
    final("failed"),
)


def boom(call: TaskCall) -> str:
    raise RuntimeError("boom")


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    with Engine(
        [GATE, BROKEN],
        {"boom": boom},
        storage=Storage.sqlite(str(tmp_path / "ending.db")),
        runner=DeterministicRunner(),
    ) as built:
        yield built


def decoded_rows(engine: Engine) -> list[int]:
    """Count the stored events decoded from now on (one entry per read, its row count)."""
    counts: list[int] = []
    journal = engine.parts.journal
    original = journal.decode_records

    def counting(instance_id: uuid.UUID, records: Any) -> list[Any]:
        counts.append(len(records))
        return original(instance_id, records)

    journal.decode_records = counting  # type: ignore[method-assign]
    return counts


def test_a_finished_root_answers_from_its_last_event(engine: Engine) -> None:
    gate = engine.start(GATE)
    engine.run_until_idle()
    assert engine.ending(gate) is None
    engine.send(gate, "answer")
    engine.run_until_idle()
    engine.parts.copies.drop([gate])  # as after an eviction: the store answers
    counts = decoded_rows(engine)
    ending = engine.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.DONE and ending.instance_id == gate
    assert counts == [1]
    assert gate.result() is None


def test_a_failed_task_and_a_cancelled_root_end_as_the_whole_instance_says(engine: Engine) -> None:
    broken = engine.start(BROKEN)
    engine.run_until_idle()
    [task] = [i for i in engine.instances() if i.record.root == broken and i.id != broken]
    ending = engine.ending(task.id)
    assert ending is not None and ending.status is InstanceStatus.FAILED
    assert ending.error == engine.instance(task.id).record.error
    with pytest.raises(InstanceFailed, match="boom"):
        engine.handle(task.id).result()
    gate = engine.start(GATE)
    engine.cancel(gate, "not needed")
    engine.run_until_idle()
    ending = engine.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.CANCELLED
    with pytest.raises(InstanceCancelled, match="not needed"):
        gate.result()


def test_a_fact_after_the_ending_sends_the_question_to_the_whole_instance(engine: Engine) -> None:
    gate = engine.start(GATE)
    engine.send(gate, "answer")
    engine.run_until_idle()
    instance = engine.instance(gate)
    instance.record_incident("operator-note", "looked at after it finished", park=False)
    engine.parts.commits.save_instances(instance)
    engine.parts.copies.drop([gate])
    counts = decoded_rows(engine)
    ending = engine.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.DONE
    assert counts == [1]  # the last event (an incident), then the whole instance, replayed
    assert gate.result() is None


def test_an_unknown_instance_is_refused(engine: Engine) -> None:
    with pytest.raises(UnknownInstance):
        engine.ending(uuid.uuid4())
