"""Charts, tasks and a worker program for the multi-process fencing and chaos tests.

``order`` is one call tree: it fans out to one ``item`` child per member
(each item runs the task ``effect``), then runs the task ``flaky`` (which
fails its first attempt and is retried), waits on a timer, and finally waits
at a human gate for an ``answer`` sent from another process. It completes
with everything it gathered, so a test can check every outcome arrived.

Every task run appends two lines to the side-effect log named by
``CHAOS_EFFECTS`` (``start`` before its body, ``end`` after it): the
idempotency key, the worker's engine id, its process id and the wall-clock
time. When ``CHAOS_RELEASE`` names a file, ``effect`` blocks until that file
exists (at most ``HOLD_LIMIT`` seconds), so a test can freeze a worker while
its tasks are mid-flight.

Run as a program (``python -m tests.integration.chaos_charts --db ...``) it
serves the store as one :class:`~incarnate.Worker` with the short lease and
recovery settings the tests need, logging to standard error like
``incarnate worker``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from incarnate import Engine, RecoverySettings, Storage, TaskCall, ThreadedRunner, Worker
from incarnate.cli._worker import configure_logging
from statechart import Chart, Event, JsonValue, RetryPolicy, after, assign, final, invoke, state, transition

EFFECTS_VARIABLE = "CHAOS_EFFECTS"
RELEASE_VARIABLE = "CHAOS_RELEASE"
HOLD_LIMIT = 60.0
"""The longest ``effect`` waits for its release file, in seconds."""

WORKER = {"id": "not-a-worker"}
"""The engine id of the worker this process runs (set by :func:`main`)."""

log = logging.getLogger("incarnate.chaos")


# ------------------------------------------------------------------ charts


@attrs.frozen
class Item:
    """One member of an order: its name."""

    name: str = ""


ITEM = Chart(
    "item",
    state(
        "working",
        invoke=[invoke("effect", task="effect", input=lambda item: {"name": item.name})],
        on=[transition("done.invoke.effect", "finished")],
    ),
    final("finished", done_data=lambda item, event: event.data),
    context=Item,
)
"""A child that runs ``effect`` once and completes with its output."""


@attrs.frozen
class Order:
    """An order's members and what came back from its children, its retried task and its gate."""

    members: tuple[str, ...] = ("a", "b")
    items: dict[str, JsonValue] = attrs.field(factory=dict)
    flaky: JsonValue = None
    answer: JsonValue = None


def members(order: Order) -> dict[str, JsonValue]:
    """One ``item`` per member name."""
    return {name: {"name": name} for name in order.members}


def keep_items(order: Order, event: Event) -> Order:
    """Store every item's output (the fan-out's ``{member: output}``)."""
    assert isinstance(event.data, dict)
    return attrs.evolve(order, items=event.data)


def keep_flaky(order: Order, event: Event) -> Order:
    """Store the retried task's output."""
    return attrs.evolve(order, flaky=event.data)


def keep_answer(order: Order, event: Event) -> Order:
    """Store the gate's answer."""
    return attrs.evolve(order, answer=event.data)


def summary(order: Order, event: Event) -> JsonValue:
    """The order's output: every outcome it gathered."""
    return {"items": order.items, "flaky": order.flaky, "answer": order.answer}


ORDER = Chart(
    "order",
    state(
        "fanning",
        invoke=[invoke("items", chart="item", map=members)],
        on=[transition("done.invoke.items", "retrying", actions=[assign(keep_items)])],
    ),
    state(
        "retrying",
        invoke=[
            invoke(
                "flaky",
                task="flaky",
                input=lambda order: {"name": "flaky"},
                retry=RetryPolicy(max_attempts=3, backoff=0.2),
            )
        ],
        on=[
            transition("done.invoke.flaky", "pausing", actions=[assign(keep_flaky)]),
            transition("error.invoke.flaky", "failed"),
        ],
    ),
    state("pausing", on=[after(0.3, "gate")]),
    state("gate", on=[transition("answer", "done", actions=[assign(keep_answer)])]),
    final("done", done_data=summary),
    final("failed", done_data=summary),
    context=Order,
)
"""A call tree: fan-out children with side effects, a retried task, a timer, then a human gate."""

CHARTS: list[Chart[Any]] = [ITEM, ORDER]


# ------------------------------------------------------------------- tasks


def _log_effect(phase: str, call: TaskCall) -> None:
    path = os.environ.get(EFFECTS_VARIABLE)
    if path:
        # One short line per write with O_APPEND: lines of concurrent processes never interleave.
        who = f"{WORKER['id']} {os.getpid()}"
        line = f"{phase} {call.idempotency_key} {call.instance_id} {who} {time.time():.6f}\n"
        with open(path, "a", encoding="utf-8") as effects:
            effects.write(line)


def effect(call: TaskCall) -> JsonValue:
    """A side effect keyed by the idempotency key; blocks on the release file when one is named."""
    _log_effect("start", call)
    release = os.environ.get(RELEASE_VARIABLE)
    if release:
        deadline = time.monotonic() + HOLD_LIMIT
        while not Path(release).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
    else:
        time.sleep(random.uniform(0.05, 0.3))
    _log_effect("end", call)
    return {"key": call.idempotency_key, "by": WORKER["id"], "pid": os.getpid()}


def flaky(call: TaskCall) -> JsonValue:
    """Fails its first attempt; later attempts succeed."""
    _log_effect("start", call)
    time.sleep(random.uniform(0.02, 0.1))
    _log_effect("end", call)
    if call.attempt == 1:
        raise RuntimeError("the first attempt fails on purpose")
    return {"key": call.idempotency_key, "by": WORKER["id"], "attempt": call.attempt}


TASKS = {"effect": effect, "flaky": flaky}


# ------------------------------------------------------- the side-effect log


@attrs.frozen
class Run:
    """One run of a task body: its key, worker, process, start time and end time (None: never ended)."""

    key: str
    worker: str
    pid: int
    start: float
    end: float | None
    instance: str = ""
    """The task instance that ran (its id)."""


def read_runs(path: Path) -> list[Run]:
    """Every task run the side-effect log records, oldest start first."""
    if not path.exists():
        return []
    starts: dict[tuple[str, int], list[tuple[str, float]]] = defaultdict(list)
    ends: dict[tuple[str, int], list[float]] = defaultdict(list)
    instances: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        phase, key, instance, worker, pid_text, when_text = line.split()
        pid, when = int(pid_text), float(when_text)
        instances[key] = instance
        if phase == "start":
            starts[(key, pid)].append((worker, when))
        else:
            ends[(key, pid)].append(when)
    runs = []
    for (key, process), started in starts.items():
        ended = sorted(ends.get((key, process), []))
        for index, (worker, began) in enumerate(sorted(started, key=lambda s: s[1])):
            end = ended[index] if index < len(ended) else None
            runs.append(Run(key, worker, process, began, end, instances[key]))
    return sorted(runs, key=lambda run: run.start)


# ------------------------------------------------- worker processes (test side)

REPOSITORY = Path(__file__).resolve().parents[2]
STARTUP = 30.0
"""Seconds a worker process may take to import, open its store and log that it started."""


class WorkerProcess:
    """One worker process running :func:`main`; its log in a file."""

    def __init__(self, name: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.name = name
        self.process = process
        self.log_path = log_path
        self.engine_id = ""
        self.frozen = False

    @property
    def pid(self) -> int:
        """The process id."""
        return self.process.pid

    def output(self) -> str:
        """Everything the worker logged so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def running(self) -> bool:
        """Whether the process has not exited."""
        return self.process.poll() is None

    def wait_started(self, timeout: float = STARTUP) -> str:
        """Block until the worker logs that it started; returns its engine id."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = re.search(r" started on .* engine_id=(\S+)", self.output())
            if found:
                self.engine_id = found[1]
                return self.engine_id
            if not self.running():
                break
            time.sleep(0.05)
        raise AssertionError(f"worker {self.name} did not start:\n{self.output()}")

    def freeze(self) -> None:
        """SIGSTOP: the process stops where it stands (its heartbeat too)."""
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        """SIGCONT: the process carries on from where it was frozen."""
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL (thawed first, so it dies at once), and reap it; a no-op when it has exited."""
        if self.running():
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(10)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM (thawed first), wait for a graceful exit, killing it past ``timeout``; the exit code."""
        if self.running():
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait(10)


def spawn_worker(directory: Path, db: str, name: str, env: dict[str, str], *options: str) -> WorkerProcess:
    """Start a worker process (:func:`main`) on ``db``; the caller must kill it in a ``finally``."""
    log_path = directory / f"worker-{name}.log"
    command = [sys.executable, "-m", "tests.integration.chaos_charts", "--db", db, "--name", name, *options]
    with log_path.open("ab") as err:
        process = subprocess.Popen(
            command,
            cwd=REPOSITORY,
            stdout=err,
            stderr=err,
            env={**os.environ, **env},
        )
    return WorkerProcess(name, process, log_path)


@contextlib.contextmanager
def killing(processes: list[WorkerProcess]) -> Iterator[list[WorkerProcess]]:
    """Yield ``processes`` (a list the caller may extend); every one still running is killed at the end."""
    try:
        yield processes
    finally:
        for process in processes:
            with contextlib.suppress(Exception):
                process.kill()


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` until true (True), or until ``timeout`` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


# ------------------------------------------------------- the worker program


def main(argv: list[str] | None = None) -> int:
    """Serve ``--db`` as one worker until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="python -m tests.integration.chaos_charts")
    parser.add_argument("--db", required=True)
    parser.add_argument("--name", default="w")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--lease", type=float, default=2.0)
    parser.add_argument("--poll-interval", type=float, default=0.1)
    parser.add_argument("--ttl", type=float, default=0.5)
    parser.add_argument("--scan-interval", type=float, default=0.5)
    parser.add_argument("--no-recovery", action="store_true")
    args = parser.parse_args(argv)
    WORKER["id"] = engine_id = f"{args.name}-{os.getpid()}"
    configure_logging("info")
    recovery = (
        None
        if args.no_recovery
        else RecoverySettings(
            ttl=args.ttl,
            scan_interval=args.scan_interval,
            batch_size=8,
            worker_count=4,
            item_timeout=5.0,
            lease_duration=10.0,
        )
    )
    storage = Storage.from_url(args.db)
    runner = ThreadedRunner(workers=args.threads)
    with Engine(CHARTS, TASKS, storage=storage, runner=runner, engine_id=engine_id) as engine:
        Worker(engine, lease=args.lease, poll_interval=args.poll_interval, recovery=recovery).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
