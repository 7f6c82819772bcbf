"""incarnate and DBOS Transact side by side, on the same machine and the same database server.

Each store (a SQLite file per run in a temporary directory, and PostgreSQL
in fresh schemas of the test database when it is reachable) runs the same
work on both sides:

* ``serial``: DBOS's own two-step example, a ``@DBOS.workflow()`` calling
  the ``@DBOS.step()`` functions ``step_one`` then ``step_two``, called
  directly, one workflow after another. incarnate's equivalent is a chart
  whose states ``one`` and ``two`` each invoke a registered task (the same
  bodies), then a final state whose output is the second task's output:
  ``engine.start(...)``, ``run_until_idle()`` and ``handle.result()`` on a
  deterministic runner, all on the calling thread as DBOS's direct call.
* ``inflight``: 100 workflows started at once (``DBOS.start_workflow``;
  ``engine.start`` on an engine with a ``ThreadedRunner``), then every
  result awaited; repeated in batches.
* ``recovery``: a child process starts 1,000 workflows whose first step
  blocks (it waits on a flag that only an environment variable of that
  process sets), and is killed with SIGKILL once the bench has read all
  1,000 from the store. A fresh process then recovers them (incarnate:
  engine construction and ``resume_all()``; DBOS: ``DBOS(config=...)`` and
  ``DBOS.launch()``, which recovers its executor's pending workflows), and
  the bench polls the store for the first and the last completed workflow.
* ``throughput``: incarnate alone, durable macrosteps per second (a tick
  accepted and consumed) on 100 counter instances, by one and by two OS
  processes on PostgreSQL and by one on SQLite; each process's sender
  threads tick their share of the counters in turn, each tick sent once the
  sender's previous one was committed.

The serial, in-flight and recovery tables also show the CPU each workflow
took: the side's process (every thread, user and system) and, on
PostgreSQL, this host's server processes, both read over the timed spans
only (for recovery, from the start of recovery until the last workflow
completed); a ratio of DBOS's CPU per workflow over incarnate's follows
each time or rate ratio, without a target. One process runs Python on one
core at a time, so where both sides are bound by their own CPU the two
ratios agree; where they differ, a side's process waited (on round trips,
on its own threads) rather than worked.

Every side runs in a process of its own, on a fresh store, started the same
way, so both start equal (DBOS can be launched once per process). In each
round the two sides run back to back, the order rotating from round to
round; medians of the rounds are reported with the ratios against the
project's targets. Missing the targets is reported, not an error. Run
``python -m bench.peers --help`` for the options, ``--quick`` for a smoke
run.
"""

from __future__ import annotations

import argparse
import atexit
import concurrent.futures
import contextlib
import importlib.util
import itertools
import json
import os
import queue
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import attrs
from eventsourcing.utils import get_topic

from aggregates import Instance
from incarnate import DeterministicRunner, Engine, Storage, TaskCall, ThreadedRunner
from statechart import Chart, Event, JsonValue, assign, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/peers.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

if TYPE_CHECKING:
    from dbos import DBOSConfig

DESCRIPTION = (
    "incarnate and DBOS Transact side by side: serial and in-flight workflows, recovery of 1,000 "
    "pending workflows after SIGKILL, and incarnate's durable macrostep throughput."
)
"""What ``--help`` says the bench does."""

WORKLOADS = ("serial", "inflight", "recovery", "throughput")
SIDES = ("incarnate", "dbos")
"""The two sides of a comparison, in the order of the first round."""

DBOS_HINT = "pip install -e '.[bench]'"

ROOT = Path(__file__).resolve().parents[1]
"""The repository root: the child processes run there, so ``bench.peers`` imports."""

MARK = "@@bench.peers "
"""The prefix of a child's messages on its standard output (anything else there is ignored)."""

HOLD_VARIABLE = "BENCH_PEERS_HOLD"
"""Set in the process whose first steps must not finish (the recovery workload's crashing process)."""

HOLD_SECONDS = 900.0
"""The longest a held first step waits (its process is killed long before)."""

STARTUP_SECONDS = 90.0
"""The longest a child process may take to import, open its store and say it is ready."""

POLL_SECONDS = 0.01
"""Seconds between two reads of the store while the bench waits for recovered workflows."""

IDLE_SECONDS = 120.0
"""The longest a threaded runner may take to finish one batch of work."""

RESULT_SECONDS = 60.0
"""The longest one result is waited for."""

DBOS_NAME = "bench-peers"
"""DBOS's application name, version and executor id: the same in the crashing and recovering process."""

CHECK_WORKFLOWS = 20
"""Serial workflows the check runs to count the write transactions of one (PostgreSQL)."""

T = TypeVar("T")

RATIO_TARGETS: dict[str, dict[str, float]] = {
    "serial": {"postgres": 2.0, "sqlite": 3.0},
    "inflight": {"postgres": 5.0, "sqlite": 5.0},
}
"""incarnate's rate over DBOS's, per workload and store: the write path's targets."""

RECOVERY_ALL_TARGET = 5.0
"""DBOS's time to complete every recovered workflow over incarnate's: incarnate at most a fifth."""

RECOVERY_FIRST_TARGET = 2.0
"""DBOS's time to the first completed workflow over incarnate's: incarnate in at most half of it."""

THROUGHPUT_TARGETS = {"postgres": 2_000.0, "sqlite": 3_000.0}
"""Durable macrosteps per second of one process."""

SCALING_TARGET = 1.6
"""Two processes over one, on PostgreSQL."""

TWO_PROCESS_TARGET = 8_000.0
"""Durable macrosteps per second of two processes together, on PostgreSQL."""

THROUGHPUT_PROCESSES = {"postgres": (1, 2), "sqlite": (1,)}
"""The process counts measured on each store."""


@attrs.frozen
class Sizes:
    """How much work each workload does per round."""

    serial: int
    batches: int
    pending: int
    seconds: float
    rounds: int


FULL = Sizes(serial=200, batches=5, pending=1_000, seconds=5.0, rounds=3)
QUICK = Sizes(serial=20, batches=1, pending=100, seconds=1.0, rounds=1)


class CheckFailed(Exception):
    """A side did not do what the bench expects (a wrong result, a workflow left behind, a child died).

    Nothing is reported then.
    """


# ------------------------------------------------------------- the work


def first_step() -> str:
    """The body of ``step_one`` on both sides; held (never returns) where :data:`HOLD_VARIABLE` is set."""
    if os.environ.get(HOLD_VARIABLE):
        threading.Event().wait(HOLD_SECONDS)
        raise RuntimeError(f"a held first step was not killed within {HOLD_SECONDS:g} s")
    return "one"


def second_step() -> str:
    """The body of ``step_two`` on both sides."""
    return "two"


def step_one(call: TaskCall) -> JsonValue:
    """incarnate's first task."""
    return first_step()


def step_two(call: TaskCall) -> JsonValue:
    """incarnate's second task."""
    return second_step()


def second_output(context: object, event: Event) -> JsonValue:
    """The workflow's output: what ``done.invoke.two`` carries, the second task's output."""
    return event.data


STEPS = Chart(
    "bench.peers.steps",
    state("one", invoke=[invoke("one", task="step_one")], on=[transition("done.invoke.one", "two")]),
    state("two", invoke=[invoke("two", task="step_two")], on=[transition("done.invoke.two", "done")]),
    final("done", done_data=second_output),
    description="DBOS's two-step example: two tasks in order, the second one's output as the result.",
)

COUNTER = Chart(
    "bench.peers.counter",
    state("running", on=[transition("tick", "running", actions=[assign(common.count)])]),
    context=common.Tally,
    description="Counts ticks with a self-transition.",
)

CHARTS = (STEPS, COUNTER)
TASKS = {"step_one": step_one, "step_two": step_two}

STARTED = get_topic(Instance.Started)
COMPLETED = get_topic(Instance.Completed)

EXPECTED = "two"
"""Every workflow's result."""


@attrs.frozen
class DbosApp:
    """The DBOS workflow, registered with DBOS (once per process)."""

    workflow: Callable[[], str]


def dbos_app() -> DbosApp:
    """Register DBOS's two-step example, with the same bodies as incarnate's tasks."""
    from dbos import DBOS

    @DBOS.step()
    def dbos_step_one() -> str:
        return first_step()

    @DBOS.step()
    def dbos_step_two() -> str:
        return second_step()

    @DBOS.workflow()
    def dbos_workflow() -> str:
        dbos_step_one()
        return dbos_step_two()

    return DbosApp(dbos_workflow)


def dbos_available() -> bool:
    """Whether DBOS Transact is installed."""
    return importlib.util.find_spec("dbos") is not None


# ---------------------------------------------------------------- stores


@attrs.frozen
class Place:
    """A fresh store for one side of one run, as the child process opens it."""

    kind: str
    """``sqlite`` or ``postgres``."""
    url: str
    """incarnate's ``Storage.from_url`` value, or DBOS's ``system_database_url``."""
    schema: str = ""
    """DBOS's ``dbos_system_schema`` on PostgreSQL (incarnate's is in its URL)."""
    path: str = ""
    """The SQLite file."""
    conninfo: str = ""
    """A libpq connection string for the PostgreSQL database."""


@attrs.frozen
class Backend:
    """One kind of store: how to make a fresh store of it for a side."""

    name: str
    description: str
    fresh: Callable[[str, str], Place]
    """A new, empty store for a side (``incarnate`` or ``dbos``) and a label."""
    connection: Any = None
    """The PostgreSQL connection the bench reads DBOS's tables through (None on SQLite)."""


def sqlite_backend(directory: str) -> Backend:
    """One SQLite file per side and run, in ``directory``."""

    def fresh(side: str, label: str) -> Place:
        path = os.path.join(directory, f"{label}-{side}.db")
        return Place("sqlite", f"sqlite:///{path}", path=path)

    return Backend(
        "sqlite",
        f"SQLite {sqlite3.sqlite_version}, one file per side and run in {directory} (incarnate: WAL, "
        "DBOS: its own default, a rollback journal)",
        fresh,
    )


@contextlib.contextmanager
def postgres_backend() -> Iterator[Backend | None]:
    """Fresh schemas in the test database, one per side and run, all dropped afterwards."""
    with common.open_postgres() as postgres:
        if postgres is None:
            yield None
            return
        prefix = f"bench_peers_{uuid.uuid4().hex[:8]}"
        user = postgres.user
        conninfo = (
            f"host={common.POSTGRES_HOST} port={common.POSTGRES_PORT} "
            f"dbname={common.POSTGRES_DBNAME} user={user}"
        )

        def fresh(side: str, label: str) -> Place:
            schema = f"{prefix}_{label}_{side}".replace("-", "_")
            if side == "incarnate":
                return Place("postgres", postgres.fresh(schema).url(), schema=schema, conninfo=conninfo)
            postgres.create_schema(schema)
            url = (
                f"postgresql://{user}@{common.POSTGRES_HOST}:{common.POSTGRES_PORT}/{common.POSTGRES_DBNAME}"
            )
            return Place("postgres", url, schema=schema, conninfo=conninfo)

        settings = ", ".join(
            f"{name}={server_setting(postgres.connection, name)}" for name in ("fsync", "synchronous_commit")
        )
        yield Backend(
            "postgres",
            f"{postgres.describe()} ({settings}), one schema {prefix}_* per side and run "
            "(dropped afterwards)",
            fresh,
            postgres.connection,
        )


def server_setting(connection: Any, name: str) -> str:
    """A setting of the PostgreSQL server, as ``SHOW`` gives it."""
    from psycopg import sql

    row = connection.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()
    return "?" if row is None else str(row[0])


def plural(count: int, word: str) -> str:
    """``1 round``, ``3 rounds``; ``1 batch``, ``5 batches``."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}{'es' if word.endswith('ch') else 's'}"


def label() -> str:
    """A short unique suffix, for labels and engine ids."""
    return uuid.uuid4().hex[:8]


EMBED_TASKS = [True]
"""Whether incarnate's engines embed their task children (the engine's default; ``--no-embed-tasks``
gives each a stream of its own; told to child processes)."""

PINNED_CPUS: list[int] = []
"""With ``--pin-cpus``: the CPUs the bench may use; each child process is pinned to the next one."""
_NEXT_CPU = itertools.count()


def next_cpu() -> int | None:
    """The CPU the next child process is pinned to (None: not pinned), round-robin over :data:`PINNED_CPUS`.

    Children started together (the throughput workload's processes) get
    different CPUs; a side's processes run one at a time, wherever the turn
    falls, and both sides are treated alike.
    """
    if not PINNED_CPUS:
        return None
    return PINNED_CPUS[next(_NEXT_CPU) % len(PINNED_CPUS)]


def pin(cpu: int | None) -> None:
    """Pin the calling process to ``cpu`` before it starts any thread (threads inherit it); None: stay."""
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def engine_on(place: Place, runner: Any = None, role: str = "bench", engine_id: str | None = None) -> Engine:
    """An incarnate engine over ``place`` with the bench's charts and tasks (``engine_id``: a fixed one)."""
    return Engine(
        CHARTS,
        TASKS,
        storage=Storage.from_url(place.url),
        runner=runner,
        engine_id=engine_id or f"peers-{role}-{label()}",
        embed_tasks=EMBED_TASKS[0],
    )


def dbos_config(place: Place) -> DBOSConfig:
    """DBOS's configuration for ``place``: fixed name, version and executor, so a fresh process recovers."""
    config: DBOSConfig = {
        "name": DBOS_NAME,
        "system_database_url": place.url,
        "application_version": DBOS_NAME,
        "executor_id": DBOS_NAME,
        "log_level": "WARNING",
    }
    if place.schema:
        config["dbos_system_schema"] = place.schema
    return config


def launch_dbos(place: Place) -> None:
    """Construct and launch DBOS over ``place`` (the workflow must be registered first)."""
    from dbos import DBOS

    DBOS(config=dbos_config(place))
    DBOS.launch()


# -------------------------------------------------------- child processes


def say(kind: str, **fields: Any) -> None:
    """One message to the bench, on standard output."""
    print(MARK + json.dumps({"kind": kind, **fields}), flush=True)


def hear(timeout: float) -> str:
    """The next line the bench writes to standard input; empty at its end or after ``timeout`` seconds."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(sys.stdin.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        return ""


def child_check(spec: dict[str, Any], place: Place) -> None:
    """A few serial and in-flight workflows, their results, and what one workflow stores."""
    side = spec["side"]
    if side == "incarnate":
        engine = engine_on(place, DeterministicRunner(), "check")
        try:
            outputs = []
            for _ in range(3):
                handle = engine.start(STEPS)
                engine.run_until_idle()
                outputs.append(handle.result(timeout=RESULT_SECONDS))
            before = engine.parts.journal.recorder.max_notification_id() or 0
            handle = engine.start(STEPS)
            engine.run_until_idle()
            outputs.append(handle.result(timeout=RESULT_SECONDS))
            stored = engine.parts.journal.recorder.select_notifications(before + 1, 1_000)
            footprint = {
                "events": len(stored),
                "instances": len({n.originator_id for n in stored}),
                "bytes": sum(len(n.state) for n in stored),
            }
            writes = count_writes(place, lambda: serial_incarnate(engine, CHECK_WORKFLOWS))
        finally:
            engine.close()
        threaded = engine_on(place, ThreadedRunner(workers=spec["threads"]), "check")
        try:
            handles = [threaded.start(STEPS) for _ in range(10)]
            assert isinstance(threaded.runner, ThreadedRunner)
            if not threaded.runner.wait_until_idle(IDLE_SECONDS):
                raise CheckFailed(f"10 workflows in flight were not done within {IDLE_SECONDS:g} s")
            outputs.extend(handle.result(timeout=RESULT_SECONDS) for handle in handles)
        finally:
            threaded.close()
    else:
        from dbos import DBOS

        app = dbos_app()
        launch_dbos(place)
        try:
            outputs = [app.workflow() for _ in range(3)]
            started = DBOS.start_workflow(app.workflow)
            outputs.append(started.get_result())
            steps = DBOS.list_workflow_steps(started.get_workflow_id())
            footprint = {"steps": len(steps), "rows": 1 + len(steps)}
            writes = count_writes(place, lambda: serial_dbos(app, CHECK_WORKFLOWS))
            batch = [DBOS.start_workflow(app.workflow) for _ in range(10)]
            outputs.extend(handle.get_result() for handle in batch)
        finally:
            DBOS.destroy()
    say("result", outputs=outputs, footprint=footprint, writes=writes)


def count_writes(place: Place, work: Callable[[], float]) -> float | None:
    """Write transactions per workflow of ``work`` on PostgreSQL (transaction ids used); None on SQLite.

    Any writer on the server in the meantime is counted too, so the figure is an upper bound.
    """
    if place.kind != "postgres":
        work()
        return None
    import psycopg

    with psycopg.connect(place.conninfo, autocommit=True) as connection:

        def xid() -> int:
            row = connection.execute("SELECT pg_current_xact_id()::text::bigint").fetchone()
            assert row is not None
            return int(row[0])

        before = xid()
        work()
        after = xid()
    return (after - before - 1) / CHECK_WORKFLOWS


def serial_incarnate(engine: Engine, count: int) -> float:
    """``count`` workflows one after another on a deterministic engine; the seconds they took."""
    begin = time.perf_counter()
    for _ in range(count):
        handle = engine.start(STEPS)
        engine.run_until_idle()
        if handle.result(timeout=RESULT_SECONDS) != EXPECTED:
            raise CheckFailed(f"workflow {handle} returned {handle.result()!r}, not {EXPECTED!r}")
    return time.perf_counter() - begin


def serial_dbos(app: DbosApp, count: int) -> float:
    """``count`` calls of the DBOS workflow one after another; the seconds they took."""
    begin = time.perf_counter()
    for _ in range(count):
        output = app.workflow()
        if output != EXPECTED:
            raise CheckFailed(f"the DBOS workflow returned {output!r}, not {EXPECTED!r}")
    return time.perf_counter() - begin


class Meter:
    """What a child's timed spans took, summed: wall time, the process's CPU and the local server's.

    The process's CPU is every thread's (user and system); the server's is
    that of this host's ``postgres`` processes (see
    :func:`bench._common.server_cpu`), read only on PostgreSQL, outside the
    spans, so the reading costs neither side anything it is charged for.
    """

    def __init__(self, place: Place) -> None:
        self.watch_server = place.kind == "postgres"
        self.seconds = 0.0
        self.cpu = 0.0
        self.server: float | None = 0.0 if self.watch_server else None

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        """Time the block."""
        before = common.server_cpu() if self.watch_server else None
        cpu, begin = time.process_time(), time.perf_counter()
        yield
        self.seconds += time.perf_counter() - begin
        self.cpu += time.process_time() - cpu
        if self.server is not None:
            spent = common.cpu_seconds_between(before, common.server_cpu())
            self.server = None if spent is None else self.server + spent

    def said(self, count: int) -> dict[str, Any]:
        """The result a child says for ``count`` workflows."""
        return {"count": count, "seconds": self.seconds, "cpu": self.cpu, "server": self.server}


def child_serial(spec: dict[str, Any], place: Place) -> None:
    """Warm up, then ``count`` serial workflows, timed."""
    count = spec["count"]
    meter = Meter(place)
    if spec["side"] == "incarnate":
        with engine_on(place, DeterministicRunner(), "serial") as engine:
            serial_incarnate(engine, 5)
            with meter.span():
                serial_incarnate(engine, count)
    else:
        from dbos import DBOS

        app = dbos_app()
        launch_dbos(place)
        try:
            serial_dbos(app, 5)
            with meter.span():
                serial_dbos(app, count)
        finally:
            DBOS.destroy()
    say("result", **meter.said(count))


def child_inflight(spec: dict[str, Any], place: Place) -> None:
    """Warm up with one batch, then ``batches`` batches of ``size`` workflows started at once, timed."""
    batches, size = spec["batches"], spec["size"]
    meter = Meter(place)
    if spec["side"] == "incarnate":
        runner = ThreadedRunner(workers=spec["threads"])
        with engine_on(place, runner, "inflight") as engine:
            for n in range(batches + 1):
                with meter.span() if n else contextlib.nullcontext():
                    handles = [engine.start(STEPS) for _ in range(size)]
                    if not runner.wait_until_idle(IDLE_SECONDS):
                        raise CheckFailed(
                            f"{size} workflows in flight were not done within {IDLE_SECONDS:g} s"
                        )
                    outputs = [handle.result(timeout=RESULT_SECONDS) for handle in handles]
                if outputs != [EXPECTED] * size:
                    raise CheckFailed(f"workflows in flight returned {sorted(set(map(str, outputs)))}")
    else:
        from dbos import DBOS

        app = dbos_app()
        launch_dbos(place)
        try:
            for n in range(batches + 1):
                with meter.span() if n else contextlib.nullcontext():
                    started = [DBOS.start_workflow(app.workflow) for _ in range(size)]
                    results = [handle.get_result() for handle in started]
                if results != [EXPECTED] * size:
                    raise CheckFailed(f"DBOS workflows in flight returned {sorted(set(results))}")
        finally:
            DBOS.destroy()
    say("result", **meter.said(batches * size))


def child_crash(spec: dict[str, Any], place: Place) -> None:
    """Start ``count`` workflows whose first step is held, say their ids, and wait to be killed."""
    count = spec["count"]
    if not os.environ.get(HOLD_VARIABLE):
        raise CheckFailed(f"the crashing process needs {HOLD_VARIABLE} set")
    if spec["side"] == "incarnate":
        engine = engine_on(place, ThreadedRunner(workers=spec["threads"]), engine_id=spec["engine_id"])
        say("ready")
        begin = time.perf_counter()
        ids = [str(engine.start(STEPS)) for _ in range(count)]
    else:
        from dbos import DBOS

        app = dbos_app()
        launch_dbos(place)
        say("ready")
        begin = time.perf_counter()
        ids = [DBOS.start_workflow(app.workflow).get_workflow_id() for _ in range(count)]
    say("started", ids=ids, seconds=time.perf_counter() - begin)
    hear(HOLD_SECONDS)  # killed before; the bench gone (end of input) or a timeout ends it
    os._exit(3)  # no clean shutdown: the held steps never return


def import_driver(place: Place) -> None:
    """Import the third-party modules incarnate's PostgreSQL store uses (driver, pool, recorder).

    incarnate imports them when its first PostgreSQL store opens, so that
    ``import incarnate`` stays free of them; DBOS's side has imported its
    driver (with ``dbos``) before its clock starts, and so does this side.
    """
    if place.kind == "postgres":
        import eventsourcing.postgres  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401


def child_recover(spec: dict[str, Any], place: Place) -> None:
    """A fresh process: say when it begins recovering, recover, and say when the call returned."""
    if spec["side"] == "incarnate":
        import_driver(place)  # as dbos_app() has imported DBOS's before its clock starts
        say("begin", t0=time.time(), cpu=time.process_time())
        engine = engine_on(place, ThreadedRunner(workers=spec["threads"]), engine_id=spec["engine_id"])
        resumed = engine.resume_all()
        say("ready", ready=time.time(), resumed=resumed)
        hear(HOLD_SECONDS)
        engine.close()
    else:
        from dbos import DBOS

        dbos_app()
        say("begin", t0=time.time(), cpu=time.process_time())
        launch_dbos(place)
        say("ready", ready=time.time(), resumed=None)
        hear(HOLD_SECONDS)
        DBOS.destroy()


def child_throughput(spec: dict[str, Any], place: Place) -> None:
    """Counters ticked by sender threads, each in turn through its share, for ``seconds``, timed."""
    instances, seconds = spec["instances"], spec["seconds"]
    runner = ThreadedRunner(workers=spec["threads"])
    with engine_on(place, runner, "throughput") as engine:
        ids = [engine.start(COUNTER).id for _ in range(instances)]
        stored = _count_stored_events(engine)

        senders = min(spec["senders"], len(ids))
        groups = [ids[n::senders] for n in range(senders)]
        sent = [0] * senders
        pool = concurrent.futures.ThreadPoolExecutor(senders, thread_name_prefix="sender")

        def send_until(sender: int, deadline: float) -> None:
            """One tick to each counter of the sender's share in turn, until ``deadline``."""
            while True:
                for instance_id in groups[sender]:
                    engine.send(instance_id, "tick")
                sent[sender] += len(groups[sender])
                if time.perf_counter() >= deadline:
                    return

        def ticks(until: float) -> None:
            for sending in [pool.submit(send_until, sender, until) for sender in range(senders)]:
                sending.result()  # a failed send fails the run
            if not runner.wait_until_idle(IDLE_SECONDS):
                raise CheckFailed(f"the ticks sent were not processed within {IDLE_SECONDS:g} s")

        ticks(0.0)  # warm-up: one tick to every counter
        warm, warm_events = sum(sent), stored()
        say("ready")
        if hear(STARTUP_SECONDS) != "go":
            raise CheckFailed("no go from the bench")
        begin, wall, cpu = time.perf_counter(), time.time(), time.process_time()
        ticks(begin + seconds)
        elapsed = time.perf_counter() - begin
        cpu = time.process_time() - cpu
        pool.shutdown()
        counted = sum(engine.snapshot(instance_id, COUNTER).context.count for instance_id in ids)
        if counted != sum(sent):
            raise CheckFailed(f"the counters counted {counted:,} ticks, {sum(sent):,} were sent")
        say(
            "result",
            macrosteps=sum(sent) - warm,
            events=stored() - warm_events,
            begin=wall,
            end=wall + elapsed,
            seconds=elapsed,
            cpu=cpu,
        )
        # The store's sessions stay open until the bench has read what the server spent on them.
        hear(STARTUP_SECONDS)


def _count_stored_events(engine: Engine) -> Callable[[], int]:
    """A counter of the events the engine's commits store from now on (a commit hook)."""
    lock = threading.Lock()
    counts = {"stored": 0}
    pending: dict[int, int] = {}

    def hook(point: str, uow: Any) -> None:
        with lock:
            if point == "before-commit":
                pending[id(uow)] = sum(len(i.pending_events) for i in uow.pending())
            elif point == "after-commit":
                counts["stored"] += pending.pop(id(uow), 0)

    engine.parts.commits.hooks.append(hook)

    def stored() -> int:
        with lock:
            return counts["stored"]

    return stored


CHILD_JOBS: dict[str, Callable[[dict[str, Any], Place], None]] = {
    "check": child_check,
    "serial": child_serial,
    "inflight": child_inflight,
    "crash": child_crash,
    "recover": child_recover,
    "throughput": child_throughput,
}


def child_main(text: str) -> int:
    """Run one job of a child process; 1, said why, when it fails."""
    spec = json.loads(text)
    pin(spec.get("cpu"))
    EMBED_TASKS[0] = bool(spec.get("embed_tasks", True))
    try:
        CHILD_JOBS[spec["job"]](spec, Place(**spec["place"]))
    except BaseException as error:
        say("failed", error=f"{type(error).__name__}: {error}", trace=traceback.format_exc())
        return 1
    return 0


# ------------------------------------------------- the bench's side of it


CHILDREN: list[subprocess.Popen[bytes]] = []
"""Every child process started, killed at exit if it still runs."""


def kill_children() -> None:
    """Kill every child process still running."""
    for process in CHILDREN:
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)


class Child:
    """One child process running one job; its messages arrive on a queue, its stderr goes to a file."""

    def __init__(self, spec: dict[str, Any], directory: str, *, hold: bool = False) -> None:
        self.name = f"{spec['job']}-{spec['side']}-{label()}"
        self.stderr = Path(directory) / f"{self.name}.err"
        env = dict(os.environ)
        env.pop(HOLD_VARIABLE, None)
        # Compiled modules are cached (outside the tree), as an installed package's are: a module
        # first imported inside a timed span (a store's driver module) loads, not compiles.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(directory) / "pycache")
        if hold:
            env[HOLD_VARIABLE] = "1"
        command = [sys.executable, "-m", "bench.peers", "--internal", json.dumps({**spec, "cpu": next_cpu()})]
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env
            )
        CHILDREN.append(self.process)
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        mark = MARK.encode()
        for line in self.process.stdout:
            if line.startswith(mark):
                self.messages.put(json.loads(line[len(mark) :]))
        self.messages.put(None)

    def tail(self, lines: int = 15) -> str:
        """The last lines the process wrote to its standard error."""
        return "\n".join(self.stderr.read_text(errors="replace").splitlines()[-lines:])

    def failure(self, message: dict[str, Any] | None, what: str) -> CheckFailed:
        """Why the process did not say ``what``."""
        if message is not None and message["kind"] == "failed":
            return CheckFailed(f"{self.name}: {message['error']}\n{message['trace']}")
        return CheckFailed(f"{self.name} ended before saying {what!r}:\n{self.tail()}")

    def expect(self, kind: str, timeout: float) -> dict[str, Any]:
        """The next message, which must be ``kind``; :class:`CheckFailed` otherwise or past ``timeout``."""
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise CheckFailed(
                f"{self.name} did not say {kind!r} within {timeout:g} s:\n{self.tail()}"
            ) from None
        if message is None or message["kind"] != kind:
            raise self.failure(message, kind)
        return message

    def heard(self, kind: str) -> dict[str, Any] | None:
        """The next message if one has arrived (it must be ``kind``), else None."""
        try:
            message = self.messages.get_nowait()
        except queue.Empty:
            return None
        if message is None or message["kind"] != kind:
            raise self.failure(message, kind)
        return message

    def tell(self, line: str) -> None:
        """One line on the process's standard input."""
        stdin = self.process.stdin
        assert stdin is not None
        with contextlib.suppress(BrokenPipeError):
            stdin.write(f"{line}\n".encode())
            stdin.flush()

    def __enter__(self) -> Child:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: object, trace: object) -> None:
        """Finish the process after its job; kill it when the bench is leaving on an error."""
        if kind is None:
            self.finish()
        else:
            self.kill()

    def finish(self, timeout: float = 30.0) -> None:
        """Close its input (a waiting child ends), wait for it, kill it past ``timeout``."""
        stdin = self.process.stdin
        if stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)


def spec_for(job: str, side: str, place: Place, **fields: Any) -> dict[str, Any]:
    """What a child process is told to do."""
    return {"job": job, "side": side, "place": attrs.asdict(place), "embed_tasks": EMBED_TASKS[0], **fields}


def run_child(spec: dict[str, Any], directory: str, timeout: float) -> dict[str, Any]:
    """Run one job to its result."""
    with Child(spec, directory) as child:
        return child.expect("result", STARTUP_SECONDS + timeout)


# ---------------------------------------------------------------- checks


@attrs.frozen
class Footprint:
    """What one side stores and writes per workflow."""

    stored: str
    writes: float | None


def check_side(backend: Backend, side: str, directory: str, threads: int) -> Footprint:
    """A few serial and in-flight workflows must all return the second step's output."""
    place = backend.fresh(side, "check")
    result = run_child(spec_for("check", side, place, threads=threads), directory, 120.0)
    outputs = result["outputs"]
    if outputs != [EXPECTED] * len(outputs):
        raise CheckFailed(f"{side} workflows returned {outputs}, expected {EXPECTED!r} each")
    footprint = result["footprint"]
    if side == "incarnate":
        stored = (
            f"{footprint['events']} events of {footprint['instances']} instances "
            f"({footprint['bytes']:,} bytes of state)"
        )
    else:
        stored = f"1 workflow_status row and {footprint['steps']} operation_outputs rows"
    return Footprint(stored, result["writes"])


def check_store(backend: Backend, directory: str, threads: int) -> None:
    """Check both sides on one store, and say what one workflow stores and writes."""
    for side in SIDES:
        footprint = check_side(backend, side, directory, threads)
        writes = (
            ""
            if footprint.writes is None
            else f"; {footprint.writes:.1f} write transactions per serial workflow"
        )
        print(
            f"check {backend.name} {side}: 4 serial and 10 in-flight workflows returned {EXPECTED!r}; "
            f"one workflow stores {footprint.stored}{writes}: ok"
        )


# ----------------------------------------------------- serial and inflight


@attrs.frozen
class Run:
    """One side's run of the serial or in-flight workload."""

    rate: float
    """Workflows per second."""
    cpu: float
    """Milliseconds of the side's process CPU per workflow (every thread's, user and system)."""
    server: float | None
    """Milliseconds of the local PostgreSQL server's CPU per workflow (None: SQLite, or unknown)."""


def measure_rates(
    backend: Backend, directory: str, workload: str, options: argparse.Namespace
) -> dict[str, list[Run]]:
    """Each side's runs, one per round, the sides back to back in rotating order."""
    runs: dict[str, list[Run]] = {side: [] for side in SIDES}
    for n in range(options.rounds):
        for side in common.rotated(SIDES, n):
            place = backend.fresh(side, f"{workload}{n}")
            if workload == "serial":
                spec = spec_for("serial", side, place, count=options.serial)
                timeout = 60.0 + options.serial
            else:
                spec = spec_for(
                    "inflight",
                    side,
                    place,
                    batches=options.batches,
                    size=options.inflight,
                    threads=options.threads,
                )
                timeout = 60.0 + (options.batches + 1) * options.inflight
            result = run_child(spec, directory, timeout)
            count, server = result["count"], result["server"]
            runs[side].append(
                Run(
                    count / result["seconds"],
                    1e3 * result["cpu"] / count,
                    None if server is None else 1e3 * server / count,
                )
            )
    return runs


RATES_HEADER = (
    f"{'side':<10} {'workflows':>9} {'median wf/s':>11} {'ms/wf':>7} {'min/s':>7} {'max/s':>7} {'spread':>6} "
    f"{'cpu ms/wf':>9} {'server ms/wf':>12}"
)
"""The rates, and the CPU each workflow took: the side's process's, and the local server's (PostgreSQL)."""

RATIO_HEADER = f"{'ratio':<42} {'measured':>9} {'rounds':>13} {'target':>9}  verdict"


def rate_rows(workflows: int) -> Callable[[dict[str, list[Run]]], Iterator[str]]:
    """The rows of one store's rates, a row per side, with the medians of the CPU per workflow."""

    def rows(runs: dict[str, list[Run]]) -> Iterator[str]:
        for side, measured in runs.items():
            values = [run.rate for run in measured]
            median = statistics.median(values)
            cpu = statistics.median(run.cpu for run in measured)
            known = [run.server for run in measured if run.server is not None]
            server = f"{statistics.median(known):.2f}" if known else "-"
            yield (
                f"{side:<10} {workflows:>9,} {median:>11,.1f} {1e3 / median:>7.2f} {min(values):>7,.1f} "
                f"{max(values):>7,.1f} {common.spread(values):>6.0%} {cpu:>9.2f} {server:>12}"
            )

    return rows


def ratio_row(name: str, shown: common.Comparison) -> str:
    """One ratio row."""
    return f"{name:<42} {shown.measured:>8.2f}x {shown.rounds:>13} {shown.wanted:>9}  {shown.verdict}"


CpuReading = tuple[float, float | None]
"""One round's CPU of one side: its process's, and the local server's (None: not read)."""


def cpu_ratio_row(ours: Sequence[CpuReading], theirs: Sequence[CpuReading]) -> str:
    """DBOS's CPU per workflow over incarnate's (no target); the server's in it when every round read it."""
    server = all(used is not None for _, used in (*ours, *theirs))

    def total(reading: CpuReading) -> float:
        cpu, used = reading
        return cpu + ((used or 0.0) if server else 0.0)

    shown = common.compare([total(r) for r in theirs], [total(r) for r in ours], None)
    return ratio_row(f"DBOS / incarnate, CPU per wf{' (+server)' if server else ''}", shown)


def rate_ratio_rows(workload: str) -> Callable[[tuple[str, dict[str, list[Run]]]], Iterator[str]]:
    """incarnate's rate over DBOS's on one store, against that store's target; then DBOS's CPU over ours.

    The CPU ratio has no target: it tells how much of a rate ratio the
    work per workflow explains (process and server together, or the process
    alone on SQLite, whose writes the process does itself).
    """

    def rows(result: tuple[str, dict[str, list[Run]]]) -> Iterator[str]:
        store, runs = result
        target = RATIO_TARGETS[workload].get(store)
        ours, theirs = runs["incarnate"], runs["dbos"]
        shown = common.compare([run.rate for run in ours], [run.rate for run in theirs], target)
        yield ratio_row("incarnate / DBOS, workflows per second", shown)
        yield cpu_ratio_row(
            [(run.cpu, run.server) for run in ours], [(run.cpu, run.server) for run in theirs]
        )

    return rows


# -------------------------------------------------------------- recovery


class IncarnateStore:
    """The bench's read-only view of an incarnate store: which roots are stored, which completed."""

    def __init__(self, place: Place) -> None:
        self.engine = engine_on(place, role="observer")
        self.positions = {STARTED: 1, COMPLETED: 1}
        self.seen: dict[str, set[UUID]] = {STARTED: set(), COMPLETED: set()}
        self.roots: set[UUID] = set()

    def count(self, topic: str) -> int:
        """How many of :attr:`roots` have an event of ``topic``, reading only what is new."""
        recorder = self.engine.parts.journal.recorder
        top = recorder.max_notification_id() or 0
        start = self.positions[topic]
        seen = self.seen[topic]
        while start <= top:
            batch = recorder.select_notifications(start, 1_000, stop=top, topics=[topic])
            seen.update(UUID(str(n.originator_id)) for n in batch if n.originator_id in self.roots)
            if len(batch) < 1_000:
                break
            start = batch[-1].id + 1
        self.positions[topic] = top + 1
        return len(seen)

    def pending(self) -> int:
        """The roots stored."""
        return self.count(STARTED)

    def completed(self) -> int:
        """The roots completed."""
        return self.count(COMPLETED)

    def verify(self, sample: int = 20) -> None:
        """A sample of the completed roots returned the second step's output."""
        for root in sorted(self.roots)[:sample]:
            output = self.engine.instance(root).record.output
            if output != EXPECTED:
                raise CheckFailed(f"recovered workflow {root} returned {output!r}, not {EXPECTED!r}")

    def close(self) -> None:
        """Close the engine."""
        self.engine.close()


class DbosStore:
    """The bench's read-only view of DBOS's system database: workflows by status."""

    def __init__(self, place: Place, backend: Backend) -> None:
        self.roots: set[str] = set()
        if place.kind == "postgres":
            from psycopg import sql

            connection = backend.connection
            table = sql.Identifier(place.schema, "workflow_status")
            statement = sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(table)
            self.read: Callable[[], list[tuple[str, int]]] = lambda: list(
                connection.execute(statement).fetchall()
            )
            self.closing: Callable[[], None] = lambda: None
        else:
            lite = sqlite3.connect(place.path, timeout=30.0, isolation_level=None)
            self.read = lambda: list(
                lite.execute("SELECT status, count(*) FROM workflow_status GROUP BY status")
            )
            self.closing = lite.close

    def statuses(self) -> dict[str, int]:
        """Workflows by status."""
        return dict(self.read())

    def pending(self) -> int:
        """Workflows pending."""
        return self.statuses().get("PENDING", 0)

    def completed(self) -> int:
        """Workflows completed; :class:`CheckFailed` if any failed."""
        statuses = self.statuses()
        failed = {
            status: n for status, n in statuses.items() if status not in ("PENDING", "ENQUEUED", "SUCCESS")
        }
        if failed:
            raise CheckFailed(f"DBOS workflows ended otherwise than SUCCESS: {failed}")
        return statuses.get("SUCCESS", 0)

    def verify(self) -> None:
        """Nothing to add: :meth:`completed` counted every workflow's status."""

    def close(self) -> None:
        """Close the SQLite connection."""
        self.closing()


@attrs.frozen
class Recovery:
    """One recovery of one side, in seconds from the recovering process's start of recovery."""

    pending: int
    build: float
    """How long the crashing process took to start the pending workflows (not timed otherwise)."""
    ready: float
    """Until ``resume_all()`` (incarnate) or ``DBOS.launch()`` returned."""
    first: float
    """Until the bench saw a first workflow completed."""
    last: float
    """Until the bench saw every workflow completed."""
    cpu: float | None = None
    """The recovering process's CPU seconds (every thread's, user and system) until then (None: unknown)."""
    server: float | None = None
    """This host's PostgreSQL server's CPU seconds meanwhile (None: SQLite, or unknown)."""


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` until it holds; :class:`CheckFailed` naming ``what`` past ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.05)


def measure_recovery(
    backend: Backend, directory: str, side: str, label_: str, options: argparse.Namespace
) -> Recovery:
    """Pending workflows left by a killed process, recovered by a fresh one."""
    count = options.pending
    place = backend.fresh(side, label_)
    incarnate = IncarnateStore(place) if side == "incarnate" else None
    # The restarted process is the same engine (its id), as DBOS's is the same executor: it takes
    # its own trees back at once. A new engine id would wait for the killed one's heartbeat to lapse.
    node = f"peers-node-{label()}"
    crashing = Child(
        spec_for("crash", side, place, count=count, threads=options.threads, engine_id=node),
        directory,
        hold=True,
    )
    try:
        crashing.expect("ready", STARTUP_SECONDS)
        started = crashing.expect("started", 60.0 + count * 0.2)
        observer: IncarnateStore | DbosStore
        if incarnate is not None:
            incarnate.roots = {UUID(text) for text in started["ids"]}
            observer = incarnate
        else:
            observer = DbosStore(place, backend)
        if len(set(started["ids"])) != count:
            raise CheckFailed(f"{side} started {len(set(started['ids']))} distinct workflows, not {count}")
        wait_until(lambda: observer.pending() == count, 60.0, f"all {count:,} {side} workflows stored")
    except BaseException:
        if incarnate is not None:
            incarnate.close()
        raise
    finally:
        crashing.kill()
    try:
        if observer.completed():
            raise CheckFailed(f"{side} completed a workflow whose first step was held")
        recover = spec_for("recover", side, place, threads=options.threads, engine_id=node)
        with Child(recover, directory) as recovering:
            begun = recovering.expect("begin", STARTUP_SECONDS)
            t0 = begun["t0"]
            server_before = common.server_cpu() if backend.name == "postgres" else None
            ready: dict[str, Any] | None = None
            first = last = 0.0
            cpu: float | None = None
            server: float | None = None
            deadline = time.monotonic() + STARTUP_SECONDS + 300.0 + count * 0.5
            while True:
                done = observer.completed()
                now = time.time()
                if done and not first:
                    first = now - t0
                if done >= count and not last:
                    last = now - t0
                    used = common.process_cpu(recovering.process.pid)
                    cpu = None if used is None else max(0.0, used - begun["cpu"])
                    server = common.cpu_seconds_between(server_before, common.server_cpu())
                if ready is None:
                    ready = recovering.heard("ready")
                if last and ready is not None:
                    break
                if time.monotonic() > deadline:
                    raise CheckFailed(f"{side} recovered {done:,} of {count:,} workflows by {now - t0:.0f} s")
                if recovering.process.poll() is not None and ready is None:
                    raise recovering.failure(recovering.heard("ready"), "ready")
                time.sleep(POLL_SECONDS)
            observer.verify()
    finally:
        observer.close()
    return Recovery(count, started["seconds"], ready["ready"] - t0, first, last, cpu, server)


def measure_recoveries(
    backend: Backend, directory: str, options: argparse.Namespace
) -> dict[str, list[Recovery]]:
    """Each side's recoveries, one per round, the sides back to back in rotating order."""
    recoveries: dict[str, list[Recovery]] = {side: [] for side in SIDES}
    for n in range(options.rounds):
        for side in common.rotated(SIDES, n):
            recoveries[side].append(measure_recovery(backend, directory, side, f"recovery{n}", options))
    print(
        f"check {backend.name} recovery: {options.pending:,} pending workflows per side and round, "
        "each killed with its first step held, all completed by a fresh process: ok"
    )
    return recoveries


RECOVERY_HEADER = (
    f"{'side':<10} {'pending':>7} {'start s':>7} {'ready s':>7} {'first s':>7} {'min-max':>11} "
    f"{'all s':>7} {'min-max':>13} {'wf/s':>6} {'cpu ms/wf':>9} {'server ms/wf':>12}"
)
"""The times, and the CPU each recovered workflow took: the recovering process's and the server's."""


def span(values: Sequence[float], digits: int) -> str:
    """``min-max``."""
    return f"{min(values):.{digits}f}-{max(values):.{digits}f}"


def per_workflow(seconds: Sequence[float | None], pending: int) -> str:
    """The median of known CPU seconds as milliseconds per workflow; ``-`` when none is known."""
    known = [value for value in seconds if value is not None]
    return f"{1e3 * statistics.median(known) / pending:.2f}" if known else "-"


def recovery_rows(result: dict[str, list[Recovery]]) -> Iterator[str]:
    """One row per side: medians over the rounds of when the recovery call returned, and the completions."""
    for side, recoveries in result.items():
        first = [r.first for r in recoveries]
        last = [r.last for r in recoveries]
        median = statistics.median(last)
        pending = recoveries[0].pending
        yield (
            f"{side:<10} {pending:>7,} {statistics.median(r.build for r in recoveries):>7.2f} "
            f"{statistics.median(r.ready for r in recoveries):>7.2f} {statistics.median(first):>7.2f} "
            f"{span(first, 2):>11} {median:>7.2f} {span(last, 2):>13} {pending / median:>6,.0f} "
            f"{per_workflow([r.cpu for r in recoveries], pending):>9} "
            f"{per_workflow([r.server for r in recoveries], pending):>12}"
        )


def recovery_ratio_rows(result: dict[str, list[Recovery]]) -> Iterator[str]:
    """DBOS's times over incarnate's: above 1 when incarnate is faster; then its CPU over ours, if known."""
    ours, theirs = result["incarnate"], result["dbos"]
    shown = common.compare([r.last for r in theirs], [r.last for r in ours], RECOVERY_ALL_TARGET)
    yield ratio_row("DBOS / incarnate, time to all completed", shown)
    shown = common.compare([r.first for r in theirs], [r.first for r in ours], RECOVERY_FIRST_TARGET)
    yield ratio_row("DBOS / incarnate, time to first completed", shown)
    if all(r.cpu is not None for r in (*ours, *theirs)):  # (every cpu known: "or 0.0" never applies)
        yield cpu_ratio_row(
            [(r.cpu or 0.0, r.server) for r in ours], [(r.cpu or 0.0, r.server) for r in theirs]
        )


# ------------------------------------------------------------ throughput


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` nearly equal whole shares."""
    return [total // parts + (1 if n < total % parts else 0) for n in range(parts)]


@attrs.frozen
class Throughput:
    """One throughput measurement."""

    rate: float
    """Durable macrosteps per second, all processes together."""
    events: float
    """Stored events per second, all processes together (every event their commits stored)."""
    cores: float | None
    """Cores kept busy meanwhile: the bench's processes and, on PostgreSQL, the server (None: unknown)."""


def measure_throughput_once(
    backend: Backend, directory: str, processes: int, label_: str, options: argparse.Namespace
) -> Throughput:
    """Durable macrosteps per second of ``processes`` processes ticking their share of the counters.

    Also the cores busy meanwhile: the processes' CPU time over their
    window, plus the PostgreSQL server's when it runs on this host.
    """
    place = backend.fresh("incarnate", label_)
    engine_on(place, role="tables").close()  # the tables, before several processes open the store
    with contextlib.ExitStack() as stack:
        children = [
            stack.enter_context(
                Child(
                    spec_for(
                        "throughput",
                        "incarnate",
                        place,
                        instances=share,
                        seconds=options.seconds,
                        threads=options.threads,
                        senders=options.senders,
                    ),
                    directory,
                )
            )
            for share in shares(options.instances, processes)
        ]
        for child in children:
            child.expect("ready", STARTUP_SECONDS)
        server_before = common.server_cpu() if backend.name == "postgres" else {}
        for child in children:
            child.tell("go")
        results = [child.expect("result", options.seconds + IDLE_SECONDS) for child in children]
        server_after = common.server_cpu() if backend.name == "postgres" else {}
    window = max(r["end"] for r in results) - min(r["begin"] for r in results)
    server = common.cpu_seconds_between(server_before, server_after)
    cores = None if server is None else (sum(r["cpu"] for r in results) + server) / window
    macrosteps, events = sum(r["macrosteps"] for r in results), sum(r["events"] for r in results)
    return Throughput(float(macrosteps / window), float(events / window), cores)


def measure_throughput(
    backend: Backend, directory: str, options: argparse.Namespace
) -> dict[int, list[Throughput]]:
    """Macrosteps per second by process count, one per round, the counts taking turns."""
    counts = THROUGHPUT_PROCESSES[backend.name]
    rates: dict[int, list[Throughput]] = {count: [] for count in counts}
    for n in range(options.rounds):
        for count in common.rotated(counts, n):
            rates[count].append(
                measure_throughput_once(backend, directory, count, f"throughput{n}p{count}", options)
            )
    processes = " and by ".join(f"{count} process{'es' if count > 1 else ''}" for count in counts)
    print(f"check {backend.name} throughput: every tick sent was counted, by {processes}: ok")
    return rates


THROUGHPUT_HEADER = (
    f"{'processes':>9} {'threads':>7} {'senders':>7} {'instances':>9} {'median/s':>9} {'ms/step':>7} "
    f"{'min/s':>7} {'max/s':>7} {'spread':>6} {'events/s':>9} {'cores busy':>10}"
)


def throughput_rows(
    options: argparse.Namespace,
) -> Callable[[dict[int, list[Throughput]]], Iterator[str]]:
    """One row per process count (the senders each process ran); the cores busy of the host's.

    The cores busy are the bench's processes' and a local server's.
    """

    def rows(runs: dict[int, list[Throughput]]) -> Iterator[str]:
        for count, measured in runs.items():
            values = [run.rate for run in measured]
            median = statistics.median(values)
            known = [run.cores for run in measured if run.cores is not None]
            cores = f"{statistics.median(known):.2f} of {os.cpu_count()}" if known else "-"
            events = statistics.median(run.events for run in measured)
            senders = min(options.senders, *shares(options.instances, count))  # one per counter at most
            yield (
                f"{count:>9} {options.threads:>7} {senders:>7} {options.instances:>9,} "
                f"{median:>9,.0f} {1e3 / median:>7.3f} {min(values):>7,.0f} {max(values):>7,.0f} "
                f"{common.spread(values):>6.0%} {events:>9,.0f} {cores:>10}"
            )

    return rows


def throughput_target_rows(result: tuple[str, dict[int, list[Throughput]]]) -> Iterator[str]:
    """One process of a store against its absolute target; on PostgreSQL, two processes over one."""
    name, runs = result
    rates = {count: [run.rate for run in measured] for count, measured in runs.items()}
    one = rates[1]
    target = THROUGHPUT_TARGETS[name]
    median = statistics.median(one)
    verdict = "met" if median >= target else "not met"
    wanted = f">= {target:,.0f}"
    yield f"{'1 process, macrosteps/s':<42} {median:>9,.0f} {span(one, 0):>13} {wanted:>9}  {verdict}"
    if 2 in rates:
        shown = common.compare(rates[2], one, SCALING_TARGET)
        yield ratio_row("2 processes / 1 process", shown)
        two = statistics.median(rates[2])
        verdict = "met" if two >= TWO_PROCESS_TARGET else "not met"
        wanted = f">= {TWO_PROCESS_TARGET:,.0f}"
        yield f"{'2 processes, macrosteps/s':<42} {two:>9,.0f} {span(rates[2], 0):>13} {wanted:>9}  {verdict}"


# ------------------------------------------------------------------- CLI


@attrs.define
class Results:
    """What each store measured, by workload."""

    serial: dict[str, dict[str, list[Run]]] = attrs.Factory(dict)
    inflight: dict[str, dict[str, list[Run]]] = attrs.Factory(dict)
    recovery: dict[str, dict[str, list[Recovery]]] = attrs.Factory(dict)
    throughput: dict[str, dict[int, list[Throughput]]] = attrs.Factory(dict)


def workloads(text: str) -> list[str]:
    """A comma-separated list of workloads, or ``all``."""
    if text == "all":
        return list(WORKLOADS)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown workload(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(WORKLOADS)} or all"
        )
    return [name for name in WORKLOADS if name in names]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers", description=DESCRIPTION)
    common.add_choice(parser, "store", common.STORES)
    parser.add_argument(
        "--workload",
        type=workloads,
        default=list(WORKLOADS),
        help=f"comma-separated, from {','.join(WORKLOADS)} (default all)",
    )
    parser.add_argument("--quick", action="store_true", help="small sizes and one round, for a smoke run")
    parser.add_argument(
        "--rounds", type=int, help=f"interleaved rounds (default {FULL.rounds}, quick {QUICK.rounds})"
    )
    parser.add_argument(
        "--serial",
        type=int,
        help=f"serial workflows per side and round (default {FULL.serial}, quick {QUICK.serial})",
    )
    parser.add_argument(
        "--inflight", type=int, default=100, help="workflows started at once in a batch (default 100)"
    )
    parser.add_argument(
        "--batches",
        type=int,
        help=f"in-flight batches per side and round (default {FULL.batches}, quick {QUICK.batches})",
    )
    parser.add_argument(
        "--pending",
        type=int,
        help=f"pending workflows to recover (default {FULL.pending:,}, quick {QUICK.pending})",
    )
    parser.add_argument(
        "--seconds",
        type=float,
        help=f"seconds per throughput measurement (default {FULL.seconds:g}, quick {QUICK.seconds:g})",
    )
    parser.add_argument(
        "--instances",
        type=int,
        default=100,
        help="counter instances of the throughput workload (default 100)",
    )
    parser.add_argument(
        "--threads", type=int, default=4, help="worker threads of incarnate's ThreadedRunner (default 4)"
    )
    parser.add_argument(
        "--senders",
        type=int,
        default=64,
        help="client threads of each throughput process, sending the ticks concurrently (default 64; "
        "at most one per counter of the process's share)",
    )
    parser.add_argument(
        "--cpu-latency-zero",
        action="store_true",
        help=f"hold {common.CPU_LATENCY_FILE} at 0 for the whole run (both sides): idle CPUs poll instead "
        "of halting (Linux, root)",
    )
    parser.add_argument(
        "--pin-cpus",
        action="store_true",
        help="pin each child process (both sides) to one CPU, round-robin over the CPUs the bench may use, "
        "so that its threads never move between CPUs (Linux)",
    )
    parser.add_argument(
        "--embed-tasks",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="incarnate's engines embed their task children in their parents (Engine(embed_tasks=True), "
        "the default); --no-embed-tasks gives each a stream of its own",
    )
    parser.add_argument("--internal", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.internal is not None:
        return options
    sizes = QUICK if options.quick else FULL
    for name in attrs.fields_dict(Sizes):
        if getattr(options, name) is None:
            setattr(options, name, getattr(sizes, name))
    for name in ("rounds", "serial", "inflight", "batches", "pending", "instances", "threads", "senders"):
        if getattr(options, name) < 1:
            parser.error(f"--{name} must be at least 1")
    if not options.seconds > 0:
        parser.error("--seconds must be above 0")
    if options.instances < max(THROUGHPUT_PROCESSES["postgres"]):
        parser.error("--instances must be at least the number of processes")
    return options


def bench_store(backend: Backend, directory: str, options: argparse.Namespace, results: Results) -> None:
    """Check, then measure every selected workload on one kind of store."""
    print(f"{backend.name}: {backend.description}")
    if set(options.workload) - {"throughput"}:
        check_store(backend, directory, options.threads)
    for workload in options.workload:
        if workload in ("serial", "inflight"):
            getattr(results, workload)[backend.name] = measure_rates(backend, directory, workload, options)
        elif workload == "recovery":
            results.recovery[backend.name] = measure_recoveries(backend, directory, options)
        else:
            results.throughput[backend.name] = measure_throughput(backend, directory, options)


def report(results: Results, options: argparse.Namespace) -> None:
    """Each workload's tables, a blank line before each."""
    if results.serial:
        print(
            f"\nserial: {options.serial:,} workflows one after another per side and round "
            f"(DBOS: the workflow called; incarnate: start, run_until_idle, result)"
        )
        common.print_table(RATES_HEADER, results.serial, rate_rows(options.serial))
        common.print_table(RATIO_HEADER, named(results.serial), rate_ratio_rows("serial"))
    if results.inflight:
        count = options.inflight * options.batches
        print(
            f"\ninflight: {plural(options.batches, 'batch')} of {options.inflight} workflows started at once "
            f"per side and round (DBOS: start_workflow, get_result; incarnate: start on a ThreadedRunner of "
            f"{options.threads} threads, wait_until_idle, result)"
        )
        common.print_table(RATES_HEADER, results.inflight, rate_rows(count))
        common.print_table(RATIO_HEADER, named(results.inflight), rate_ratio_rows("inflight"))
    if results.recovery:
        print(
            f"\nrecovery: {options.pending:,} pending workflows after SIGKILL, recovered by a fresh process "
            f"(s from its start of recovery; median of {plural(options.rounds, 'round')})"
        )
        common.print_table(RECOVERY_HEADER, results.recovery, recovery_rows)
        common.print_table(RATIO_HEADER, results.recovery, recovery_ratio_rows)
    if results.throughput:
        print(
            f"\nthroughput (incarnate): durable macrosteps/s, {options.instances} counters ticked for "
            f"{options.seconds:g} s per measurement by up to {options.senders} sender threads per process "
            "(one per counter of its share at most), each through its share in turn"
        )
        common.print_table(THROUGHPUT_HEADER, results.throughput, throughput_rows(options))
        common.print_table(RATIO_HEADER, named(results.throughput), throughput_target_rows)


def named(results: dict[str, T]) -> dict[str, tuple[str, T]]:
    """Each store's result paired with the store's name, for rows that depend on the store."""
    return {name: (name, result) for name, result in results.items()}


@contextlib.contextmanager
def open_backend(name: str, directory: str) -> Iterator[Backend | None]:
    """The backend of a store name; None when PostgreSQL is unreachable."""
    if name == "postgres":
        with postgres_backend() as backend:
            yield backend
    else:
        yield sqlite_backend(directory)


def terminated(signum: int, frame: object) -> None:
    """SIGTERM: exit through the ``finally`` clauses, so the child processes are killed."""
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Check, measure and report; 1 when a check fails, 2 when DBOS or the PostgreSQL driver is missing."""
    options = parse(argv)
    if options.internal is not None:
        return child_main(options.internal)
    EMBED_TASKS[0] = options.embed_tasks
    stores = common.selected(options.store, common.STORES)
    if set(options.workload) - {"throughput"} and not dbos_available():
        print(
            f"missing: dbos (DBOS Transact); {DBOS_HINT} (or run with --workload throughput)", file=sys.stderr
        )
        return 2
    if common.missing_driver(stores):
        return 2
    if options.pin_cpus:
        if not hasattr(os, "sched_setaffinity"):
            print("--pin-cpus: this system cannot pin a process to a CPU (Linux only)", file=sys.stderr)
            return 2
        PINNED_CPUS[:] = sorted(os.sched_getaffinity(0))
    signal.signal(signal.SIGTERM, terminated)
    atexit.register(kill_children)
    with common.cpu_latency_zero(options.cpu_latency_zero) as refused:
        if refused is not None:
            print(f"--cpu-latency-zero: {refused}", file=sys.stderr)
            return 2
        return run(options, stores)


def run(options: argparse.Namespace, stores: Sequence[str]) -> int:
    """Check, measure and report every selected store (see :func:`main`)."""
    common.print_environment(("eventsourcing", "psycopg", "incarnate", "dbos", "sqlalchemy"))
    if options.cpu_latency_zero:
        print(f"{common.CPU_LATENCY_FILE} held at 0 for the whole run: idle CPUs poll instead of halting")
    if PINNED_CPUS:
        print(
            f"each child process pinned to one CPU, round-robin over CPUs {PINNED_CPUS} (both sides alike; "
            "PostgreSQL's server unpinned)"
        )
    print(
        f"workloads: {', '.join(options.workload)}; {plural(options.rounds, 'round')}, the sides back to "
        f"back in rotating order, a fresh process and store per side and run; median of the rounds reported"
    )
    tasks = "embedded in their parents (embed_tasks=True)" if EMBED_TASKS[0] else "with streams of their own"
    print(f"incarnate's task children: {tasks}\n")
    results = Results()
    try:
        with tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory:
            for name in stores:
                with open_backend(name, directory) as backend:
                    if backend is None:
                        continue
                    try:
                        bench_store(backend, directory, options, results)
                    except CheckFailed as error:
                        print(f"check {name}: FAILED, {error}")
                        return 1
                    finally:
                        kill_children()
    finally:
        kill_children()
    if not (results.serial or results.inflight or results.recovery or results.throughput):
        print("no store could be measured")
        return 0
    report(results, options)
    return 0


if __name__ == "__main__":
    sys.exit(main())
