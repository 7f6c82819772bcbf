"""``Engine.ending``: how an instance ended, read from its last stored event whenever that tells.

``handle.result()`` polls it, so a finished instance's result costs one
stored row to read, not its whole history, and nothing on the engine that
committed a final ending (done or cancelled, with a small output); the
answer is always the one the whole instance gives.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from aggregates import Instance, InstanceStatus
from incarnate import (
    AsyncEngine,
    DeterministicRunner,
    Engine,
    InstanceCancelled,
    InstanceFailed,
    Storage,
    TaskCall,
    _copies,
    _handles,
)
from incarnate._handles import FIRST_POLL, poll
from incarnate.errors import UnknownInstance
from statechart import Chart, Event, final, invoke, state, transition

GATE = Chart("gate", state("waiting", on=[transition("answer", "done")]), final("done"))


BROKEN = Chart(
    "broken",
    state("working", invoke=[invoke("boom", task="boom")], on=[transition("error.invoke.boom", "failed")]),
    final("failed"),
)


def large(context: object, event: Event) -> str:
    """An output past what an engine remembers of an ending."""
    return "x" * (_copies.SMALL_ENDING + 1)


LARGE = Chart("large", state("waiting", on=[transition("answer", "done")]), final("done", done_data=large))


def boom(call: TaskCall) -> str:
    raise RuntimeError("boom")


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    with Engine(
        [GATE, BROKEN, LARGE],
        {"boom": boom},
        storage=Storage.sqlite(str(tmp_path / "ending.db")),
        runner=DeterministicRunner(),
    ) as built:
        yield built


@pytest.fixture
def reader(engine: Engine) -> Any:
    """Another engine over the same store: it remembers nothing this one committed."""
    with Engine([GATE, BROKEN, LARGE], storage=engine.parts.storage, runner=DeterministicRunner()) as built:
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


def test_a_finished_root_answers_from_its_last_event(engine: Engine, reader: Engine) -> None:
    gate = engine.start(GATE)
    engine.run_until_idle()
    assert reader.ending(gate) is None
    engine.send(gate, "answer")
    engine.run_until_idle()
    counts = decoded_rows(reader)
    ending = reader.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.DONE and ending.instance_id == gate
    assert counts == [1]
    assert reader.handle(gate).result() is None


def test_a_running_root_is_told_by_the_topic_of_its_last_event_without_decoding_it(
    engine: Engine, reader: Engine
) -> None:
    gate = engine.start(GATE)
    engine.run_until_idle()
    counts = decoded_rows(reader)
    assert reader.ending(gate) is None
    assert counts == []  # a handle waiting on a running instance reads one row and decodes none
    with pytest.raises(TimeoutError, match="still running"):
        reader.handle(gate).result(timeout=FIRST_POLL)
    engine.send(gate, "answer")
    engine.run_until_idle()
    ending = reader.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.DONE
    assert counts == [1]


def test_engine_result_of_an_ended_instance_reads_its_ending_not_the_whole_instance(
    engine: Engine, reader: Engine
) -> None:
    gate = engine.start(GATE)
    for n in range(5):  # a longer history: messages the chart ignores
        engine.send(gate, f"noise-{n}")
    engine.send(gate, "answer")
    engine.run_until_idle()
    decoded: list[Any] = []
    mapper = reader.parts.journal.events.mapper
    original = mapper.to_domain_event

    def decoding(stored: Any) -> Any:
        decoded.append(stored.topic)
        return original(stored)

    mapper.to_domain_event = decoding  # type: ignore[method-assign,assignment]
    assert reader.result(gate.id) is None
    assert decoded == [Instance.Completed.__module__ + ":Instance.Completed"]  # its last event alone
    broken = engine.start(BROKEN)
    engine.run_until_idle()
    [task] = [i for i in engine.instances() if i.record.root == broken and i.id != broken]
    with pytest.raises(InstanceFailed, match="boom"):
        reader.result(task.id)  # an embedded task: its ending from its parent's events
    with pytest.raises(UnknownInstance):
        reader.result(uuid.uuid4())

    async def awaited() -> Any:
        async with AsyncEngine(reader) as wrapped:  # closes the reader, at the test's end
            return await wrapped.result(gate.id)

    assert asyncio.run(awaited()) is None


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


def test_a_fact_after_the_ending_sends_the_question_to_the_whole_instance(
    engine: Engine, reader: Engine
) -> None:
    gate = engine.start(GATE)
    engine.send(gate, "answer")
    engine.run_until_idle()
    instance = engine.instance(gate)
    instance.record_incident("operator-note", "looked at after it finished", park=False)
    engine.parts.commits.save_instances(instance)
    counts = decoded_rows(reader)
    ending = reader.ending(gate)
    assert ending is not None and ending.status is InstanceStatus.DONE
    assert counts == [1]  # the last event (an incident), then the whole instance, replayed
    assert reader.handle(gate).result() is None


def test_an_unknown_instance_is_refused(engine: Engine) -> None:
    with pytest.raises(UnknownInstance):
        engine.ending(uuid.uuid4())


def test_the_engine_that_ended_a_root_answers_without_reading_the_store(engine: Engine) -> None:
    gate, cancelled = engine.start(GATE), engine.start(GATE)
    engine.send(gate, "answer")
    engine.cancel(cancelled, "not needed")
    engine.run_until_idle()
    counts = decoded_rows(engine)
    assert gate.result() is None
    with pytest.raises(InstanceCancelled, match="not needed"):
        cancelled.result()
    assert counts == []


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "streams"])
def test_a_failure_is_read_from_the_store_each_time_as_a_redrive_may_follow(
    tmp_path: Path, embed: bool
) -> None:
    with Engine(
        [BROKEN],
        {"boom": boom},
        storage=Storage.sqlite(tmp_path / "failure.db"),
        runner=DeterministicRunner(),
        embed_tasks=embed,
    ) as engine:
        broken = engine.start(BROKEN)
        engine.run_until_idle()
        [task] = [i for i in engine.instances() if i.record.root == broken and i.id != broken]
        counts = decoded_rows(engine)
        parents: list[uuid.UUID] = []  # an embedded task is read from its parent's events
        events_of = engine.parts.journal.events_of

        def reading(instance_id: uuid.UUID) -> list[Any]:
            parents.append(instance_id)
            return events_of(instance_id)

        engine.parts.journal.events_of = reading  # type: ignore[method-assign]
        reads = []
        for _ in range(2):
            with pytest.raises(InstanceFailed, match="boom"):
                engine.handle(task.id).result()
            reads.append(len(parents) if embed else len(counts))
        if embed:
            assert counts == [] and set(parents) == {broken.id} and 0 < reads[0] < reads[1]
        else:
            assert counts == [1, 1] and parents == []  # its last event, the failure


def test_large_endings_and_endings_past_the_bound_are_read_from_the_store(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_copies, "ENDINGS_KEPT", 2)
    roots = [engine.start(GATE) for _ in range(3)]
    big = engine.start(LARGE)
    for root in [*roots, big]:
        engine.send(root, "answer")
        engine.run_until_idle()
    assert engine.parts.copies.endings() == 2
    counts = decoded_rows(engine)
    assert big.result() == large(None, Event("done"))
    assert [root.result() for root in roots] == [None, None, None]
    assert counts == [1, 1]  # the large output, and the oldest of the three small ones


def test_a_walk_of_a_large_value_stops_once_it_is_over_budget() -> None:
    assert _copies.smaller_than(None, 8) == 0
    assert _copies.smaller_than({"ab": ["cd", 1]}, 100) == 100 - (8 + 8) - 2 - (8 + 16) - (8 + 2) - 8
    assert _copies.smaller_than([[], ["x" * 50] * 1_000_000], 100) < 0  # the long list is not walked
    assert _copies.smaller_than(["x" * 50] * 3, 100) < 0


def test_the_commit_that_ends_an_instance_wakes_whoever_watches_it(engine: Engine) -> None:
    gate, other = engine.start(GATE), engine.start(GATE)
    engine.run_until_idle()
    woken: list[str] = []
    watches = (
        engine.watch(gate, lambda: woken.append("gate")),
        engine.watch(gate, lambda: woken.append("gate, again")),
        engine.watch(other, lambda: woken.append("other")),
    )
    with watches[0], watches[1], watches[2]:
        engine.send(gate, "answer")
        engine.run_until_idle()
        assert woken == ["gate", "gate, again"]
        engine.cancel(other, "given up")
        engine.run_until_idle()
        assert woken[2:] == ["other"]  # a cancel wakes as any ending does
    assert engine.parts.copies._waiting == {}  # nothing is left watching
    engine.send(engine.start(GATE), "answer")
    engine.run_until_idle()
    assert len(woken) == 3


class RecordedWaits(threading.Event):
    """An event that records the pauses it was asked to wait."""

    def __init__(self) -> None:
        super().__init__()
        self.pauses: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.pauses.append(timeout)
        return super().wait(0)


def test_a_handle_pauses_on_its_watch_and_reads_again_when_woken() -> None:
    answers = iter([None, None, None, "done"])
    woken = RecordedWaits()
    assert poll(lambda: next(answers), 10.0, TimeoutError, woken) == "done"
    assert woken.pauses == [FIRST_POLL, 2 * FIRST_POLL, 4 * FIRST_POLL]


def test_a_wake_up_is_read_once() -> None:
    """Woken, then read again and not ended after all (a failure redriven since): the handle pauses again."""
    answers = iter([None, None, "done"])
    woken = RecordedWaits()
    woken.set()
    assert poll(lambda: next(answers), 10.0, TimeoutError, woken) == "done"
    assert woken.pauses == [FIRST_POLL, 2 * FIRST_POLL]
    assert not woken.is_set()


def answered_after_the_first_read(engine: Engine, gate: uuid.UUID) -> Any:
    """A reader for a handle: its first read finds the gate waiting and has another thread answer it."""
    answering: list[threading.Thread] = []

    def answer() -> None:
        engine.send(gate, "answer")
        engine.run_until_idle()

    def read(inner: Any) -> Any:
        found = inner()
        if not answering:
            assert found is None
            answering.append(threading.Thread(target=answer))
            answering[0].start()
        return found

    read.answering = answering  # type: ignore[attr-defined]
    return read


@pytest.mark.parametrize("awaited", [False, True], ids=["blocking", "awaited"])
def test_a_waiting_result_is_woken_by_the_commit_that_ends_it(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, awaited: bool
) -> None:
    """With 30 s between two reads, only the wake brings the result before its 10 s deadline."""
    monkeypatch.setattr(_handles, "FIRST_POLL", 30.0)
    gate = engine.start(GATE)
    engine.run_until_idle()
    read = answered_after_the_first_read(engine, gate)
    began = time.monotonic()
    if awaited:

        async def in_thread(inner: Any) -> Any:
            return await asyncio.to_thread(read, inner)

        output = asyncio.run(engine.handle(gate).result_async(timeout=10.0, run=in_thread))
    else:
        ending = engine.ending
        monkeypatch.setattr(engine, "ending", lambda instance_id: read(lambda: ending(instance_id)))
        output = gate.result(timeout=10.0)
    assert output is None
    assert time.monotonic() - began < 5.0  # unwoken, the second read comes at the 10 s deadline
    read.answering[0].join(10.0)
