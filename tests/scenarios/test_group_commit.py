"""Group commit on a real store: concurrent units share transactions, and one's conflict costs only itself."""

from __future__ import annotations

import threading
from uuid import UUID

import attrs
import pytest
from eventsourcing.persistence import IntegrityError

from aggregates import Instance
from incarnate import Engine, ThreadedRunner
from statechart import Chart, Event, assign, state, transition
from tests.scenarios.conftest import EngineFactory

WAIT = 30.0


@attrs.frozen
class Count:
    n: int = 0


def plus_one(count: Count, event: Event) -> Count:
    return Count(count.n + 1)


COUNTER = Chart(
    "group.counter",
    state("counting", on=[transition("tick", "counting", actions=[assign(plus_one)])]),
    context=Count,
)


def run_threads(count: int, work: object) -> list[BaseException]:
    """Run ``work(n)`` on ``count`` threads at once; the errors they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(count)

    def body(n: int) -> None:
        try:
            start.wait(WAIT)
            work(n)  # type: ignore[operator]
        except BaseException as error:  # noqa: BLE001 - reported to the test
            errors.append(error)

    threads = [threading.Thread(target=body, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
    assert not any(thread.is_alive() for thread in threads)
    return errors


def test_concurrent_sends_share_transactions_and_every_tick_is_counted_once(
    make_engine: EngineFactory,
) -> None:
    """Eight client threads tick 16 counters 5 times each: fewer transactions than units, nothing lost."""
    runner = ThreadedRunner(workers=4)
    engine = make_engine([COUNTER], runner=runner, commit_wait=0.005)
    ids = [engine.start("group.counter").id for _ in range(16)]
    assert runner.wait_until_idle(WAIT)
    before = (engine.parts.commits.group_commit.transactions, engine.parts.commits.group_commit.units)

    def tick(n: int) -> None:
        for _ in range(5):
            for instance_id in ids[n::8]:
                engine.send(instance_id, "tick")

    assert run_threads(8, tick) == []
    assert runner.wait_until_idle(WAIT)
    transactions = engine.parts.commits.group_commit.transactions - before[0]
    units = engine.parts.commits.group_commit.units - before[1]
    assert units >= 80 and transactions < units  # some transactions carried several units
    for instance_id in ids:
        assert engine.snapshot(instance_id).context == Count(5)
        events = engine.events_of(instance_id)
        steps = [e for e in events if isinstance(e, Instance.Stepped)]
        accepted = [e for e in events if isinstance(e, Instance.Accepted)]
        received = [e.received for e in steps if e.received is not None]
        assert len(steps) == 6  # the start, then 5 ticks
        assert len(accepted) + len(received) == 5  # each tick accepted once: alone, or by its macrostep


def stale_and_fresh(engine: Engine, stale_id: UUID, fresh_id: UUID) -> tuple[Instance, Instance]:
    """A copy of ``stale_id`` that another write has overtaken, and a current copy of ``fresh_id``."""
    stale = engine.instance(stale_id)
    overtaking = engine.instance(stale_id)
    overtaking.accept(Event("tick"), source=None, sent_at=engine.clock.now())
    engine.parts.commits.save_instances(overtaking)
    fresh = engine.instance(fresh_id)
    stale.accept(Event("tick"), source=None, sent_at=engine.clock.now())
    fresh.accept(Event("tick"), source=None, sent_at=engine.clock.now())
    return stale, fresh


def test_a_version_conflict_in_a_joint_transaction_costs_only_its_own_unit(
    make_engine: EngineFactory,
) -> None:
    """Two units meet in one transaction; the stale one fails alone, the other is stored."""
    engine = make_engine([COUNTER], commit_batch=2)
    a, b = (engine.start("group.counter").id for _ in range(2))
    stale, fresh = stale_and_fresh(engine, a, b)
    engine.parts.commits.group_commit.max_wait = WAIT  # the first to write waits for the other
    before = engine.parts.commits.group_commit.transactions
    units = [stale, fresh]
    outcomes: dict[UUID, BaseException | None] = {}

    def save(n: int) -> None:
        try:
            engine.parts.commits.save_instances(units[n])
        except IntegrityError as error:
            outcomes[units[n].id] = error
        else:
            outcomes[units[n].id] = None

    assert run_threads(2, save) == []
    assert isinstance(outcomes[a], IntegrityError) and outcomes[b] is None
    assert engine.parts.commits.group_commit.transactions - before == 3  # the joint one, then each alone
    assert len(engine.instance(b).record.inbox) == 1
    assert len(engine.instance(a).record.inbox) == 1  # the overtaking write's message only


@pytest.mark.parametrize("value", [0, -1, 1.5])
def test_a_bad_commit_batch_is_refused_before_the_store_is_opened(
    make_engine: EngineFactory, value: object
) -> None:
    from incarnate.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="commit_batch must be a whole number of at least 1"):
        make_engine([COUNTER], commit_batch=value)
