"""The fleet's liveness targets: flat memory, timers on time, prompt handover, fair spread.

Four sections, each against a target of the architecture's liveness
invariants (L2-L5), on one store (a SQLite file per run in a temporary
directory by default; ``--store postgres`` uses fresh schemas in the test
database):

* ``memory`` (L5): a worker process (a :class:`~incarnate.Worker` around a
  :class:`~incarnate.ThreadedRunner` engine, in a child process of its own,
  so that its resident set is its own) takes over and finishes small roots
  that this process starts in batches: three in four are a timer that fires
  at once, one in four runs a task. At checkpoints (a tenth, a quarter, half,
  three quarters and all of ``--instances``), once every instance started
  has finished, the child reports its resident set (``VmRSS`` after a full
  collection), its Python heap blocks and its holdings' sizes. The feed
  stops early once ``--budget`` seconds have passed, and reports there.
  Target: the resident set at the last report within +10 % of the first
  checkpoint's.
* ``timers`` (L4): an engine with ``ThreadedRunner(workers=2,
  task_workers=2)``, served by a worker, has every task thread blocked in a
  task body (more tasks started than threads); then roots with a 1 s timer
  start. Each timer's lateness is the time of the step it fired minus its
  deadline (both the engine's clock). A round without blocked tasks runs
  next to it for reference. Target: every timer at most 0.5 s late.
* ``handover`` (L2): an ``incarnate worker`` process holds call trees (a
  root waiting for a child at a human gate); a second worker, here, runs the
  default recovery settings (``scan_interval`` 5 s, ``ttl`` 30 s). The first
  gets SIGTERM at a random moment of the second's scan cycle; timed until
  the second holds every root. Target: within ``scan_interval + 2`` seconds.
* ``spread`` (L3): three ``incarnate worker`` processes, then a client here
  starts 30 call trees; the trees each worker took are counted. Target: 10
  +/- 4 each. Then one worker is killed (SIGKILL, 3 s lease) and how its trees
  spread over the other two is reported (no target).

Run ``python -m bench.liveness --help`` for the options.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import json
import math
import os
import random
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any
from uuid import UUID

import attrs

from aggregates import InstanceStatus
from incarnate import Engine, RecoverySettings, Storage, TaskCall, ThreadedRunner, Worker
from statechart import Chart, JsonValue, after, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/liveness.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = (
    "The fleet's liveness targets: a worker's memory over finished instances, timer lateness while "
    "every task thread blocks, handover after a graceful stop, and how new trees spread over workers."
)
"""What ``--help`` says the bench does."""

SECTIONS = ("memory", "timers", "handover", "spread")
STORES = ("sqlite", "postgres")

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: worker processes run there, so ``bench.liveness`` imports."""

CHARTS_PATH = "bench.liveness:CHARTS"
TASKS_PATH = "bench.liveness:TASKS"

STARTUP_SECONDS = 60.0
"""The longest a worker process may take to import, open its store and say it started."""

PG_HOST = os.environ.get("INCARNATE_TEST_PGHOST", "127.0.0.1")
PG_PORT = int(os.environ.get("INCARNATE_TEST_PGPORT", "5432"))
PG_DBNAME = os.environ.get("INCARNATE_TEST_PGDATABASE", "test")
PG_USERS = ("postgres", "root")
"""The test database of ``tests/stores.py``, and the users tried in turn."""

MEMORY_GROWTH_TARGET = 0.10
"""The resident set at the last checkpoint may exceed the first's by this fraction."""
CHECKPOINTS = (0.1, 0.25, 0.5, 0.75, 1.0)
"""Fractions of ``--instances`` at which the memory worker reports."""
FEED_BATCH = 250
"""Roots started back to back before the in-flight count is looked at again."""
MAX_IN_FLIGHT = 1_000
"""The feed waits while more instances than this are in flight (started, not finished)."""

TIMER_DELAY = 1.0
TIMER_LATENESS_TARGET = 0.5
BLOCKED_TASKS = 4
"""Blocking tasks started in the timers section: more than its two task threads."""

HANDOVER_SLACK = 2.0
"""The handover target is the survivor's ``scan_interval`` plus this many seconds."""

SPREAD_WORKERS = 3
SPREAD_TOLERANCE = 0.4
"""Each worker's share of new trees may be off the fair share by this fraction (10 +/- 4 of 30)."""
SPREAD_LEASE = 3.0
SPREAD_RECOVERY_TTL = 5.0
"""The spread workers' ``--recovery-ttl``: long enough that the followers, not a sweep, take the
client's new roots; short enough that a killed worker's trees move a few seconds after its lease."""


@attrs.frozen
class Sizes:
    """How much work each section does."""

    instances: int
    budget: float
    rounds: int
    timers: int
    trees: int
    roots: int


FULL = Sizes(instances=100_000, budget=210.0, rounds=3, timers=20, trees=50, roots=30)
QUICK = Sizes(instances=2_000, budget=60.0, rounds=1, timers=5, trees=5, roots=30)


# ---------------------------------------------------------------- charts

TICK = Chart(
    "bench.liveness.tick",
    state("waiting", on=[after(0.0, "done")]),
    final("done"),
    description="A root whose timer is due at once: the worker that takes it over finishes it.",
)

JOB = Chart(
    "bench.liveness.job",
    state("working", invoke=[invoke("job", task="noop")], on=[transition("done.invoke.job", "done")]),
    final("done"),
    description="A root that runs one task, then finishes.",
)

CHILD = Chart(
    "bench.liveness.child",
    state("waiting", on=[transition("finish", "finished")]),
    final("finished"),
    description="A child waiting at a human gate.",
)

TREE = Chart(
    "bench.liveness.tree",
    state(
        "waiting",
        invoke=[invoke("child", chart=CHILD.name)],
        on=[transition("done.invoke.child", "done")],
    ),
    final("done"),
    description="A root whose initial state invokes one child and waits for it.",
)

TIMED = Chart(
    "bench.liveness.timed",
    state("waiting", on=[after(TIMER_DELAY, "late")]),
    final("late"),
    description="A root whose only work is a timer due one second after it starts.",
)

BLOCKING = Chart(
    "bench.liveness.blocking",
    state("working", invoke=[invoke("slow", task="block")], on=[transition("done.invoke.slow", "done")]),
    final("done"),
    description="A root whose task body blocks until the bench releases it.",
)


def noop(call: TaskCall) -> JsonValue:
    """A task that returns at once."""
    return "ok"


CHARTS = [TICK, JOB, CHILD, TREE]
"""The charts of the worker processes: ``--charts bench.liveness:CHARTS``."""
TASKS = {"noop": noop}
"""Their tasks: ``--tasks bench.liveness:TASKS``."""


class CheckFailed(Exception):
    """A section did not see what the bench expects (a root never taken, a worker that did not start)."""


class StoreUnreachable(CheckFailed):
    """``--store postgres`` was asked for, and no server answers."""


def label() -> str:
    """A short unique suffix, for engine ids, groups and file names."""
    return uuid.uuid4().hex[:8]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value at least ``fraction`` of ``values`` do not exceed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def wait_until(condition: Callable[[], bool], timeout: float, interval: float, what: str) -> float:
    """Poll ``condition`` until it holds; the seconds it took. :class:`CheckFailed` past ``timeout``."""
    began = time.monotonic()
    while not condition():
        if time.monotonic() - began > timeout:
            raise CheckFailed(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)
    return time.monotonic() - began


# ---------------------------------------------------------------- stores


@attrs.frozen
class Backend:
    """One kind of store: how to make a fresh, empty store of it."""

    name: str
    description: str
    fresh: Callable[[str], Storage]


def sqlite_backend(directory: str) -> Backend:
    """One SQLite file per label, in ``directory``."""

    def fresh(name: str) -> Storage:
        return Storage.sqlite(os.path.join(directory, f"{name}-{label()}.db"))

    return Backend("sqlite", f"SQLite {sqlite3.sqlite_version}, one file per run in {directory}", fresh)


@contextlib.contextmanager
def postgres_backend() -> Iterator[Backend]:
    """Fresh schemas in the test database (``INCARNATE_TEST_PG*``), dropped afterwards.

    Raises :class:`StoreUnreachable` when no user of :data:`PG_USERS` can connect.
    """
    import psycopg
    from psycopg import sql

    connection: psycopg.Connection[Any] | None = None
    problems = []
    for user in PG_USERS:
        try:
            connection = psycopg.connect(
                host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, connect_timeout=3, autocommit=True
            )
            break
        except psycopg.OperationalError as error:
            problems.append(f"{user}: {str(error).strip().splitlines()[0]}")
    if connection is None:
        raise StoreUnreachable(
            f"PostgreSQL at {PG_HOST}:{PG_PORT}/{PG_DBNAME} is unreachable ({'; '.join(problems)})"
        )
    schemas: list[str] = []
    prefix = f"bench_liveness_{label()}"
    pg_user: str = connection.info.user

    def fresh(name: str) -> Storage:
        schema = f"{prefix}_{name}_{len(schemas)}"
        connection.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        schemas.append(schema)
        return Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=pg_user, schema=schema)

    server = connection.info.server_version
    with connection:
        try:
            yield Backend(
                "postgres",
                f"PostgreSQL {server // 10000}.{server % 10000}, {pg_user}@{PG_HOST}:{PG_PORT}/{PG_DBNAME}, "
                f"one schema {prefix}_* per run (dropped afterwards)",
                fresh,
            )
        finally:
            for schema in schemas:
                connection.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def client(storage: Storage) -> Engine:
    """A plain engine that never beats: what it starts is any worker's to take over at once."""
    return Engine(CHARTS, storage=storage, engine_id=f"bench-client-{label()}")


def owners(engine: Engine, roots: Sequence[UUID]) -> list[str]:
    """The owner of each root, read from the store."""
    return [engine.instance(root).record.owner for root in roots]


def in_flight(engine: Engine) -> list[str]:
    """The owner of every in-flight instance, from the listing (caught up first)."""
    engine.listing.catch_up()
    return [row.owner for row in engine.listing.rows(in_flight=True)]


# ------------------------------------------------------- worker processes


class WorkerProcess:
    """One ``incarnate worker`` process, its log in a file."""

    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log
        self.engine_id = ""

    def tail(self, lines: int = 15) -> str:
        """The last lines the process logged, for a failure message."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_started(self) -> None:
        """Block until the worker logs that it started, and keep its engine id."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            found = re.search(r" started on .* engine_id=(\S+)", self.log.read_text(errors="replace"))
            if found:
                self.engine_id = found[1]
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise CheckFailed(f"a worker process did not start:\n{self.tail()}")


@contextlib.contextmanager
def worker_processes(
    directory: str, storage: Storage, count: int, *options: str
) -> Iterator[list[WorkerProcess]]:
    """``count`` started ``incarnate worker`` processes (launched together); killed on the way out."""
    command = [
        sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--tasks", TASKS_PATH,
        "--db", storage.url(), *options,
    ]  # fmt: skip
    running: list[WorkerProcess] = []
    try:
        for _ in range(count):
            log = Path(directory) / f"worker-{label()}.log"
            with open(os.devnull, "wb") as out, log.open("wb") as err:
                running.append(
                    WorkerProcess(subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err), log)
                )
        for worker in running:
            worker.wait_started()
        yield running
    finally:
        for worker in running:
            if worker.process.poll() is None:
                worker.process.kill()
            worker.process.wait(10)


# ------------------------------------------------------------------ memory


@attrs.frozen
class MemoryPoint:
    """What the memory worker reported once every instance started so far had finished."""

    instances: int
    """Instances finished (roots and their tasks)."""
    roots: int
    rss_kib: int
    """``VmRSS`` after ``gc.collect()``."""
    peak_kib: int
    """``VmHWM``: the resident set's high-water mark."""
    blocks: int
    """``sys.getallocatedblocks()``: the Python heap's live blocks."""
    held: int
    acquired: int
    fenced: int
    seconds: float
    """Since the feed began."""


@attrs.frozen
class Memory:
    """The memory worker's reports, the first taken before any instance."""

    points: tuple[MemoryPoint, ...]
    wanted: int
    """The instances asked for (``--instances``)."""
    cache_size: int | None
    budget_spent: bool
    """Whether the feed stopped at ``--budget`` before ``wanted``."""


def proc_status_kib(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmRSS``, ``VmHWM``), or 0 where there is none."""
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return 0
    found = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
    return int(found[1]) if found else 0


def memory_report(engine: Engine) -> dict[str, int]:
    """The child's own numbers, after a full collection."""
    gc.collect()
    held, acquired, fenced = engine.parts.holdings.sizes()
    return {
        "rss_kib": proc_status_kib("VmRSS"),
        "peak_kib": proc_status_kib("VmHWM"),
        "blocks": sys.getallocatedblocks(),
        "held": held,
        "acquired": acquired,
        "fenced": fenced,
    }


def serve_memory(url: str, cache_size: int | None) -> int:
    """The memory worker (child process): serve ``url`` and answer ``measure`` on stdin, JSON on stdout."""
    options: dict[str, Any] = {} if cache_size is None else {"cache_size": cache_size}
    engine = Engine(
        CHARTS,
        TASKS,
        storage=Storage.from_url(url),
        runner=ThreadedRunner(workers=4),
        engine_id=f"bench-memory-{label()}",
        **options,
    )
    worker = Worker(engine, poll_interval=0.1)
    worker.start()

    def say(message: Mapping[str, object]) -> None:
        print(json.dumps(message), flush=True)

    say({"engine_id": engine.engine_id, **memory_report(engine)})
    for line in sys.stdin:
        if line.strip() != "measure":
            break
        say(memory_report(engine))
    worker.stop()
    engine.close()
    return 0


class MemoryChild:
    """The memory worker's process: ask it to measure, read its answers."""

    def __init__(self, directory: str, url: str, cache_size: int | None) -> None:
        self.log = Path(directory) / f"memory-{label()}.log"
        command = [sys.executable, "-m", "bench.liveness", "--memory-worker", url]
        if cache_size is not None:
            command += ["--cache-size", str(cache_size)]
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True
            )

    def read(self) -> dict[str, Any]:
        """The next JSON line the child prints."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            tail = "\n".join(self.log.read_text(errors="replace").splitlines()[-15:])
            raise CheckFailed(f"the memory worker exited:\n{tail}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def measure(self) -> dict[str, Any]:
        """Ask the child for its numbers now."""
        stdin: IO[str] | None = self.process.stdin
        assert stdin is not None
        stdin.write("measure\n")
        stdin.flush()
        return self.read()

    def close(self) -> None:
        """Let the child stop its worker and exit (killed if it does not within 30 s)."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def checkpoints(instances: int) -> list[int]:
    """The instance counts at which the memory worker reports."""
    return sorted({max(1, round(instances * fraction)) for fraction in CHECKPOINTS})


def measure_memory(
    backend: Backend, directory: str, instances: int, budget: float, cache_size: int | None
) -> Memory:
    """Feed a worker process small roots and read its memory at each checkpoint (see the module doc)."""
    storage = backend.fresh("memory")
    child = MemoryChild(directory, storage.url(), cache_size)
    points: list[MemoryPoint] = []
    spent = False
    try:
        first = child.read()

        def point(done: int, roots: int, seconds: float, report: dict[str, Any]) -> MemoryPoint:
            fields = {
                name: int(report[name]) for name in ("rss_kib", "peak_kib", "blocks", "held", "acquired")
            }
            return MemoryPoint(done, roots, fenced=int(report["fenced"]), seconds=seconds, **fields)

        points.append(point(0, 0, 0.0, first))
        with client(storage) as engine:
            started = roots = 0
            began = time.monotonic()
            for goal in checkpoints(instances):
                while started < goal:
                    if time.monotonic() - began > budget:
                        spent = True
                        break
                    for _ in range(FEED_BATCH):
                        if started >= goal:
                            break
                        job = roots % 4 == 3
                        engine.start(JOB.name if job else TICK.name)
                        roots += 1
                        started += 2 if job else 1
                    wait_until(
                        lambda: len(in_flight(engine)) <= MAX_IN_FLIGHT, 300.0, 0.05, "the worker keeping up"
                    )
                if started > points[-1].instances:
                    wait_until(
                        lambda: not in_flight(engine),
                        300.0,
                        0.05,
                        f"the worker finishing {started:,} instances",
                    )
                    points.append(point(started, roots, time.monotonic() - began, child.measure()))
                    progress = f"memory: {started:,} instances finished in {time.monotonic() - began:.0f} s"
                    print(progress, file=sys.stderr, flush=True)
                if spent:
                    break
    finally:
        child.close()
    return Memory(tuple(points), instances, cache_size, spent and points[-1].instances < instances)


MEMORY_HEADER = (
    f"{'instances':>9} {'roots':>7} {'feed s':>6} {'RSS MiB':>8} {'vs first':>8} {'KiB/1k':>7} "
    f"{'peak MiB':>8} {'heap blocks':>11} {'held':>5} {'acq':>5} {'fenced':>6}"
)


def memory_rows(result: Memory) -> Iterator[str]:
    """One row per report: the resident set, its growth from the first checkpoint, the holdings."""
    reference = result.points[1] if len(result.points) > 1 else result.points[0]
    for point in result.points:
        ratio = point.rss_kib / reference.rss_kib - 1
        per = "-"
        if point.instances > reference.instances:
            per = (
                f"{1000 * (point.rss_kib - reference.rss_kib) / (point.instances - reference.instances):.1f}"
            )
        yield (
            f"{point.instances:>9,} {point.roots:>7,} {point.seconds:>6.0f} {point.rss_kib / 1024:>8.1f} "
            f"{ratio:>+8.1%} {per:>7} {point.peak_kib / 1024:>8.1f} {point.blocks:>11,} {point.held:>5,} "
            f"{point.acquired:>5,} {point.fenced:>6,}"
        )


# ------------------------------------------------------------------ timers


@attrs.frozen
class Timers:
    """Lateness of each 1 s timer, in seconds, by variant (``blocked``: every task thread blocked)."""

    lateness: dict[str, tuple[float, ...]]
    rounds: int


def lateness_of(engine: Engine, instance_id: UUID) -> float:
    """The fired step's time minus the timer's deadline (the start's time plus the delay)."""
    events = engine.events_of(instance_id)
    started: datetime.datetime = events[0].timestamp
    fired: datetime.datetime = events[-1].timestamp
    return (fired - started).total_seconds() - TIMER_DELAY


def timer_round(storage: Storage, timers: int, blocked: bool) -> list[float]:
    """One engine served by a worker: block its task threads (or not), then time ``timers`` timers."""
    release = threading.Event()
    began = threading.Semaphore(0)

    def block(call: TaskCall) -> JsonValue:
        began.release()
        release.wait(60.0)
        return "released"

    runner = ThreadedRunner(workers=2, task_workers=2)
    engine = Engine([TIMED, BLOCKING], {"block": block}, storage=storage, runner=runner)
    try:
        with Worker(engine, poll_interval=0.5):
            try:
                if blocked:
                    for _ in range(BLOCKED_TASKS):
                        engine.start(BLOCKING.name)
                    for _ in range(runner.task_workers):
                        if not began.acquire(timeout=30.0):
                            raise CheckFailed("the task threads did not start the blocking bodies")
                gc.collect()
                roots = [engine.start(TIMED.name) for _ in range(timers)]

                def done() -> bool:
                    return all(engine.instance(root).record.status is InstanceStatus.DONE for root in roots)

                wait_until(done, 30.0, 0.1, f"{timers} timers firing")
                return [lateness_of(engine, root) for root in roots]
            finally:
                release.set()
    finally:
        engine.close()


def measure_timers(backend: Backend, timers: int, rounds: int) -> Timers:
    """Rounds of ``timers`` timers with every task thread blocked, and without tasks, taking turns."""
    lateness: dict[str, list[float]] = {"blocked": [], "no tasks": []}
    for n in range(rounds):
        for variant in common.rotated(list(lateness), n):
            lateness[variant] += timer_round(backend.fresh("timers"), timers, variant == "blocked")
    return Timers({variant: tuple(values) for variant, values in lateness.items()}, rounds)


TIMERS_HEADER = (
    f"{'tasks':<9} {'timers':>6} {'p50 s':>7} {'p95 s':>7} {'max s':>7}  (lateness after the 1 s deadline)"
)


def timers_rows(result: Timers) -> Iterator[str]:
    """One row per variant: the percentiles of the lateness over every round."""
    for variant, values in result.lateness.items():
        yield (
            f"{variant:<9} {len(values):>6} {percentile(values, 0.5):>7.3f} {percentile(values, 0.95):>7.3f} "
            f"{max(values):>7.3f}"
        )


# ---------------------------------------------------------------- handover


@attrs.frozen
class Handover:
    """From SIGTERM to a worker holding call trees until the survivor holds every root, per round."""

    trees: int
    scan_interval: float
    ttl: float
    phase: tuple[float, ...]
    """Seconds the survivor had run when the SIGTERM was sent."""
    exited: tuple[float, ...]
    """From the SIGTERM until the stopped worker's process exited."""
    retired: tuple[float, ...]
    """From the SIGTERM until the survivor read the stopped worker's heartbeat as retired."""
    moved: tuple[float, ...]
    """From the SIGTERM until the survivor held every root."""


def handover_round(
    backend: Backend, directory: str, trees: int, turn: int, rounds: int
) -> tuple[float, float, float, float]:
    """One worker process takes ``trees`` trees; SIGTERM it and time the survivor taking them all."""
    storage = backend.fresh("handover")
    group = f"bench-liveness-{label()}"
    settings = RecoverySettings()
    with (
        client(storage) as engine,
        worker_processes(directory, storage, 1, "--group", group) as (leaving,),
    ):
        roots = [engine.start(TREE.name) for _ in range(trees)]
        wait_until(
            lambda: in_flight(engine).count(leaving.engine_id) == 2 * trees,
            60.0 + 0.1 * trees,
            0.1,
            f"worker {leaving.engine_id} taking over {trees} trees",
        )
        survivor = Engine(
            CHARTS,
            TASKS,
            storage=storage,
            runner=ThreadedRunner(workers=4),
            engine_id=f"bench-survivor-{label()}",
        )
        try:
            with Worker(survivor, group=group, recovery=settings):
                # The stop falls anywhere in the survivor's scan cycle (the rounds spread over it).
                pause = 1.0 + settings.scan_interval * (turn + random.random()) / rounds
                time.sleep(pause)
                began = time.monotonic()
                leaving.process.send_signal(signal.SIGTERM)
                exited = retired = moved = math.inf
                deadline = began + settings.ttl + 3 * settings.scan_interval + 30.0
                while moved == math.inf or exited == math.inf:
                    now = time.monotonic()
                    if exited == math.inf and leaving.process.poll() is not None:
                        exited = now - began
                    if retired == math.inf:
                        beat = survivor.parts.coordination.heartbeats().get(leaving.engine_id)
                        if beat is not None and beat.retired:
                            retired = now - began
                    held = survivor.parts.holdings.held()
                    if moved == math.inf and all(root in held for root in roots):
                        moved = now - began
                    if now > deadline:
                        raise CheckFailed(
                            f"{sum(root in held for root in roots)} of {trees} roots moved "
                            f"{now - began:.0f} s after the SIGTERM"
                        )
                    time.sleep(0.01)
                if leaving.process.returncode != 0:
                    raise CheckFailed(
                        f"the stopped worker exited {leaving.process.returncode}:\n{leaving.tail()}"
                    )
            count = in_flight(engine).count(survivor.engine_id)
        finally:
            survivor.close()
    if count != 2 * trees:
        raise CheckFailed(f"the survivor owns {count} in-flight instances, expected {2 * trees}")
    return pause, exited, retired, moved


def measure_handover(backend: Backend, directory: str, trees: int, rounds: int) -> Handover:
    """``rounds`` graceful stops, each on a fresh store."""
    results = [handover_round(backend, directory, trees, n, rounds) for n in range(rounds)]
    settings = RecoverySettings()
    phase, exited, retired, moved = (tuple(column) for column in zip(*results, strict=True))
    print(
        f"check {backend.name} handover: {rounds} x {trees} trees stopped gracefully, each time every "
        f"root and child owned by the survivor: ok"
    )
    return Handover(trees, settings.scan_interval, settings.ttl, phase, exited, retired, moved)


HANDOVER_HEADER = (
    f"{'round':>5} {'trees':>5} {'scan s':>6} {'ttl s':>5} {'phase s':>7} {'exit s':>6} {'retired s':>9} "
    f"{'moved s':>7}  (from the SIGTERM)"
)


def handover_rows(result: Handover) -> Iterator[str]:
    """One row per round, then the medians."""
    columns = (result.phase, result.exited, result.retired, result.moved)
    rows: list[tuple[str, Sequence[float]]] = [
        (f"{n + 1}", values) for n, values in enumerate(zip(*columns, strict=True))
    ]
    rows.append(("median", [statistics.median(column) for column in columns]))
    for name, (phase, exited, retired, moved) in rows:
        yield (
            f"{name:>5} {result.trees:>5} {result.scan_interval:>6g} {result.ttl:>5g} {phase:>7.2f} "
            f"{exited:>6.2f} {retired:>9.2f} {moved:>7.2f}"
        )


# ------------------------------------------------------------------ spread


@attrs.frozen
class SpreadRound:
    """Where one round's new trees went, and where a killed worker's trees went next."""

    placed: tuple[int, ...]
    """Trees per worker, in the order the workers started."""
    placing: float
    """Seconds from the first start until every root had a worker."""
    killed: int
    """The index of the worker killed."""
    recovered: tuple[int, ...]
    """The killed worker's trees each survivor took (survivors in start order)."""
    moving: float
    """Seconds from the SIGKILL until every one of its roots had moved."""


@attrs.frozen
class Spread:
    """The rounds of the spread section."""

    roots: int
    rounds: tuple[SpreadRound, ...]


def spread_round(backend: Backend, directory: str, roots: int, turn: int) -> SpreadRound:
    """Three worker processes; a client starts ``roots`` trees; count them; kill one; count again."""
    storage = backend.fresh("spread")
    group = f"bench-liveness-{label()}"
    options = ("--group", group, "--lease", f"{SPREAD_LEASE:g}", "--recovery-ttl", f"{SPREAD_RECOVERY_TTL:g}")
    with client(storage) as engine, worker_processes(directory, storage, SPREAD_WORKERS, *options) as workers:
        ids = [worker.engine_id for worker in workers]
        started = [engine.start(TREE.name) for _ in range(roots)]
        placing = wait_until(
            lambda: all(owner in ids for owner in owners(engine, started)),
            60.0,
            0.05,
            f"{roots} roots placed",
        )
        where = owners(engine, started)
        placed = tuple(where.count(engine_id) for engine_id in ids)
        killed = turn % SPREAD_WORKERS
        victim = ids[killed]
        theirs = [root for root, owner in zip(started, where, strict=True) if owner == victim]
        survivors = [engine_id for engine_id in ids if engine_id != victim]
        workers[killed].process.kill()
        workers[killed].process.wait(10)
        moving = wait_until(
            lambda: all(owner in survivors for owner in owners(engine, theirs)),
            SPREAD_LEASE + SPREAD_RECOVERY_TTL + 60.0,
            0.05,
            f"the {len(theirs)} trees of the killed worker moving",
        )
        after_kill = owners(engine, theirs)
        recovered = tuple(after_kill.count(engine_id) for engine_id in survivors)
        for worker in workers:
            if worker.process.poll() is None:
                worker.process.send_signal(signal.SIGTERM)
        for worker in workers:
            worker.process.wait(30)
    return SpreadRound(placed, placing, killed, recovered, moving)


def measure_spread(backend: Backend, directory: str, roots: int, rounds: int) -> Spread:
    """``rounds`` rounds, each on a fresh store with fresh workers; a different worker killed each time."""
    result = Spread(roots, tuple(spread_round(backend, directory, roots, n) for n in range(rounds)))
    print(
        f"check {backend.name} spread: {rounds} x {roots} trees each taken by one of {SPREAD_WORKERS} "
        f"workers, and each killed worker's trees moved to the other two: ok"
    )
    return result


SPREAD_HEADER = (
    f"{'round':>5} {'trees':>5} {'per worker':<14} {'placed s':>8} {'killed':>6} {'its trees':>9} "
    f"{'to the others':<13} {'moved s':>7}"
)


def spread_rows(result: Spread) -> Iterator[str]:
    """One row per round: the trees per worker, and where the killed worker's trees went."""
    for n, spread in enumerate(result.rounds, 1):
        per = "/".join(str(count) for count in spread.placed)
        others = "/".join(str(count) for count in spread.recovered)
        yield (
            f"{n:>5} {result.roots:>5} {per:<14} {spread.placing:>8.2f} {'w' + str(spread.killed + 1):>6} "
            f"{sum(spread.recovered):>9} {others:<13} {spread.moving:>7.2f}"
        )


# ----------------------------------------------------------------- targets


@attrs.frozen
class Target:
    """One row of the summary: a measured value against its target."""

    section: str
    measure: str
    measured: str
    wanted: str
    verdict: str
    """``pass``, ``miss``, or ``-`` without a target."""


def memory_target(result: Memory) -> Target:
    """The resident set at the last checkpoint reached over the first checkpoint's."""
    if len(result.points) < 3:
        return Target("memory", "RSS growth", "too few checkpoints", f"<= +{MEMORY_GROWTH_TARGET:.0%}", "-")
    first, last = result.points[1], result.points[-1]
    growth = last.rss_kib / first.rss_kib - 1
    reached = " (budget)" if result.budget_spent else ""
    return Target(
        "memory",
        f"RSS at {last.instances:,}{reached} vs at {first.instances:,} instances",
        f"{growth:+.1%}",
        f"<= +{MEMORY_GROWTH_TARGET:.0%}",
        "pass" if growth <= MEMORY_GROWTH_TARGET else "miss",
    )


def timers_target(result: Timers) -> Target:
    """The latest timer with every task thread blocked."""
    late = max(result.lateness["blocked"])
    return Target(
        "timers",
        f"max lateness, task threads blocked ({len(result.lateness['blocked'])} timers)",
        f"{late:.3f} s",
        f"<= {TIMER_LATENESS_TARGET:g} s",
        "pass" if late <= TIMER_LATENESS_TARGET else "miss",
    )


def handover_target(result: Handover) -> Target:
    """The median handover against the scan interval plus the slack."""
    moved = statistics.median(result.moved)
    wanted = result.scan_interval + HANDOVER_SLACK
    return Target(
        "handover",
        f"median SIGTERM -> all {result.trees} trees moved (max {max(result.moved):.2f} s)",
        f"{moved:.2f} s",
        f"<= {wanted:g} s",
        "pass" if moved <= wanted and max(result.moved) <= wanted else "miss",
    )


def spread_targets(result: Spread) -> list[Target]:
    """Every worker's share of new trees in every round; where the killed workers' trees went."""
    fair = result.roots / SPREAD_WORKERS
    tolerance = SPREAD_TOLERANCE * fair
    counts = [count for spread in result.rounds for count in spread.placed]
    fine = all(abs(count - fair) <= tolerance for count in counts)
    recovered = ", ".join("/".join(map(str, spread.recovered)) for spread in result.rounds)
    return [
        Target(
            "spread",
            f"new trees per worker, {len(result.rounds)} rounds",
            f"{min(counts)}-{max(counts)}",
            f"{fair:g} +/- {tolerance:g}",
            "pass" if fine else "miss",
        ),
        Target("spread", "a killed worker's trees over the two others", recovered, "-", "-"),
    ]


TARGET_HEADER = f"{'measure':<58} {'measured':>20} {'target':>12}  verdict"


def target_rows(targets: list[Target]) -> Iterator[str]:
    """One row per target."""
    for target in targets:
        yield f"{target.measure:<58} {target.measured:>20} {target.wanted:>12}  {target.verdict}"


# --------------------------------------------------------------------- CLI


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.liveness", description=DESCRIPTION)
    parser.add_argument("--store", choices=STORES, default="sqlite", help="the store (default sqlite)")
    common.add_choice(parser, "section", SECTIONS)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--rounds", type=int, help=f"rounds of timers, handover and spread (default {FULL.rounds}, quick 1)"
    )
    parser.add_argument(
        "--instances",
        type=int,
        help=f"instances the memory worker finishes (default {FULL.instances:,}, quick {QUICK.instances:,})",
    )
    parser.add_argument(
        "--budget",
        type=float,
        help=f"seconds the memory feed may run; past them it stops and reports where it got "
        f"(default {FULL.budget:g}, quick {QUICK.budget:g})",
    )
    parser.add_argument(
        "--cache-size", type=int, help="the memory worker engine's cache_size (default: the engine's default)"
    )
    parser.add_argument(
        "--timers", type=int, help=f"1 s timers per round (default {FULL.timers}, quick {QUICK.timers})"
    )
    parser.add_argument(
        "--trees",
        type=int,
        help=f"trees the stopped worker holds (default {FULL.trees}, quick {QUICK.trees})",
    )
    parser.add_argument("--roots", type=int, help=f"new trees per spread round (default {FULL.roots})")
    parser.add_argument("--memory-worker", metavar="URL", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    for name in attrs.fields_dict(Sizes):
        if getattr(options, name) is None:
            setattr(options, name, getattr(sizes, name))
    for name in ("rounds", "instances", "timers", "trees", "roots"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if options.instances < 10:
        parser.error("--instances must be at least 10 (one per checkpoint)")
    if not options.budget > 0:
        parser.error("--budget must be above 0")
    if options.cache_size is not None and options.cache_size < 1:
        parser.error("--cache-size must be at least 1")
    return options


@attrs.define
class Results:
    """What each section measured."""

    memory: Memory | None = None
    timers: Timers | None = None
    handover: Handover | None = None
    spread: Spread | None = None

    def targets(self) -> list[Target]:
        """The summary rows of the sections measured."""
        found: list[Target] = []
        if self.memory is not None:
            found.append(memory_target(self.memory))
        if self.timers is not None:
            found.append(timers_target(self.timers))
        if self.handover is not None:
            found.append(handover_target(self.handover))
        if self.spread is not None:
            found += spread_targets(self.spread)
        return found


def run(backend: Backend, directory: str, options: argparse.Namespace) -> Results:
    """Measure every selected section."""
    results = Results()
    sections = common.selected(options.section, SECTIONS)
    if "memory" in sections:
        results.memory = measure_memory(
            backend, directory, options.instances, options.budget, options.cache_size
        )
    if "timers" in sections:
        results.timers = measure_timers(backend, options.timers, options.rounds)
    if "handover" in sections:
        results.handover = measure_handover(backend, directory, options.trees, options.rounds)
    if "spread" in sections:
        results.spread = measure_spread(backend, directory, options.roots, options.rounds)
    return results


def report(store: str, results: Results) -> None:
    """Each section's table, then the targets."""
    tables: list[tuple[str, Callable[[], None]]] = []
    if results.memory is not None:
        memory = results.memory
        cache = "default" if memory.cache_size is None else f"{memory.cache_size:,}"
        tables.append(
            (
                f"memory: the worker process after each checkpoint (engine cache_size {cache})",
                lambda: common.print_table(MEMORY_HEADER, {store: memory}, memory_rows),
            )
        )
    if results.timers is not None:
        timers = results.timers
        tables.append(
            (
                f"timers: ThreadedRunner(workers=2, task_workers=2), {timers.rounds} rounds",
                lambda: common.print_table(TIMERS_HEADER, {store: timers}, timers_rows),
            )
        )
    if results.handover is not None:
        handover = results.handover
        tables.append(
            (
                "handover: SIGTERM to an incarnate worker; the survivor runs RecoverySettings()",
                lambda: common.print_table(HANDOVER_HEADER, {store: handover}, handover_rows),
            )
        )
    if results.spread is not None:
        spread = results.spread
        tables.append(
            (
                f"spread: {SPREAD_WORKERS} incarnate worker processes (--lease {SPREAD_LEASE:g} "
                f"--recovery-ttl {SPREAD_RECOVERY_TTL:g})",
                lambda: common.print_table(SPREAD_HEADER, {store: spread}, spread_rows),
            )
        )
    for title, table in tables:
        print(f"\n{title}")
        table()
    if results.memory is not None and results.memory.budget_spent:
        last = results.memory.points[-1]
        print(
            f"(the memory feed stopped at its --budget after {last.seconds:.0f} s, at {last.instances:,} of "
            f"{results.memory.wanted:,} instances)"
        )
    print()
    common.print_table(TARGET_HEADER, {store: results.targets()}, target_rows, key="store")


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and report; 1 when a check fails, 2 when the options are invalid or PostgreSQL is missing."""
    options = parse(argv)
    if options.memory_worker:
        return serve_memory(options.memory_worker, options.cache_size)
    if common.missing_driver([options.store]):
        return 2
    common.print_environment(("eventsourcing", "psycopg", "incarnate"))
    print(f"{os.cpu_count()} CPUs; sections: {', '.join(common.selected(options.section, SECTIONS))}")
    with tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory:
        opened = (
            postgres_backend()
            if options.store == "postgres"
            else contextlib.nullcontext(sqlite_backend(directory))
        )
        try:
            with opened as backend:
                print(f"{backend.name}: {backend.description}")
                results = run(backend, directory, options)
        except StoreUnreachable as error:
            print(f"missing: {error}", file=sys.stderr)
            return 2
        except CheckFailed as error:
            print(f"check {options.store}: FAILED, {error}")
            return 1
    report(options.store, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
