"""``SendReceipt.wait``: the step that consumed a message, read from the newest events back.

A receipt's answer is the ``Stepped`` (or ``EvidenceRejected``) event that
names its message as consumed, and the configuration that step left. It is
read newest first, down to that event (and, if a later event changed the
configuration, down to the nearest one that carries it), so a send's wait
costs the same on a long-lived instance as on a new one; the save that
consumes the message wakes a waiting receipt on the same engine.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aggregates import Instance
from incarnate import DeterministicRunner, Engine, SendReceipt, StepOutcome, Storage, _handles, _journal
from statechart import Chart, Event, assign, state, transition
from statechart.effects import Ignored


@attrs.frozen
class Tally:
    ticks: int = 0


def tick(tally: Tally, event: Event) -> Tally:
    return Tally(tally.ticks + 1)


RING = Chart(
    "ring",
    state("a", on=[transition("next", "b"), transition("stay", "a", actions=[assign(tick)])]),
    state(
        "b",
        state("b1", on=[transition("down", "b2")]),
        state("b2"),
        on=[transition("next", "c"), transition("stay", "b", actions=[assign(tick)])],
    ),
    state("c", on=[transition("next", "a")]),
    context=Tally,
    description="Three states in a ring; 'stay' counts without changing the configuration.",
)


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    with Engine(
        [RING], storage=Storage.sqlite(str(tmp_path / "receipts.db")), runner=DeterministicRunner()
    ) as built:
        yield built


def decoded_rows(engine: Engine) -> list[int]:
    """Count the stored events decoded from now on (one entry per page read, its length)."""
    counts: list[int] = []
    events = engine.parts.journal.events
    original = events.get

    def counting(*args: Any, **kwargs: Any) -> Any:
        found = list(original(*args, **kwargs))
        counts.append(len(found))
        return iter(found)

    events.get = counting  # type: ignore[method-assign]
    return counts


def folded(engine: Engine, receipt: SendReceipt) -> StepOutcome:
    """The outcome as a fold of the whole history from the oldest event computes it (the reference)."""
    record = engine.instance(receipt.instance_id).record
    configuration: tuple[str, ...] = ()
    for event in engine.events_of(receipt.instance_id):
        if isinstance(event, Instance.Stepped):
            configuration = event.configuration_after(configuration)
        elif isinstance(event, Instance.Migrated):
            configuration = tuple(event.snapshot.get("configuration", ()))
        if getattr(event, "consumed", None) != receipt.seq:
            continue
        if isinstance(event, Instance.Stepped):
            ignored = any(type(effect) is Ignored for effect in event.effects)
            return StepOutcome(
                receipt.instance_id,
                receipt.seq,
                event.originator_version,
                configuration,
                record.status,
                ignored=ignored,
            )
        return StepOutcome(
            receipt.instance_id, receipt.seq, event.originator_version, (), record.status, "rejected"
        )
    raise AssertionError(f"no event consumed message {receipt.seq}")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(["next", "stay", "down", "nothing"]), min_size=1, max_size=25))
def test_a_receipt_answers_what_a_fold_of_the_whole_history_answers(tmp_path: Path, names: list[str]) -> None:
    """Read right after its step and again after every later one, each receipt equals the reference."""
    with Engine(
        [RING], storage=Storage.sqlite(str(tmp_path / f"{uuid.uuid4().hex}.db")), runner=DeterministicRunner()
    ) as engine:
        ring = engine.start(RING)
        engine.run_until_idle()
        receipts: list[SendReceipt] = []
        for name in names:
            receipts.append(engine.send_receipt(ring, name))
            engine.run_until_idle()
            assert receipts[-1].wait(timeout=5) == folded(engine, receipts[-1])
        for receipt in receipts:
            outcome = receipt.wait(timeout=5)
            assert outcome == folded(engine, receipt)
            assert outcome.ignored or names[receipt.seq - 1] != "nothing"  # no state takes it


def test_a_wait_reads_the_newest_events_only(engine: Engine) -> None:
    """On an instance with hundreds of events, a wait reads one page of the newest."""
    ring = engine.start(RING)
    engine.run_until_idle()
    for _ in range(300):
        engine.send(ring, "stay")
    engine.run_until_idle()
    counts = decoded_rows(engine)
    receipt = engine.send_receipt(ring, "stay")
    engine.run_until_idle()
    outcome = receipt.wait(timeout=5)
    assert outcome.configuration == ("a",) and outcome.version == engine.instance(ring).version
    assert counts == [_journal.FIRST_PAGE]


def test_a_configuration_changed_since_is_read_back_to_the_step_that_left_it(engine: Engine) -> None:
    ring = engine.start(RING)
    engine.run_until_idle()
    entered = engine.send_receipt(ring, "next")  # a -> b.b1: the step carries its configuration
    engine.run_until_idle()
    counted = engine.send_receipt(ring, "stay")  # b -> b: carries none (unchanged)
    engine.run_until_idle()
    for _ in range(30):
        engine.send(ring, "stay")
    engine.send(ring, "down")  # b1 -> b2: a later change
    engine.run_until_idle()
    assert entered.wait(timeout=5).configuration == counted.wait(timeout=5).configuration == ("b", "b1")
    latest = engine.send_receipt(ring, "nothing")  # ignored: carries no configuration, the current one holds
    engine.run_until_idle()
    assert latest.wait(timeout=5).configuration == ("b", "b2")


def test_a_receipt_read_by_another_engine_over_the_store_agrees(engine: Engine) -> None:
    ring = engine.start(RING)
    engine.run_until_idle()
    receipts = [engine.send_receipt(ring, name) for name in ("stay", "next", "nothing", "next")]
    engine.run_until_idle()
    with Engine([RING], storage=engine.parts.storage, runner=DeterministicRunner()) as reader:
        for receipt in receipts:
            elsewhere = SendReceipt(reader, receipt.instance_id, receipt.seq, receipt.key)
            assert elsewhere.wait(timeout=5) == receipt.wait(timeout=5) == folded(engine, receipt)


def test_the_newest_events_come_page_by_page_in_reverse_order(engine: Engine) -> None:
    ring = engine.start(RING)
    engine.run_until_idle()
    for _ in range(40):
        engine.send(ring, "stay")
    engine.run_until_idle()
    oldest_first = engine.events_of(ring)
    counts = decoded_rows(engine)
    newest = list(engine.events_of(ring, newest_first=True))
    assert [e.originator_version for e in newest] == [e.originator_version for e in reversed(oldest_first)]
    first = _journal.FIRST_PAGE
    assert counts[:3] == [first, 2 * first, 4 * first] and sum(counts) == len(newest)
    assert list(engine.events_of(uuid.uuid4(), newest_first=True)) == []


@pytest.mark.parametrize("awaited", [False, True], ids=["blocking", "awaited"])
def test_a_waiting_receipt_is_woken_by_the_save_that_consumes_its_message(
    engine: Engine, monkeypatch: pytest.MonkeyPatch, awaited: bool
) -> None:
    """With 30 s between two reads, only the wake brings the outcome before the 10 s deadline."""
    monkeypatch.setattr(_handles, "FIRST_POLL", 30.0)
    ring = engine.start(RING)
    engine.run_until_idle()
    receipt = engine.send_receipt(ring, "next")  # accepted; the deterministic runner has not stepped it
    stepping: list[threading.Thread] = []
    read = receipt._read

    def first_read_steps_it_later() -> StepOutcome | None:
        found = read()
        if not stepping:
            assert found is None
            stepping.append(threading.Thread(target=engine.run_until_idle))
            stepping[0].start()
        return found

    monkeypatch.setattr(receipt, "_read", first_read_steps_it_later)
    began = time.monotonic()
    outcome = asyncio.run(receipt.wait_async(timeout=10.0)) if awaited else receipt.wait(timeout=10.0)
    assert outcome.configuration == ("b", "b1")
    assert time.monotonic() - began < 5.0  # unwoken, the second read comes at the 10 s deadline
    stepping[0].join(10.0)


def test_watching_every_save_stops_with_its_block(engine: Engine) -> None:
    ring = engine.start(RING)
    engine.run_until_idle()
    woken: list[str] = []
    with engine.watch(ring, lambda: woken.append("ring"), every_save=True):
        engine.send(ring, "stay")  # the acceptance is a save
        engine.run_until_idle()  # and so is the step
    engine.send(ring, "stay")
    engine.run_until_idle()
    assert woken == ["ring", "ring"]
    assert engine.parts.copies._saving == {}
