"""Thread safety and the threaded runner: full caches under many threads; work without ``start()``."""

from __future__ import annotations

import functools
import random
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import ConfigurationError, Engine, Storage, ThreadedRunner, VirtualClock
from incarnate._engine import forget_memory_store
from incarnate.testing import restart
from statechart import Chart, Event, assign, history, start, state, step, transition
from tests.scenarios import charts
from tests.scenarios.conftest import EngineFactory

ROUNDS = 6
"""Fresh engines per test; races show within a few rounds once every cache is full."""

INSTANCES = 24
SENDERS = 8
SENDS_PER_SENDER = 30


@attrs.frozen
class Count:
    """Context of the counter chart: how many ticks it took."""

    ticks: int = 0


def tick(count: Count, event: Event) -> Count:
    return attrs.evolve(count, ticks=count.ticks + 1)


def counter_chart() -> Chart[Count]:
    """A fresh counter chart (fresh chart caches) with a deep history to leave and re-enter."""
    return Chart(
        "counter",
        state(
            "on",
            state("low", on=[transition("flip", "high")]),
            state("high", on=[transition("flip", "low")]),
            history("memory", deep=True, default="low"),
            on=[transition("tick", actions=[assign(tick)]), transition("pause", "off")],
        ),
        state("off", on=[transition("resume", "memory"), transition("tick", actions=[assign(tick)])]),
        context=Count,
    )


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads as often as the interpreter allows, to provoke races."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def run_threads(targets: list[Callable[[], None]]) -> list[BaseException]:
    """Run each target on its own thread; returns what they raised."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(targets))

    def guarded(target: Callable[[], None]) -> None:
        try:
            barrier.wait(10.0)
            target()
        except BaseException as error:  # noqa: BLE001 - collected and reported by the test
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60.0)
    assert not any(thread.is_alive() for thread in threads), "a thread did not finish within 60 s"
    return errors


def hammer(engine: Engine, ids: list[uuid.UUID], seed: int, sent: dict[uuid.UUID, int]) -> None:
    """Send, read and process at random, counting the ticks sent per instance."""
    chooser = random.Random(seed)
    for _ in range(SENDS_PER_SENDER):
        instance_id = chooser.choice(ids)
        engine.send(instance_id, chooser.choice(["tick", "flip", "pause", "resume"]))
        engine.send(instance_id, "tick")
        sent[instance_id] += 1  # one sender per dict: no lock needed
        engine.snapshot(chooser.choice(ids))
        engine.process(chooser.choice(ids))


def stress_round(storage: Storage) -> None:
    """Sixteen workers and eight senders on an engine caching four instances; no error, no lost tick."""
    runner = ThreadedRunner(workers=16, poll_interval=0.01)
    engine = Engine([counter_chart()], storage=storage, clock=VirtualClock(0.0), runner=runner, cache_size=4)
    try:
        ids: list[uuid.UUID] = [engine.start("counter") for _ in range(INSTANCES)]
        sent = [dict.fromkeys(ids, 0) for _ in range(SENDERS)]
        errors = run_threads([functools.partial(hammer, engine, ids, n, sent[n]) for n in range(SENDERS)])
        assert errors == []
        assert runner.wait_until_idle(30.0)
        assert list(runner.errors) == []
        for instance_id in ids:
            ticks = engine.snapshot(instance_id).context.ticks
            assert ticks >= sum(counts[instance_id] for counts in sent), f"{instance_id} lost ticks"
    finally:
        engine.close()


@pytest.mark.parametrize("kind", ["popo", "sqlite"])
def test_small_caches_stay_consistent_under_many_threads(
    kind: str, tmp_path: Path, fast_switching: None
) -> None:
    """Many threads on an engine caching four instances raise nothing and lose no tick."""
    for n in range(ROUNDS if kind == "popo" else 2):
        if kind == "sqlite":
            stress_round(Storage.sqlite(str(tmp_path / f"round-{n}.db")))
            continue
        name = f"threads-{uuid.uuid4().hex}"
        try:
            stress_round(Storage.popo(name))
        finally:
            forget_memory_store(name)


def step_script(chart: Chart[Count], script: list[str]) -> list[tuple[tuple[str, ...], int]]:
    """Start ``chart`` and step it through ``script``; the configuration and tick count after each event."""
    snapshot, _ = start(chart)
    seen = []
    for name in script:
        snapshot, _ = step(chart, snapshot, Event(name))
        seen.append((snapshot.configuration, snapshot.context.ticks))
    return seen


def test_one_chart_stepped_from_many_threads_agrees_with_one_thread(fast_switching: None) -> None:
    """A fresh chart stepped by sixteen threads at once computes what a single thread computes."""
    script = ["flip", "pause", "resume", "flip", "tick", "pause", "tick", "resume", "flip"] * 8
    expected = step_script(counter_chart(), script)
    for _ in range(ROUNDS):
        chart = counter_chart()
        results: list[object] = []

        def run(chart: Chart[Count] = chart, results: list[object] = results) -> None:
            results.append(step_script(chart, script))

        assert run_threads([run] * 16) == []
        assert results == [expected] * 16


# ------------------------------------------------- the runner starts on its own


def wait_for(condition: Callable[[], bool], timeout: float = 20.0) -> bool:
    """Poll ``condition()`` until true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def worker_threads() -> list[threading.Thread]:
    """The threaded runners' threads alive in this process."""
    return [t for t in threading.enumerate() if t.name.startswith(("incarnate-worker-", "incarnate-timers"))]


def test_an_engine_with_a_threaded_runner_works_without_start(make_engine: EngineFactory) -> None:
    """An engine given a ThreadedRunner runs a family and a human gate with no ``start()`` call."""
    runner = ThreadedRunner(workers=2)
    engine = make_engine(charts.ALL, {"charge": lambda call: "ok"}, runner=runner)
    gate = engine.start("gate")
    engine.send(gate, "answer", {"ok": True})
    assert wait_for(lambda: engine.instance(gate).record.status is InstanceStatus.DONE)
    parent = engine.start("parent", {"members": ["a", "b"]})
    assert wait_for(lambda: len(engine.children(parent)) == 2 and runner.idle())
    for kid in engine.children(parent):
        engine.send(kid.id, "finish")
    assert wait_for(lambda: engine.snapshot(parent).configuration == ("reviewing",))
    assert list(runner.errors) == []


def test_start_is_idempotent_and_close_stops_the_threads(tmp_path: Path) -> None:
    """A second ``start()`` adds no threads, ``close()`` stops them, and ``restart`` runs the next engine."""
    before = len(worker_threads())
    runner = ThreadedRunner(workers=3)
    engine = Engine([charts.GATE], storage=Storage.sqlite(str(tmp_path / "one.db")), runner=runner)
    assert len(worker_threads()) == before + 4  # three workers and the timer thread
    runner.start()
    assert len(worker_threads()) == before + 4
    gate = engine.start("gate")
    fresh = restart(engine)
    assert wait_for(lambda: len(worker_threads()) == before + 4)  # the old threads stopped, new ones run
    try:
        fresh.send(gate, "answer")
        assert wait_for(lambda: fresh.instance(gate).record.status is InstanceStatus.DONE)
    finally:
        fresh.close()
    assert wait_for(lambda: len(worker_threads()) == before)


def test_a_threaded_runner_needs_a_worker() -> None:
    """Asking for no worker thread is a configuration error that says how many to pass."""
    with pytest.raises(ConfigurationError, match=r"got workers=0; pass ThreadedRunner\(workers=1\) or more"):
        ThreadedRunner(workers=0)


def test_an_engine_needs_room_in_its_caches(tmp_path: Path) -> None:
    """A cache size below one instance is a configuration error naming the default."""
    with pytest.raises(ConfigurationError, match="cache_size must be at least 1 instance, got 0"):
        Engine([charts.GATE], storage=Storage.sqlite(str(tmp_path / "x.db")), cache_size=0)
