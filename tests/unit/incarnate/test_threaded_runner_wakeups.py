"""The threaded runner wakes the thread that can act, at once, whatever its poll interval.

Each waiter has its own condition (workers for queued work, the timer
thread for an earlier deadline, ``wait_until_idle()`` for the end of work),
so these tests give the runner a poll interval far longer than any wait
they allow: a wake-up that went to the wrong waiter, or to none, would only
be noticed at the next poll and fail the test.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any
from uuid import UUID

from incarnate import ThreadedRunner

POLL = 30.0
"""The runner's poll interval: longer than every wait below."""

PROMPT = 2.0
"""What "at once" allows on a loaded machine."""


class Clock:
    def now(self) -> float:
        return time.monotonic()


class Recorder:
    """A stand-in for the engine: records which instances were processed, and when."""

    def __init__(self, work: float = 0.0) -> None:
        self.clock = Clock()
        self.work = work
        self.done: list[tuple[UUID, float]] = []
        self.lock = threading.Lock()

    def process(self, instance_id: UUID) -> Any:
        time.sleep(self.work)
        with self.lock:
            self.done.append((instance_id, time.monotonic()))
        return object()


def runner_for(engine: Recorder, workers: int = 2) -> ThreadedRunner:
    runner = ThreadedRunner(workers, poll_interval=POLL)
    runner.attach(engine)  # type: ignore[arg-type]  # the runner only calls process() and clock.now()
    return runner


def test_a_notified_instance_is_processed_at_once_and_idle_is_reported_at_once() -> None:
    engine = Recorder(work=0.05)
    runner = runner_for(engine)
    try:
        time.sleep(0.1)  # every worker waits for work
        ids = [uuid.uuid4() for _ in range(5)]
        begin = time.monotonic()
        for instance_id in ids:
            runner.notify(instance_id)
        assert runner.wait_until_idle(PROMPT)
        assert time.monotonic() - begin < PROMPT
        assert sorted(i for i, _ in engine.done) == sorted(ids)
    finally:
        runner.stop(timeout=5.0)


def test_an_earlier_deadline_wakes_the_timer_thread_sleeping_toward_a_later_one() -> None:
    engine = Recorder()
    runner = runner_for(engine)
    late, early = uuid.uuid4(), uuid.uuid4()
    try:
        time.sleep(0.1)
        now = time.monotonic()
        runner.notify_at(now + 20.0, late)  # the timer thread now sleeps toward this one
        time.sleep(0.1)
        runner.notify_at(now + 0.2, early)
        deadline = time.monotonic() + PROMPT + 0.2
        while time.monotonic() < deadline and not engine.done:
            time.sleep(0.02)
        assert [i for i, _ in engine.done] == [early]
        assert engine.done[0][1] >= now + 0.2
        assert runner.pending_timers() == [(now + 20.0, late)]
    finally:
        runner.stop(timeout=5.0)


def test_a_later_deadline_does_not_release_the_earlier_one_early() -> None:
    engine = Recorder()
    runner = runner_for(engine)
    first, second = uuid.uuid4(), uuid.uuid4()
    try:
        now = time.monotonic()
        runner.notify_at(now + 0.3, first)
        runner.notify_at(now + 0.6, second)
        deadline = time.monotonic() + PROMPT + 0.6
        while time.monotonic() < deadline and len(engine.done) < 2:
            time.sleep(0.02)
        assert [i for i, _ in engine.done] == [first, second]
        assert engine.done[0][1] >= now + 0.3 and engine.done[1][1] >= now + 0.6
    finally:
        runner.stop(timeout=5.0)


def test_stop_wakes_every_waiting_thread_at_once() -> None:
    runner = runner_for(Recorder(), workers=3)
    time.sleep(0.1)
    begin = time.monotonic()
    runner.stop(timeout=10.0)
    assert time.monotonic() - begin < PROMPT
