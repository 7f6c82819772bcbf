"""Result handles: what ``start`` returns, waiting for results and for the step a keyed send caused.

Every test runs on each store (POPO, a SQLite file, PostgreSQL); the
cross-process tests run a real ``incarnate worker`` process.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
import time
from pathlib import Path
from uuid import UUID, uuid4

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import (
    EngineError,
    InstanceCancelled,
    InstanceFailed,
    InstanceHandle,
    SendReceipt,
    StepOutcome,
    TaskCall,
    ThreadedRunner,
    UnknownInstance,
)
from statechart import Chart, JsonValue, always, assign, final, invoke, state, transition
from tests.integration.test_worker import start_in_client, store, worker
from tests.scenarios.conftest import EngineFactory


@attrs.frozen
class Review:
    """How many notes a review collected."""

    notes: int = 0


REVIEW = Chart(
    "review",
    state(
        "open",
        on=[
            transition("note", actions=[assign(lambda r, e: attrs.evolve(r, notes=r.notes + 1))]),
            transition("hold", "held"),
            transition("approve", "approved"),
            transition("explode", "boom"),
        ],
    ),
    state("held", on=[transition("approve", "approved")]),
    final("approved", done_data=lambda r, e: {"by": e.data, "notes": r.notes}),
    state("boom", on=[always("boom")]),  # never settles: the macrostep fails the instance
    context=Review,
)
"""A human review: notes, a hold, approval with its done data, and an event that fails it."""


def charge(call: TaskCall) -> JsonValue:
    """A task that succeeds with its input."""
    return call.input


CHARGE = Chart(
    "charge",
    state(
        "charging",
        invoke=[invoke("pay", task="charge", input={"amount": 5})],
        on=[transition("done.invoke.pay", "paid")],
    ),
    final("paid", done_data=lambda c, e: e.data),
)


def test_start_returns_a_handle_that_is_the_instance_id(make_engine: EngineFactory) -> None:
    """``start`` returns an InstanceHandle equal to, hashing and printing as the plain instance id."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    assert isinstance(handle, InstanceHandle) and isinstance(handle, UUID)
    plain = handle.id
    assert type(plain) is UUID
    assert handle == plain and plain == handle and hash(handle) == hash(plain)
    assert str(handle) == str(plain) and UUID(str(handle)) == handle
    ids: dict[UUID, int] = {handle: 1}
    assert ids[plain] == 1
    assert handle.chart == "review"
    assert handle.status() is InstanceStatus.RUNNING
    assert engine.send(handle, "note") == 1
    assert engine.instance(handle).id == plain
    assert type(pickle.loads(pickle.dumps(handle))) is UUID
    assert type(copy.deepcopy(handle)) is UUID and copy.copy(handle) == handle


def test_result_returns_the_output(make_engine: EngineFactory) -> None:
    """``result()`` returns the done data of a finished instance, also through ``engine.handle(id)``."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    engine.send(handle, "note")
    engine.send(handle, "approve", "alice")
    engine.run_until_idle()
    assert handle.result(timeout=5) == {"by": "alice", "notes": 1}
    assert engine.handle(UUID(str(handle))).result() == {"by": "alice", "notes": 1}
    assert engine.result(handle, timeout=1) == {"by": "alice", "notes": 1}
    assert handle.status() is InstanceStatus.DONE


def test_result_waits_for_a_threaded_runner(make_engine: EngineFactory) -> None:
    """``result()`` blocks until another thread finished the instance, including its task child."""
    engine = make_engine([CHARGE], {"charge": charge}, runner=ThreadedRunner(workers=2, poll_interval=0.01))
    handles = [engine.start("charge") for _ in range(5)]
    assert [h.result(timeout=20) for h in handles] == [{"amount": 5}] * 5


def test_result_of_a_failed_instance_raises_instance_failed(make_engine: EngineFactory) -> None:
    """A failed instance makes ``result()`` raise InstanceFailed carrying the recorded error."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    engine.send(handle, "explode")
    engine.run_until_idle()
    with pytest.raises(InstanceFailed) as raised:
        handle.result(timeout=5)
    assert raised.value.instance_id == handle and isinstance(raised.value, EngineError)
    assert isinstance(raised.value.error, dict) and raised.value.error["error"] == "RunawayMacrostep"
    assert f"instance {handle} failed" in str(raised.value)


def test_result_of_a_cancelled_instance_raises_instance_cancelled(make_engine: EngineFactory) -> None:
    """A cancelled instance makes ``result()`` raise InstanceCancelled carrying the reason."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    engine.cancel(handle, "the customer withdrew")
    engine.run_until_idle()
    with pytest.raises(InstanceCancelled) as raised:
        handle.result(timeout=5)
    assert raised.value.reason == "the customer withdrew"
    assert str(raised.value) == (f"instance {handle} was cancelled (the customer withdrew) and has no result")


def test_result_times_out_on_a_running_instance(make_engine: EngineFactory) -> None:
    """``result(timeout=...)`` raises TimeoutError naming the instance and its status if it does not end."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    started = time.monotonic()
    with pytest.raises(TimeoutError) as raised:
        handle.result(timeout=0.2)
    assert 0.2 <= time.monotonic() - started < 5
    assert f"instance {handle} ('review') is still running after 0.2s" in str(raised.value)


def test_handle_of_an_unknown_instance_raises(make_engine: EngineFactory) -> None:
    """``engine.handle(id)`` of an id nothing stored raises UnknownInstance."""
    engine = make_engine([REVIEW])
    with pytest.raises(UnknownInstance):
        engine.handle(uuid4())


def test_events_store_plain_uuids(make_engine: EngineFactory) -> None:
    """Ids given as handles are stored as plain UUIDs, and read back from a fresh engine as plain UUIDs."""
    engine = make_engine([REVIEW, CHARGE], {"charge": charge})
    first = engine.start("review")
    wanted = InstanceHandle(engine, uuid4(), "review")
    second = engine.start("review", id=wanted)
    assert second == wanted
    assert type(engine.instance(second, fresh=False).id) is UUID  # the engine's own copy too
    engine.send(first, "approve", "bob", key="k-1")
    engine.cancel(second)
    parent = engine.start("charge")
    engine.run_until_idle()
    reader = make_engine([REVIEW, CHARGE], {"charge": charge})
    for instance_id in (first, second, parent, *(c.id for c in reader.children(parent))):
        events = reader.events_of(UUID(str(instance_id)))
        assert all(type(event.originator_id) is UUID for event in events)
        stored = list(reader.parts.journal.recorder.select_events(UUID(str(instance_id))))
        assert stored and all(type(record.originator_id) is UUID for record in stored)
        assert all(type(event.originator_id) is UUID for event in engine.events_of(instance_id))
    assert type(reader.instance(parent).record.root) is UUID
    for child in reader.children(parent):
        assert type(child.record.root) is UUID and type(child.record.birth.ref.parent) is UUID  # type: ignore[union-attr]


def test_a_send_receipt_resolves_to_the_step_it_caused(make_engine: EngineFactory) -> None:
    """``send_receipt(..., key=k).wait()`` returns the configuration after the macrostep that consumed it."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    receipt = engine.send_receipt(handle, "hold", key="form-1")
    assert isinstance(receipt, SendReceipt) and receipt.seq == 1 and receipt.key == "form-1"
    with pytest.raises(TimeoutError, match=r"message 1 of instance .* is still unprocessed"):
        receipt.wait(timeout=0.05)
    engine.send(handle, "approve", "carol")
    engine.run_until_idle()
    outcome = receipt.wait(timeout=5)
    assert isinstance(outcome, StepOutcome) and outcome.processed
    assert outcome.configuration == ("held",)  # right after its own step, not the later approval
    assert outcome.status is InstanceStatus.DONE and outcome.seq == 1 and outcome.version is not None
    repeat = engine.send_receipt(handle, "hold", key="form-1")  # a repeat finds the first message
    assert repeat.seq == 1 and repeat.wait(timeout=1) == outcome


def test_send_and_wait_with_a_threaded_runner(make_engine: EngineFactory) -> None:
    """``send_and_wait`` returns once another thread processed the message."""
    engine = make_engine([REVIEW], runner=ThreadedRunner(workers=2, poll_interval=0.01))
    handle = engine.start("review")
    outcome = engine.send_and_wait(handle, "hold", key="h", timeout=20)
    assert outcome.configuration == ("held",) and outcome.status is InstanceStatus.RUNNING
    assert engine.send(handle, "hold", key="h") is None  # send's return type is unchanged


def test_a_receipt_of_a_message_never_processed_says_so(make_engine: EngineFactory) -> None:
    """A message left in the inbox of an instance cancelled first resolves as not processed."""
    engine = make_engine([REVIEW])
    handle = engine.start("review")
    engine.cancel(handle)
    receipt = engine.send_receipt(handle, "note", key="late")
    engine.run_until_idle()
    outcome = receipt.wait(timeout=5)
    assert not outcome.processed and outcome.version is None
    assert outcome.rejected == "the instance ended (cancelled) before processing it"


def test_result_async_waits_without_an_async_engine(make_engine: EngineFactory) -> None:
    """``await handle.result_async()`` returns the output once a runner thread finished the instance."""
    engine = make_engine([CHARGE], {"charge": charge}, runner=ThreadedRunner(workers=2, poll_interval=0.01))
    handle = engine.start("charge")
    assert asyncio.run(handle.result_async(timeout=20)) == {"amount": 5}


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_handle_in_another_process_sees_a_worker_finish(kind: str, tmp_path: Path) -> None:
    """A handle built in this process returns the result of a job another process started and a worker ran."""
    with store(kind, tmp_path) as (_, db, engine), worker(tmp_path, db, "--no-recovery") as running:
        (job,) = start_in_client(db, "job")
        handle = engine.handle(job)
        assert handle.chart == "job"
        assert handle.result(timeout=30) == {"n": 0}, running.output()
        assert engine.instance(job).record.owner == running.engine_id
        (gate,) = start_in_client(db, "gate")
        outcome = engine.send_and_wait(gate, "answer", key="form-9", timeout=30)
        assert outcome.configuration == ("answered",), running.output()
        assert outcome.status is InstanceStatus.DONE
        assert engine.handle(gate).result(timeout=10) is None
        running.terminate()


def test_a_handle_in_another_process_times_out_while_the_worker_waits(tmp_path: Path) -> None:
    """A handle on a gate a worker holds times out with TimeoutError while nobody answers."""
    with store("sqlite", tmp_path) as (_, db, engine), worker(tmp_path, db, "--no-recovery") as running:
        (gate,) = start_in_client(db, "gate")
        with pytest.raises(TimeoutError, match=r"is still running after 0\.5s"):
            engine.handle(gate).result(timeout=0.5)
        assert running.process.poll() is None
        running.terminate()
