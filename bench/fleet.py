"""The fleet: wake-up latency across processes, takeover after a worker dies, recovery sweep throughput.

Each store (a SQLite file per section in a temporary directory, and
PostgreSQL in fresh schemas when it is reachable) is measured in three
sections:

* ``latency``: an ``incarnate worker`` process holds a few human gates; this
  process sends them events one at a time through a plain engine, and
  polls the store for the ``Stepped`` event each send causes. Reported: the
  time ``send`` takes, and from the start of ``send`` to the step (the
  ``Stepped`` event's own timestamp, taken by the worker as it decides the
  macrostep) and to the moment this process sees it committed. PostgreSQL
  wakes the worker through LISTEN/NOTIFY; SQLite is polled every
  ``--poll-interval`` seconds. Both processes read one clock (one host).
* ``takeover``: a worker process holds N call trees (a root waiting for its
  child, the child waiting at a human gate), then is killed (SIGKILL). A
  second worker, in this process, with its recovery manager, is timed from
  the kill until it holds every root: first until the dead worker's
  heartbeat lapses (``--lease``), then the sweeps that move the trees.
* ``sweep``: N call trees whose owner never heartbeats (so they are lost at
  once) are recovered by a fresh engine's ``RecoveryManager.sweep()``, called
  back to back until every root is recovered, with ``worker_count`` 1, 2
  and 4 taking turns round by round; the median rate of each is reported.

Run ``python -m bench.fleet --help`` for the options, ``--quick`` for a
smoke run of a few seconds per store.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
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
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from uuid import UUID

import attrs

from aggregates import Instance, stored_topic
from incarnate import Engine, RecoveryManager, RecoverySettings, Storage, ThreadedRunner, Worker
from statechart import Chart, assign, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/fleet.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = (
    "The fleet: send-to-step latency across processes, takeover after a worker is killed, "
    "and recovery sweep throughput."
)
"""What ``--help`` says the bench does."""

SECTIONS = ("latency", "takeover", "sweep")

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: worker processes run there, so ``bench.fleet`` imports."""

CHARTS_PATH = "bench.fleet:CHARTS"
"""The ``--charts`` of the worker processes."""

STARTUP_SECONDS = 60.0
"""The longest a worker process may take to import, open its store and log that it started."""

GATES = 10
"""Human gates the latency section's worker holds; the sends go round them."""

WORKER_COUNTS = (1, 2, 4)
"""The recovery manager's ``worker_count`` values the sweep section compares."""

SEND_POLL = 0.001
"""Seconds between two reads of the store while a send's step is awaited."""

HELD_POLL = 0.01
"""Seconds between two looks at what the surviving worker holds."""

PROGRESS_SECONDS = 15.0
"""Away from a terminal, a progress line at most this often."""


@attrs.frozen
class Sizes:
    """How much work each section does."""

    sends: int
    trees: int
    roots: int
    rounds: int
    poll_interval: float
    lease: float
    scan_interval: float


FULL = Sizes(sends=200, trees=1_000, roots=1_000, rounds=3, poll_interval=0.5, lease=3.0, scan_interval=1.0)
QUICK = Sizes(sends=10, trees=20, roots=40, rounds=1, poll_interval=0.1, lease=1.0, scan_interval=0.2)


# ---------------------------------------------------------------- charts


GATE = Chart(
    "bench.fleet.gate",
    state("waiting", on=[transition("answer", "waiting", actions=[assign(common.count)])]),
    context=common.Tally,
    description="A human gate that counts the answers it is sent and keeps waiting.",
)

CHILD = Chart(
    "bench.fleet.child",
    state("waiting", on=[transition("finish", "finished")]),
    final("finished"),
    description="A child waiting at a human gate for 'finish'.",
)

TREE = Chart(
    "bench.fleet.tree",
    state(
        "waiting",
        invoke=[invoke("child", chart=CHILD.name)],
        on=[transition("done.invoke.child", "done")],
    ),
    final("done"),
    description="A root whose initial state invokes one child and waits for it.",
)

CHARTS = [GATE, CHILD, TREE]
"""Every chart of the bench: the worker processes load them as ``bench.fleet:CHARTS``."""

STEPPED = stored_topic(Instance.Stepped)
"""The topic a macrostep is stored under (with its stored format: ``…Stepped@2``)."""


class CheckFailed(Exception):
    """A section did not see what the bench expects (a lost wake-up, a tree left behind).

    Nothing is reported then.
    """


# ---------------------------------------------------------------- stores


@attrs.frozen
class Backend:
    """One kind of store: how to make a fresh store of it."""

    name: str
    description: str
    fresh: Callable[[str], Storage]
    """A new, empty store for the given label."""


def sqlite_backend(directory: str) -> Backend:
    """One SQLite file per store, in ``directory``."""

    def fresh(label: str) -> Storage:
        return Storage.sqlite(os.path.join(directory, f"{label}.db"))

    return Backend(
        "sqlite",
        f"SQLite {sqlite3.sqlite_version}, one file per section in {directory} (eventsourcing defaults: WAL)",
        fresh,
    )


@contextlib.contextmanager
def postgres_backend() -> Iterator[Backend | None]:
    """Fresh schemas in the test database, one per store, all dropped afterwards; None when unreachable."""
    with common.open_postgres() as postgres:
        if postgres is None:
            yield None
            return
        prefix = f"bench_fleet_{uuid.uuid4().hex[:8]}"

        def fresh(label: str) -> Storage:
            return postgres.fresh(f"{prefix}_{label}")

        yield Backend(
            "postgres",
            f"{postgres.describe()}, one schema {prefix}_* per section (dropped afterwards)",
            fresh,
        )


def label() -> str:
    """A short unique suffix, for engine ids and group names."""
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------- worker processes


class WorkerProcess:
    """One ``incarnate worker`` process, its output in files."""

    def __init__(self, process: subprocess.Popen[bytes], stderr: Path) -> None:
        self.process = process
        self.stderr = stderr
        self.engine_id = ""

    def tail(self, lines: int = 15) -> str:
        """The last lines the process logged, for a failure message."""
        return "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])

    def wait_started(self) -> None:
        """Block until the worker logs that it started, and keep its engine id."""
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            found = re.search(r" started on .* engine_id=(\S+)", self.stderr.read_text(errors="replace"))
            if found:
                self.engine_id = found[1]
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise CheckFailed(f"the worker process did not start:\n{self.tail()}")

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM, then wait for the graceful exit (killed past ``timeout``)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()


@contextlib.contextmanager
def worker_process(directory: str, db: str, *options: str) -> Iterator[WorkerProcess]:
    """A started ``incarnate worker`` process on ``db``; killed on the way out if it still runs."""
    name = f"worker-{label()}"
    stderr = Path(directory) / f"{name}.err"
    command = [sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--db", db, *options]
    with open(os.devnull, "wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=err)
    try:
        running = WorkerProcess(process, stderr)
        running.wait_started()
        yield running
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def wait_until(condition: Callable[[], bool], timeout: float, interval: float, what: str) -> None:
    """Poll ``condition`` until it holds; :class:`CheckFailed` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)


def owned_by(engine: Engine, owner: str) -> int:
    """In-flight instances the listing says ``owner`` owns (the listing caught up first)."""
    engine.listing.catch_up()
    return sum(1 for row in engine.listing.rows(in_flight=True) if row.owner == owner)


class Progress:
    """A progress line on stderr: rewritten in place on a terminal, now and then otherwise."""

    def __init__(self, what: str, total: int, unit: str) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.terminal = sys.stderr.isatty()
        self.begin = time.perf_counter()
        self.shown = self.begin

    def update(self, done: int) -> None:
        """Show progress when it is time to."""
        now = time.perf_counter()
        if now - self.shown < (0.2 if self.terminal else PROGRESS_SECONDS) and done < self.total:
            return
        self.shown = now
        line = f"{self.what}: {done:,}/{self.total:,} {self.unit} in {now - self.begin:.0f} s"
        if self.terminal:
            print(f"\r{line}\033[K", end="\n" if done >= self.total else "", file=sys.stderr, flush=True)
        elif done < self.total:
            print(line, file=sys.stderr, flush=True)


def client(storage: Storage, role: str) -> Engine:
    """A plain engine that never heartbeats: it holds nothing, so what it starts is any worker's."""
    return Engine(CHARTS, storage=storage, engine_id=f"bench-{role}-{label()}")


# ---------------------------------------------------------------- latency


@attrs.frozen
class Latency:
    """One store's sends: seconds per send, from the start of ``send``."""

    wake: str
    """How the worker learns of a send: PostgreSQL's LISTEN/NOTIFY, SQLite's ``data_version`` looked at."""
    send: tuple[float, ...]
    """How long ``send`` took (the ``Accepted`` event committed)."""
    stepped: tuple[float, ...]
    """Until the ``Stepped`` event's timestamp (the worker deciding the macrostep)."""
    seen: tuple[float, ...]
    """Until this process read the committed ``Stepped`` event."""


def latest_version(engine: Engine, instance_id: UUID) -> int:
    """The version of an instance's last stored event."""
    (last,) = engine.parts.journal.recorder.select_events(instance_id, desc=True, limit=1)
    return last.originator_version


def await_step(engine: Engine, gate: UUID, after: int, timeout: float) -> tuple[float, float, int]:
    """Poll the store for the first ``Stepped`` event of ``gate`` past version ``after``.

    Returns the time it was seen, its own timestamp (both ``time.time()``
    seconds) and its version.
    """
    deadline = time.monotonic() + timeout
    while True:
        for stored in engine.parts.journal.recorder.select_events(gate, gt=after):
            if stored.topic == STEPPED:
                seen = time.time()
                event = engine.parts.journal.mapper.to_domain_event(stored)
                assert isinstance(event, Instance.Stepped)
                return seen, event.timestamp.timestamp(), stored.originator_version
        if time.monotonic() > deadline:
            raise CheckFailed(
                f"gate {gate} was not stepped within {timeout:g} s of a send: a wake-up was missed"
            )
        time.sleep(SEND_POLL)


def measure_latency(backend: Backend, directory: str, sends: int, poll_interval: float) -> Latency:
    """Sends to gates a worker process holds, one at a time, each awaited until its step is committed."""
    storage = backend.fresh("latency")
    with (
        client(storage, "client") as engine,
        worker_process(
            directory, storage.url(), "--poll-interval", f"{poll_interval:g}", "--no-recovery"
        ) as worker,
    ):
        gates = [engine.start(GATE.name) for _ in range(GATES)]
        wait_until(
            lambda: owned_by(engine, worker.engine_id) == GATES,
            30.0,
            0.05,
            f"the worker taking over {GATES} gates",
        )
        versions = {gate: latest_version(engine, gate) for gate in gates}
        timeout = 10.0 + 10 * poll_interval
        send: list[float] = []
        stepped: list[float] = []
        seen: list[float] = []
        pause = random.Random(sends)
        for n in range(-GATES, sends):  # one untimed warm-up send per gate
            gate = gates[n % GATES]
            # Out of phase with the worker's polling: right after a step, it has just looked.
            time.sleep(pause.uniform(0.0, poll_interval))
            begin = time.time()
            engine.send(gate, "answer")
            sent = time.time()
            seen_at, stepped_at, versions[gate] = await_step(engine, gate, versions[gate], timeout)
            if n >= 0:
                send.append(sent - begin)
                stepped.append(stepped_at - begin)
                seen.append(seen_at - begin)
        counts = [engine.snapshot(gate).context.count for gate in gates]
        worker.stop()
    expected = GATES + sends
    if sum(counts) != expected:
        raise CheckFailed(f"the gates counted {sum(counts)} answers, {expected} were sent")
    print(
        f"check {backend.name} latency: {GATES} gates held by worker {worker.engine_id}, "
        f"{expected} answers sent, {sum(counts)} counted: ok"
    )
    wake = "LISTEN/NOTIFY" if backend.name == "postgres" else "data_version"
    return Latency(f"{wake}, poll {poll_interval:g} s", tuple(send), tuple(stepped), tuple(seen))


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile: the smallest value at least ``fraction`` of ``values`` do not exceed."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


LATENCY_HEADER = (
    f"{'wake-up':<24} {'sends':>5} {'send p50':>9} {'p99':>6} {'stepped p50':>12} {'p99':>6} "
    f"{'seen p50':>9} {'p99':>6} {'max':>6}  (ms, from the start of send)"
)


def latency_rows(result: Latency) -> Iterator[str]:
    """One row: the percentiles of each measure, in milliseconds."""

    def ms(values: Sequence[float], fraction: float) -> float:
        return 1e3 * percentile(values, fraction)

    yield (
        f"{result.wake:<24} {len(result.seen):>5} {ms(result.send, 0.5):>9.1f} "
        f"{ms(result.send, 0.99):>6.1f} {ms(result.stepped, 0.5):>12.1f} {ms(result.stepped, 0.99):>6.1f} "
        f"{ms(result.seen, 0.5):>9.1f} {ms(result.seen, 0.99):>6.1f} {1e3 * max(result.seen):>6.1f}"
    )


# ---------------------------------------------------------------- takeover


@attrs.frozen
class Takeover:
    """One worker killed while holding call trees, and a survivor taking them all."""

    trees: int
    lease: float
    """The dead worker's lease: how long its last heartbeat kept it live."""
    settings: RecoverySettings
    """The survivor's recovery manager."""
    build: float
    """Seconds until the first worker held every tree (not timed)."""
    lapse: float
    """From the kill until the dead worker's heartbeat expired (store time)."""
    first: float
    """From the kill until the survivor held a first root."""
    last: float
    """From the kill until the survivor held every root."""


def start_trees(engine: Engine, trees: int, what: str) -> list[UUID]:
    """Start ``trees`` roots, each invoking its child in the same save."""
    progress = Progress(what, trees, "trees")
    roots: list[UUID] = []
    for done in range(1, trees + 1):
        roots.append(engine.start(TREE.name))
        progress.update(done)
    return roots


def measure_takeover(
    backend: Backend, directory: str, trees: int, lease: float, scan_interval: float
) -> Takeover:
    """A worker process takes ``trees`` call trees over, is killed, and a survivor here takes them all."""
    storage = backend.fresh("takeover")
    # A group of its own: its leader's advisory lock is shared with nothing else on the server.
    group = f"bench-{label()}"
    settings = RecoverySettings(
        ttl=0.0, scan_interval=scan_interval, lease_duration=60.0, item_timeout=2.0, group=group
    )
    with (
        client(storage, "client") as engine,
        worker_process(
            directory,
            storage.url(),
            "--group",
            group,
            "--lease",
            f"{lease:g}",
            "--poll-interval",
            "0.1",
        ) as dying,
    ):
        begin = time.perf_counter()
        roots = start_trees(engine, trees, f"{backend.name}: starting {trees:,} trees")
        wait_until(
            lambda: owned_by(engine, dying.engine_id) == 2 * trees,
            120.0 + trees * 0.2,
            0.2,
            f"worker {dying.engine_id} taking over {trees:,} trees",
        )
        build = time.perf_counter() - begin
        survivor = Engine(
            CHARTS,
            storage=storage,
            runner=ThreadedRunner(workers=4),
            engine_id=f"bench-survivor-{label()}",
        )
        try:
            with Worker(survivor, group=group, lease=30.0, poll_interval=0.1, recovery=settings):
                expires = survivor.parts.coordination.heartbeats()[dying.engine_id].expires_at
                killed = time.time()
                dying.process.kill()
                dying.process.wait(10)
                first = math.inf
                deadline = time.monotonic() + lease + 120.0 + trees * 0.2
                while True:
                    held = sum(1 for root in roots if root in survivor.parts.holdings.held())
                    now = time.time()
                    if held and first == math.inf:
                        first = now - killed
                    if held == trees:
                        last = now - killed
                        break
                    if time.monotonic() > deadline:
                        raise CheckFailed(
                            f"the survivor held {held:,} of {trees:,} roots "
                            f"{now - killed:.0f} s after the kill"
                        )
                    time.sleep(HELD_POLL)
            owners = owned_by(engine, survivor.engine_id)
        finally:
            survivor.close()
    if owners != 2 * trees:
        raise CheckFailed(f"the survivor owns {owners:,} in-flight instances, expected {2 * trees:,}")
    print(
        f"check {backend.name} takeover: worker {dying.engine_id} held {trees:,} trees ({2 * trees:,} "
        f"instances), was killed; the survivor owns all {owners:,}: ok"
    )
    return Takeover(trees, lease, settings, build, expires - killed, first, last)


TAKEOVER_HEADER = (
    f"{'trees':>6} {'lease s':>7} {'scan s':>6} {'batch':>5} {'threads':>7} {'build s':>7} "
    f"{'lapse s':>7} {'first s':>7} {'all s':>7} {'move s':>7} {'roots/s':>8}"
)


def takeover_rows(result: Takeover) -> Iterator[str]:
    """One row: when the dead worker lapsed, when the survivor held a first root and every root."""
    moving = result.last - max(result.lapse, 0.0)
    yield (
        f"{result.trees:>6,} {result.lease:>7g} {result.settings.scan_interval:>6g} "
        f"{result.settings.batch_size:>5} {result.settings.worker_count:>7} {result.build:>7.1f} "
        f"{result.lapse:>7.2f} {result.first:>7.2f} {result.last:>7.2f} {moving:>7.2f} "
        f"{result.trees / moving:>8,.0f}"
    )


# ------------------------------------------------------------------ sweep


@attrs.frozen
class Sweeps:
    """The sweeps of one worker count, one timing per round."""

    roots: int
    batch_size: int
    seconds: tuple[float, ...]
    sweeps: int
    """Sweeps the first round took."""

    def rates(self) -> list[float]:
        """Roots recovered per second, one per round."""
        return [self.roots / seconds for seconds in self.seconds]


def sweep_once(storage: Storage, roots: int, settings: RecoverySettings) -> tuple[float, int]:
    """A fresh engine's manager sweeps back to back until it holds every root: the seconds, and the sweeps.

    The engine's listing is caught up before the clock starts, so every
    sweep's own catch-up folds only the previous sweep's claims.
    """
    engine = Engine(
        CHARTS, storage=storage, runner=ThreadedRunner(workers=4), engine_id=f"bench-sweeper-{label()}"
    )
    try:
        manager = RecoveryManager(engine, settings)
        engine.listing.catch_up()
        gc.collect()
        succeeded = sweeps = 0
        limit = 3 * math.ceil(roots / settings.batch_size) + 3
        begin = time.perf_counter()
        while succeeded < roots:
            report = manager.sweep()
            sweeps += 1
            succeeded += report.succeeded
            if report.claimed == 0 or sweeps > limit:
                raise CheckFailed(
                    f"{sweeps} sweeps with worker_count={settings.worker_count} recovered {succeeded:,} "
                    f"of {roots:,} roots; the last: {report.summary}"
                )
        seconds = time.perf_counter() - begin
        manager.stop(timeout=30.0)
        owners = owned_by(engine, engine.engine_id)
    finally:
        engine.close()
    if owners != 2 * roots:
        raise CheckFailed(
            f"after the sweeps with worker_count={settings.worker_count} the sweeping engine owns "
            f"{owners:,} in-flight instances, expected {2 * roots:,}"
        )
    return seconds, sweeps


def measure_sweeps(backend: Backend, roots: int, rounds: int, batch_size: int) -> dict[int, Sweeps]:
    """Lost trees, recovered by one fresh engine per worker count and round, the counts taking turns.

    The trees are started by an engine that never heartbeats, and every
    sweeping engine is closed after its sweeps without ever heartbeating
    either, so the next one finds every tree lost again.
    """
    storage = backend.fresh("sweep")
    with client(storage, "lost-owner") as engine:
        start_trees(engine, roots, f"{backend.name}: starting {roots:,} lost trees")
    base = RecoverySettings(
        ttl=0.0,
        batch_size=batch_size,
        lease_duration=60.0,
        item_timeout=2.0,
        lock_id=random.SystemRandom().randrange(1, 2**62),
    )
    seconds: dict[int, list[float]] = {count: [] for count in WORKER_COUNTS}
    sweeps: dict[int, int] = {}
    for n in range(rounds):
        for count in common.rotated(WORKER_COUNTS, n):
            took, swept = sweep_once(storage, roots, attrs.evolve(base, worker_count=count))
            seconds[count].append(took)
            sweeps.setdefault(count, swept)
    print(
        f"check {backend.name} sweep: {roots:,} lost trees recovered {rounds * len(WORKER_COUNTS)} times, "
        f"each time every root and child owned by the sweeping engine: ok"
    )
    return {count: Sweeps(roots, batch_size, tuple(seconds[count]), sweeps[count]) for count in WORKER_COUNTS}


SWEEP_HEADER = (
    f"{'workers':>7} {'roots':>6} {'batch':>5} {'sweeps':>6} {'median s':>8} {'roots/s':>8} "
    f"{'min/s':>7} {'max/s':>7} {'spread':>6} {'vs 1 worker':>11}"
)


def sweep_rows(result: dict[int, Sweeps]) -> Iterator[str]:
    """One row per worker count: the median rate over the rounds, and its speed-up over one worker."""
    one = statistics.median(result[WORKER_COUNTS[0]].rates())
    for count, sweeps in result.items():
        rates = sweeps.rates()
        median = statistics.median(rates)
        yield (
            f"{count:>7} {sweeps.roots:>6,} {sweeps.batch_size:>5} {sweeps.sweeps:>6} "
            f"{statistics.median(sweeps.seconds):>8.2f} {median:>8,.0f} {min(rates):>7,.0f} "
            f"{max(rates):>7,.0f} {common.spread(rates):>6.0%} {median / one:>10.2f}x"
        )


# ------------------------------------------------------------------- CLI


@attrs.define
class Results:
    """What each store measured, by section."""

    latency: dict[str, Latency] = attrs.Factory(dict)
    takeover: dict[str, Takeover] = attrs.Factory(dict)
    sweep: dict[str, dict[int, Sweeps]] = attrs.Factory(dict)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=DESCRIPTION)
    common.add_choice(parser, "store", common.STORES)
    common.add_choice(parser, "section", SECTIONS)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument(
        "--sends",
        type=int,
        help=f"timed sends of the latency section (default {FULL.sends}, quick {QUICK.sends})",
    )
    parser.add_argument(
        "--trees",
        type=int,
        help=f"trees the killed worker holds (default {FULL.trees:,}, quick {QUICK.trees})",
    )
    parser.add_argument(
        "--roots",
        type=int,
        help=f"lost trees each sweep run recovers (default {FULL.roots:,}, quick {QUICK.roots})",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        help=f"rounds of the sweep section (default {FULL.rounds}, quick {QUICK.rounds})",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        help=f"the latency worker's --poll-interval, in seconds (default {FULL.poll_interval:g}, the "
        f"worker's own default; quick {QUICK.poll_interval:g})",
    )
    parser.add_argument(
        "--lease",
        type=float,
        help=f"the killed worker's --lease, in seconds (default {FULL.lease:g}, quick {QUICK.lease:g})",
    )
    parser.add_argument(
        "--scan-interval",
        type=float,
        help=f"the survivor's recovery scan_interval, in seconds (default {FULL.scan_interval:g}, "
        f"quick {QUICK.scan_interval:g})",
    )
    parser.add_argument(
        "--batch-size", type=int, default=100, help="the recovery manager's batch_size (default 100)"
    )
    options = parser.parse_args(argv)
    sizes = QUICK if options.quick else FULL
    for name in attrs.fields_dict(Sizes):
        if getattr(options, name) is None:
            setattr(options, name, getattr(sizes, name))
    for name in ("sends", "trees", "roots", "rounds"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if options.batch_size < 1:
        parser.error("--batch-size must be at least 1")
    if not (options.poll_interval > 0 and options.lease > 0 and options.scan_interval > 0):
        parser.error("--poll-interval, --lease and --scan-interval must be above 0")
    return options


def bench_store(backend: Backend, directory: str, options: argparse.Namespace, results: Results) -> None:
    """Measure every selected section on one kind of store."""
    print(f"{backend.name}: {backend.description}")
    sections = common.selected(options.section, SECTIONS)
    if "latency" in sections:
        results.latency[backend.name] = measure_latency(
            backend, directory, options.sends, options.poll_interval
        )
    if "takeover" in sections:
        results.takeover[backend.name] = measure_takeover(
            backend, directory, options.trees, options.lease, options.scan_interval
        )
    if "sweep" in sections:
        results.sweep[backend.name] = measure_sweeps(
            backend, options.roots, options.rounds, options.batch_size
        )


def report(results: Results) -> None:
    """The tables of the sections measured, a blank line between two."""
    tables: list[Callable[[], None]] = []
    if results.latency:
        tables.append(lambda: common.print_table(LATENCY_HEADER, results.latency, latency_rows))
    if results.takeover:
        tables.append(lambda: common.print_table(TAKEOVER_HEADER, results.takeover, takeover_rows))
    if results.sweep:
        tables.append(lambda: common.print_table(SWEEP_HEADER, results.sweep, sweep_rows))
    for table in tables:
        print()
        table()


def main(argv: Sequence[str] | None = None) -> int:
    """Check, measure and report; 1 when a check fails, 2 when the PostgreSQL driver is missing."""
    options = parse(argv)
    stores = common.selected(options.store, common.STORES)
    if common.missing_driver(stores):
        return 2
    common.print_environment(("eventsourcing", "psycopg", "incarnate"))
    print(
        f"latency: {options.sends} sends to {GATES} gates; takeover: {options.trees:,} trees, lease "
        f"{options.lease:g} s; sweep: {options.roots:,} lost trees x worker_count "
        f"{', '.join(map(str, WORKER_COUNTS))}, {options.rounds} rounds interleaved, median reported\n"
    )
    results = Results()
    with tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory:
        for name in stores:
            opened = (
                postgres_backend()
                if name == "postgres"
                else contextlib.nullcontext(sqlite_backend(directory))
            )
            with opened as backend:
                if backend is None:
                    continue
                try:
                    bench_store(backend, directory, options, results)
                except CheckFailed as error:
                    print(f"check {name}: FAILED, {error}")
                    return 1
    if not (results.latency or results.takeover or results.sweep):
        print("no store could be measured")
        return 0
    report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
