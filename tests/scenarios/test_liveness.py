"""Liveness of one threaded engine: work that failed on the store is retried once it answers again,
and timers fire on time while every task thread is blocked in a task body."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

from aggregates import InstanceStatus
from incarnate import Engine, Storage, TaskCall, ThreadedRunner
from statechart import Chart, JsonValue, after, final, invoke, state, transition

TIMED = Chart("timed", state("waiting", on=[after(1.0, "late")]), final("late"))
"""A root whose only work is a timer due one second after it starts."""

GATE = Chart("gate", state("waiting", on=[transition("approve", "approved")]), final("approved"))
"""A root that waits for ``approve``."""

BLOCKING = Chart(
    "blocking",
    state("working", invoke=[invoke("slow", task="block")], on=[transition("done.invoke.slow", "finished")]),
    final("finished"),
)
"""A root whose task body blocks until the test releases it."""


def wait_for(predicate: Callable[[], bool], timeout: float) -> float | None:
    """Poll ``predicate`` until it holds; the seconds it took, or None past ``timeout``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():
            return time.monotonic() - began
        time.sleep(0.02)
    return None


def test_work_that_failed_on_a_locked_store_is_retried(tmp_path: Path) -> None:
    """Timers and accepted events that fell due while another process held the write lock past the
    engine's lock timeout are processed once the lock is released: nothing is stranded."""
    path = str(tmp_path / "locked.db")
    storage = Storage.sqlite(path, lock_timeout=1)
    with Engine([TIMED, GATE], storage=storage, runner=ThreadedRunner(workers=2)) as engine:
        timed = [engine.start("timed") for _ in range(3)]
        gates = [engine.start("gate") for _ in range(2)]
        for gate in gates:
            engine.send(gate, "approve")
        blocker = sqlite3.connect(path, timeout=5)
        try:
            # The gates may step before the lock is taken; the timers fall due under it (1 s).
            blocker.execute("BEGIN EXCLUSIVE")
            time.sleep(2.5)  # past the timers' deadline and the engine's 1 s lock timeout
        finally:
            blocker.rollback()
            blocker.close()
        everyone = [*timed, *gates]

        def finished() -> bool:
            return all(engine.instance(i).record.status is InstanceStatus.DONE for i in everyone)

        took = wait_for(finished, timeout=15.0)
        assert took is not None, {str(i): engine.instance(i).record.status.value for i in everyone}
        assert not engine.runner.retrying()  # type: ignore[attr-defined]


def test_a_timer_fires_on_time_while_every_task_thread_is_blocked(tmp_path: Path) -> None:
    """Task bodies run on their own threads: a 1 s timer fires within 1.5 s although they all block."""
    release = threading.Event()
    started = threading.Semaphore(0)

    def block(call: TaskCall) -> JsonValue:
        started.release()
        release.wait(20.0)
        return "released"

    runner = ThreadedRunner(workers=2, task_workers=2)
    storage = Storage.sqlite(str(tmp_path / "busy.db"))
    with Engine([BLOCKING, TIMED], {"block": block}, storage=storage, runner=runner) as engine:
        try:
            blocked = [engine.start("blocking") for _ in range(3)]  # more tasks than task threads
            for _ in range(2):
                assert started.acquire(timeout=10.0), "the task threads did not start the bodies"
            began = time.monotonic()
            timed = engine.start("timed")
            took = wait_for(lambda: engine.instance(timed).record.status is InstanceStatus.DONE, 10.0)
            assert took is not None, "the timer never fired"
            assert time.monotonic() - began < 1.5, (
                f"the 1 s timer fired after {time.monotonic() - began:.2f}s"
            )
        finally:
            release.set()
        done = wait_for(
            lambda: all(engine.instance(b).record.status is InstanceStatus.DONE for b in blocked), 15.0
        )
        assert done is not None
