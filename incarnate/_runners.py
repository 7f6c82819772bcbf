"""Runners: who works through the instances that have something to do.

The :class:`DeterministicRunner` does everything on the calling thread, in
a fixed order, when asked (tests, simulations, the demo). The
:class:`ThreadedRunner` keeps a pool of worker threads and a timer thread,
started when the runner is attached to an engine; ``stop()`` (which
``Engine.close()`` calls) lets in-flight units of work finish and starts no
new ones.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import attrs

from incarnate._clock import Clock
from incarnate.errors import ConfigurationError

if TYPE_CHECKING:
    from incarnate._process import Decision

log = logging.getLogger("incarnate.runner")


class Workplace(Protocol):
    """What a runner uses of the :class:`~incarnate.Engine` it works for, and nothing more."""

    @property
    def clock(self) -> Clock:
        """The time deadlines are read against."""
        ...

    def require_tasks(self) -> None:
        """Raise unless every task the charts invoke is registered (called before work runs)."""
        ...

    def process(self, instance_id: UUID) -> Decision | None:
        """Commit and enact the next unit of work of one instance; None when it is idle."""
        ...


class DeterministicRunner:
    """Single-threaded: work happens only inside :meth:`run_until_idle`, in FIFO order."""

    def __init__(self) -> None:
        self.engine: Workplace | None = None
        self.queue: deque[UUID] = deque()
        self.queued: set[UUID] = set()
        self.timers: list[tuple[float, int, UUID]] = []
        self._sequence = 0
        self.units = 0
        self._working = False

    def attach(self, engine: Workplace) -> None:
        self.engine = engine

    @contextlib.contextmanager
    def inline(self, instance_id: UUID) -> Iterator[bool]:
        """Whether work on ``instance_id`` may happen now: only inside :meth:`run_until_idle`.

        A task's outcome and its parent's next macrostep then commit
        together; a ``send`` from outside only accepts its message.
        """
        yield self._working

    def notify(self, instance_id: UUID) -> None:
        if instance_id not in self.queued:
            self.queued.add(instance_id)
            self.queue.append(instance_id)

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        self._sequence += 1
        heapq.heappush(self.timers, (deadline, self._sequence, instance_id))

    def _release_due(self) -> None:
        assert self.engine is not None
        now = self.engine.clock.now()
        while self.timers and self.timers[0][0] <= now:
            _, _, instance_id = heapq.heappop(self.timers)
            self.notify(instance_id)

    def run_until_idle(self, max_units: int = 100_000) -> int:
        """Process queued and due instances until none has work left."""
        if self._working:
            raise RuntimeError("run_until_idle() was called from work it is doing (an action or a task)")
        assert self.engine is not None
        self.engine.require_tasks()
        self._working = True
        try:
            return self._run(max_units)
        finally:
            self._working = False

    def _run(self, max_units: int) -> int:
        assert self.engine is not None
        done = 0
        self._release_due()
        while self.queue:
            if done >= max_units:
                raise RuntimeError(
                    f"still busy after {max_units} units of work; an instance may be looping "
                    "(a chart that keeps sending itself events)"
                )
            instance_id = self.queue.popleft()
            self.queued.discard(instance_id)
            decision = self.engine.process(instance_id)
            if decision is not None:
                done += 1
                self.units += 1
            self._release_due()
        return done

    def next_deadline(self) -> float | None:
        """The earliest watched deadline, if any."""
        return self.timers[0][0] if self.timers else None

    def pending_timers(self) -> list[tuple[float, UUID]]:
        """The watched deadlines not released yet, earliest first, each (deadline, instance) once."""
        return sorted({(deadline, instance_id) for deadline, _, instance_id in self.timers})

    def stop(self) -> None:
        self.queue.clear()
        self.queued.clear()


class TaskDeferred(Exception):
    """Raised on a macrostep thread that met a task body to run: the runner hands it to a task thread."""


_LANE = threading.local()
"""Which of a threaded runner's lanes the current thread serves (``steps``), if any."""


def on_step_lane() -> bool:
    """Whether the calling thread is one of a threaded runner's macrostep threads (no task bodies there)."""
    return getattr(_LANE, "steps", False)


def notify_due_task(runner: Any, instance_id: UUID) -> None:
    """Tell ``runner`` that a task's body is due: on its task lane (``notify_task``) when it has one."""
    notify: Callable[[UUID], None] = getattr(runner, "notify_task", None) or runner.notify
    notify(instance_id)


@attrs.frozen
class RunnerLoad:
    """What a threaded runner is doing at one moment (each count is of distinct instances)."""

    running: int
    """Instances a thread is working on now: a macrostep or task thread, or a send consuming its message."""
    queued: int
    """Instances waiting for a macrostep thread or a task thread."""
    retrying: int
    """Instances whose last unit of work raised, to be tried again (:meth:`ThreadedRunner.retrying`)."""
    timers: int
    """Deadlines the timer thread watches that are not due yet."""


RETRY_BACKOFF = 0.05
"""Seconds before the first retry of a unit of work that raised (a store outage, say); doubled per failure."""
MAX_RETRY_BACKOFF = 5.0
"""The longest wait between two retries of a failing unit of work, in seconds."""
IDLE_WAIT = 5.0
"""The longest an idle macrostep or task thread sleeps without being notified (it is, for all work)."""


class ThreadedRunner:
    """A pool of macrostep threads, a pool of task threads and a timer thread.

    The threads start when the runner is attached to an engine (the engine
    does that when it is built), so the engine processes what it is sent
    without further calls; ``Engine.close()`` stops them. An instance is
    worked on by one thread at a time; a notification that arrives while it
    is being worked on makes the runner look at it again. A message sent
    through the engine to an instance it runs is consumed by the sending
    thread in the commit that accepts it, when no thread is on that
    instance (see :meth:`inline`).

    Task bodies run on their own ``task_workers`` threads (default: as many
    as ``workers``), never on a macrostep thread: however long tasks block,
    timers fire and events are stepped on time. A unit of work that raises
    (the store is down, a lock is held too long) is tried again after a
    backoff that doubles from :data:`RETRY_BACKOFF` up to
    :data:`MAX_RETRY_BACKOFF` seconds, until it commits, parks or is fenced:
    a store outage strands nothing.

    Idle macrostep and task threads sleep until work is queued for them
    (each notification wakes one); only the timer thread looks at the
    engine's clock every ``poll_interval`` seconds, since a virtual clock
    moves without telling anyone.
    """

    def __init__(
        self, workers: int = 4, *, task_workers: int | None = None, poll_interval: float = 0.05
    ) -> None:
        if workers < 1:
            raise ConfigurationError(
                f"a threaded runner needs at least one worker, got workers={workers}; "
                "pass ThreadedRunner(workers=1) or more"
            )
        if task_workers is not None and task_workers < 1:
            raise ConfigurationError(
                f"a threaded runner needs at least one task thread, got task_workers={task_workers}; "
                "leave it out (as many as workers) or pass 1 or more"
            )
        self.workers = workers
        self.task_workers = workers if task_workers is None else task_workers
        self.poll_interval = poll_interval
        self.engine: Workplace | None = None
        self._lock = threading.Lock()
        # Each kind of waiter has its own condition over the one lock, so a send or a finished
        # unit wakes only who can act on it: a macrostep or a task thread for queued work, the
        # timer thread for an earlier deadline, wait_until_idle() callers once nothing is queued.
        self._ready = threading.Condition(self._lock)
        self._task_ready = threading.Condition(self._lock)
        self._alarm = threading.Condition(self._lock)
        self._quiet = threading.Condition(self._lock)
        self._queue: deque[UUID] = deque()
        self._queued: set[UUID] = set()
        self._tasks: deque[UUID] = deque()
        self._tasks_queued: set[UUID] = set()
        self._busy: set[UUID] = set()
        self._again: set[UUID] = set()
        self._timers: list[tuple[float, int, UUID]] = []
        # Retries of failed units, by the monotonic clock (the engine's may be virtual).
        self._retries: list[tuple[float, int, UUID]] = []
        self._failures: dict[UUID, int] = {}
        self._sequence = 0
        self._threads: list[threading.Thread] = []
        self._stopping = False
        self.units = 0
        self.errors: deque[BaseException] = deque(maxlen=100)
        """The last errors units of work raised (each was retried)."""

    def attach(self, engine: Workplace) -> None:
        """Bind to ``engine`` and start working for it."""
        self.engine = engine
        self.start()

    def start(self) -> None:
        """Start the threads (again after ``stop()``); a no-op while they run.

        Attaching to an engine starts them, so calling this is only needed
        to restart a stopped runner. Before the runner is attached there is
        nothing to work for, and the threads start on attachment.
        """
        with self._lock:  # the threads wait for this lock, so they start once all exist
            if self._threads or self.engine is None:
                return
            self._stopping = False
            for n in range(self.workers):
                self._spawn(self._work, f"incarnate-worker-{n}")
            for n in range(self.task_workers):
                self._spawn(self._run_tasks, f"incarnate-task-{n}")
            self._spawn(self._tick, "incarnate-timers")

    def _spawn(self, target: Callable[[], None], name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def notify(self, instance_id: UUID) -> None:
        with self._lock:
            self._enqueue(instance_id)

    def notify_task(self, instance_id: UUID) -> None:
        """``instance_id`` is a task child just born: its unit of work goes to a task thread directly.

        A task thread does what a step thread would (the same checks), then
        runs the body itself, instead of a step thread handing it over.
        """
        with self._lock:
            if instance_id not in self._queued:
                self._enqueue_task(instance_id)

    def _enqueue(self, instance_id: UUID) -> None:
        """Queue an instance once, waking one thread; one being worked on is looked at again afterwards.

        The lock is held.
        """
        if instance_id in self._busy:
            self._again.add(instance_id)
        elif instance_id not in self._queued and instance_id not in self._tasks_queued:
            self._queued.add(instance_id)
            self._queue.append(instance_id)
            self._ready.notify()

    def _enqueue_task(self, instance_id: UUID) -> None:
        """Queue a task whose body is due for a task thread (lock held)."""
        if instance_id in self._busy:
            self._again.add(instance_id)
        elif instance_id not in self._tasks_queued:
            self._tasks_queued.add(instance_id)
            self._tasks.append(instance_id)
            self._task_ready.notify()

    def _finished(self, instance_id: UUID) -> None:
        """A thread stopped working on ``instance_id`` (lock held): look again if asked, or report idle."""
        self._busy.discard(instance_id)
        if instance_id in self._again:
            self._again.discard(instance_id)
            self._enqueue(instance_id)
        elif not self._queue and not self._tasks and not self._busy:
            self._quiet.notify_all()

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        with self._lock:
            self._sequence += 1
            entry = (deadline, self._sequence, instance_id)
            heapq.heappush(self._timers, entry)
            if self._timers[0] is entry:
                self._alarm.notify()  # the timer thread sleeps until the earliest deadline

    @contextlib.contextmanager
    def inline(self, instance_id: UUID) -> Iterator[bool]:
        """Work on ``instance_id`` on the calling thread, as one of the workers would; yields whether allowed.

        Allowed while the runner runs and no worker is on the instance; it
        then counts as being worked on (one thread at a time, and
        :meth:`wait_until_idle` waits for it) until the block ends, and a
        notification meanwhile makes a worker look at it afterwards.
        ``Engine.send`` uses it to consume a message in the commit that
        accepts it.
        """
        with self._lock:
            allowed = bool(self._threads) and not self._stopping and instance_id not in self._busy
            if allowed:
                self._busy.add(instance_id)
        try:
            yield allowed
        finally:
            if allowed:
                with self._lock:
                    self._finished(instance_id)

    def _work(self) -> None:
        """A macrostep thread: steps instances; a task body it meets goes to the task threads."""
        self._serve(self._queue, self._queued, self._ready, steps=True)

    def _run_tasks(self) -> None:
        """A task thread: runs the bodies of tasks (and commits their outcomes)."""
        self._serve(self._tasks, self._tasks_queued, self._task_ready, steps=False)

    def _serve(
        self, queue: deque[UUID], queued: set[UUID], ready: threading.Condition, *, steps: bool
    ) -> None:
        """Take instances from ``queue`` one at a time until the runner stops."""
        _LANE.steps = steps
        while True:
            with self._lock:
                while not queue and not self._stopping:
                    ready.wait(IDLE_WAIT)  # each enqueue and stop() notifies: the bound is a safety net
                if self._stopping:
                    return
                instance_id = queue.popleft()
                queued.discard(instance_id)
                self._busy.add(instance_id)
            self._unit(instance_id)

    def _unit(self, instance_id: UUID) -> None:
        """One unit of work on ``instance_id`` (marked busy by the caller); a failure is retried later."""
        assert self.engine is not None
        decision = None
        deferred = False
        failed: BaseException | None = None
        try:
            decision = self.engine.process(instance_id)
        except TaskDeferred:
            deferred = True
        except Exception as error:  # noqa: BLE001 - retried with backoff; the thread never dies
            failed = error
        with self._lock:
            if decision is not None:
                self.units += 1
            if failed is None:
                self._failures.pop(instance_id, None)
            else:
                self._retry_later(instance_id, failed)
            self._finished(instance_id)
            if deferred:
                self._enqueue_task(instance_id)

    def _retry_later(self, instance_id: UUID, error: BaseException) -> None:
        """Schedule another try of a unit that raised, after a doubling backoff (lock held)."""
        failures = self._failures.get(instance_id, 0) + 1
        self._failures[instance_id] = failures
        delay = min(MAX_RETRY_BACKOFF, RETRY_BACKOFF * 2 ** (failures - 1))
        self.errors.append(error)
        # The first failure with its traceback; then one line each (the backoff bounds how often).
        log.warning(
            "work on %s failed (%s: %s); trying again in %.2gs (failure %d)",
            instance_id,
            type(error).__name__,
            error,
            delay,
            failures,
            exc_info=error if failures == 1 else None,
        )
        self._sequence += 1
        entry = (time.monotonic() + delay, self._sequence, instance_id)
        heapq.heappush(self._retries, entry)
        if self._retries[0] is entry:
            self._alarm.notify()

    def _tick(self) -> None:
        assert self.engine is not None
        while True:
            with self._lock:
                if self._stopping:
                    return
                now = self.engine.clock.now()
                while self._timers and self._timers[0][0] <= now:
                    _, _, instance_id = heapq.heappop(self._timers)
                    self._enqueue(instance_id)
                moment = time.monotonic()
                while self._retries and self._retries[0][0] <= moment:
                    _, _, instance_id = heapq.heappop(self._retries)
                    self._enqueue(instance_id)
                wait = self.poll_interval
                if self._timers:
                    wait = max(0.0, min(wait, self._timers[0][0] - now))
                if self._retries:
                    wait = max(0.0, min(wait, self._retries[0][0] - moment))
                self._alarm.wait(wait)

    def retrying(self) -> frozenset[UUID]:
        """The instances whose last unit of work raised and that wait for their retry."""
        with self._lock:
            return frozenset(self._failures)

    def load(self) -> RunnerLoad:
        """How many instances are being worked on, queued, waiting for a retry, and timed, right now."""
        with self._lock:
            return RunnerLoad(
                running=len(self._busy),
                queued=len(self._queued) + len(self._tasks_queued),
                retrying=len(self._failures),
                timers=len({(deadline, instance_id) for deadline, _, instance_id in self._timers}),
            )

    def working_on(self, instance_id: UUID) -> bool:
        """Whether ``instance_id`` is queued, being worked on, or waiting for a retry."""
        with self._lock:
            return (
                instance_id in self._busy
                or instance_id in self._queued
                or instance_id in self._tasks_queued
                or instance_id in self._failures
            )

    def next_deadline(self) -> float | None:
        """The earliest watched deadline not released yet, if any (also after ``stop()``)."""
        with self._lock:
            return self._timers[0][0] if self._timers else None

    def pending_timers(self) -> list[tuple[float, UUID]]:
        """The watched deadlines not released yet, earliest first, each (deadline, instance) once."""
        with self._lock:
            return sorted({(deadline, instance_id) for deadline, _, instance_id in self._timers})

    def idle(self) -> bool:
        """Whether nothing is queued or being worked on (timers and retries may still be pending)."""
        with self._lock:
            return not self._queue and not self._tasks and not self._busy

    def wait_until_idle(self, timeout: float = 10.0) -> bool:
        """Block until idle or ``timeout`` seconds passed; returns whether idle."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._queue or self._tasks or self._busy:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._quiet.wait(min(remaining, self.poll_interval))
        return True

    def run_until_idle(self, max_units: int = 100_000) -> int:
        """Wait for the workers to drain the queue (starting them if needed)."""
        self.start()
        before = self.units
        self.wait_until_idle(timeout=60.0)
        return self.units - before

    def stop(self, timeout: float = 10.0) -> None:
        """Let in-flight units finish, then stop every thread."""
        with self._lock:
            self._stopping = True
            for condition in (self._ready, self._task_ready, self._alarm, self._quiet):
                condition.notify_all()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()


class Idle:
    """A runner that runs nothing: its engine only accepts (the console, the HTTP ingress).

    A worker or ``incarnate recover`` does the work. Its engine beats no
    heartbeat (``runs_work``): a root it creates (a console's fork) is owned
    by an engine that is not live, so a worker takes it over at once.
    """

    runs_work = False

    def attach(self, engine: Any) -> None:
        """Nothing to bind."""

    def notify(self, instance_id: UUID) -> None:
        """Dropped: the instance's owner (a worker) picks the message up from the store."""

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        """Dropped: timers are armed by the engine that runs the instance."""

    def run_until_idle(self, max_units: int) -> int:
        """Nothing is ever run here."""
        return 0

    def stop(self) -> None:
        """Nothing runs, so nothing to stop."""
