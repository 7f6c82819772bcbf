"""Faults: the store (or one worker) fails under load; afterwards the fleet finishes every tree, once.

Two ``incarnate worker`` processes serve ``job`` trees (``fault_charts``: two
children that each run a task and then wait through a chain of timers, a
timer on the root, and pings sent from a client). A client process
(``faults.drive``) starts 40 trees over 4 s and sends each three pings,
through the fault, retrying what the store refuses. Once half the trees have
started, one fault hits:

1. ``pg-restart``: the private PostgreSQL cluster restarts (``pg_ctl restart -m fast``);
2. ``pg-stop``: it is stopped (``pg_ctl stop -m fast``), and started again after a while;
3. ``pg-freeze``: every one of its server processes is SIGSTOPped, then SIGCONTed;
4. ``sqlite-lock``: another process holds the SQLite file's write lock (``BEGIN EXCLUSIVE``)
   past the lock timeout of the workers and the client;
5. ``worker-freeze``: the worker holding most unfinished trees is SIGSTOPped past its lease
   (3 s), then SIGCONTed.

Within the fault's duration plus ``GRACE`` seconds after it ended, every
tree must be done (nothing stranded); then every accepted ping must have
been processed exactly once, every child born once, every instance ended
once, a task body run again only where the fault explains it
(``faults.examine``), and in ``worker-freeze`` every tree of the frozen
worker moved to the other one during the freeze. A failure lists the
stranded trees with the state of each of their instances (status, owner and
whether it is live, inbox, timers), the other problems, and each worker's
log in brief (its failed units of work, the lines naming a stuck instance,
its last lines).

The figures are printed (``pytest -s``): how long after the store answered
again (after the frozen worker's lease lapsed) the last instance finished,
and how long the last child that was running across the fault waited for
its next step.

PostgreSQL faults run on a private cluster (``faults.private_postgres``),
never the shared server. The short variants (faults of seconds: about 90 s
for the five on a 2-core machine) always run; ``INCARNATE_FAULTS_LONG=1``
adds the long ones (a 60 s outage, a 20 s freeze, a 45 s lock past the
default 30 s lock timeout, a 30 s worker freeze; about four more minutes).
Every wait is bounded; every process is killed at the end.
"""

from __future__ import annotations

import os
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import attrs
import pytest

from aggregates import Instance
from incarnate import Engine, SQLiteStorage, Storage
from tests.integration.chaos_charts import EFFECTS_VARIABLE, WorkerProcess, killing, read_runs, wait_for
from tests.integration.fault_charts import CHARTS
from tests.integration.faults import (
    Fault,
    Journal,
    Load,
    PostgresCluster,
    evidence,
    examine,
    failed_units,
    log_summary,
    marked,
    private_postgres,
    repeats,
    spawn_cli_worker,
    spawn_module,
    unfinished,
)

LONG = os.environ.get("INCARNATE_FAULTS_LONG") == "1"
GRACE = 15.0
"""Seconds after the fault's end, beyond its duration, within which every tree must be done."""
WORKERS = 2


@attrs.frozen
class Scenario:
    """One fault under load, and the workers' settings for it."""

    name: str
    seconds: float
    """How long the fault lasts (a restart lasts as long as it takes)."""
    long: bool = False
    lease: float = 30.0
    """The workers' ``--lease``: the default, except where a worker must lose its lease."""
    recovery_ttl: float = 2.0
    env: tuple[tuple[str, str], ...] = ()
    """Environment of the workers and the client (``SQLITE_LOCK_TIMEOUT`` shortens a short variant)."""

    @property
    def store(self) -> str:
        """``sqlite`` or ``postgres`` (the private cluster)."""
        return "sqlite" if self.name.startswith("sqlite") else "postgres"

    @property
    def load(self) -> Load:
        """The client's load: 60 trees in a long run, else 40."""
        return Load(trees=60 if self.long else 40)

    @property
    def id(self) -> str:
        """The test id: variant and name."""
        return f"{'long' if self.long else 'short'}-{self.name}"


SCENARIOS = [
    Scenario("pg-restart", 0.0),
    Scenario("pg-stop", 8.0),
    Scenario("pg-freeze", 5.0),
    # The short lock outlasts a 3 s lock timeout; the long one the default 30 s.
    Scenario("sqlite-lock", 8.0, env=(("SQLITE_LOCK_TIMEOUT", "3"),)),
    # Long enough for the recovery manager (a scan every 5 s) to move every tree on a busy host.
    Scenario("worker-freeze", 15.0, lease=3.0, recovery_ttl=1.0),
    Scenario("pg-restart", 0.0, long=True),
    Scenario("pg-stop", 60.0, long=True),
    Scenario("pg-freeze", 20.0, long=True),
    Scenario("sqlite-lock", 45.0, long=True),
    Scenario("worker-freeze", 30.0, long=True, lease=3.0, recovery_ttl=1.0),
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresCluster]:
    """One private PostgreSQL cluster for the module (each test gets its own schema); removed at the end."""
    with private_postgres() as running:
        yield running


@attrs.define
class Trial:
    """The processes of one scenario, and what it needs to inject its fault."""

    scenario: Scenario
    directory: Path
    storage: Storage
    workers: list[WorkerProcess]
    processes: list[WorkerProcess]
    journal: Path
    cluster: PostgresCluster | None = None
    frozen: WorkerProcess | None = None
    owned_at_freeze: list[UUID] = attrs.field(factory=list)


def restart(run: Trial) -> Fault:
    """``pg_ctl restart -m fast``."""
    assert run.cluster is not None
    began = time.time()
    run.cluster.restart()
    return Fault(run.scenario.name, began, time.time())


def stop(run: Trial) -> Fault:
    """``pg_ctl stop -m fast``, a pause, ``pg_ctl start``."""
    assert run.cluster is not None
    began = time.time()
    run.cluster.stop()
    time.sleep(max(0.0, began + run.scenario.seconds - time.time()))
    run.cluster.start()
    return Fault(run.scenario.name, began, time.time())


def freeze_server(run: Trial) -> Fault:
    """SIGSTOP every server process, a pause, SIGCONT."""
    assert run.cluster is not None
    try:
        run.cluster.freeze()
        began = time.time()
        time.sleep(run.scenario.seconds)
    finally:
        run.cluster.thaw()
    return Fault(run.scenario.name, began, time.time())


def hold_lock(run: Trial) -> Fault:
    """Another process holds the SQLite file's write lock (``BEGIN EXCLUSIVE``) for a while."""
    assert isinstance(run.storage, SQLiteStorage)
    holder = spawn_module(
        run.directory, "lock-holder", {}, "hold-sqlite", "--path", run.storage.path,
        "--seconds", str(run.scenario.seconds),
    )  # fmt: skip
    run.processes.append(holder)
    began = marked(holder, "locked", 30.0)
    ended = marked(holder, "released", run.scenario.seconds + 30.0)
    return Fault(run.scenario.name, began, ended)


def freeze_worker(run: Trial) -> Fault:
    """SIGSTOP the worker that owns most unfinished trees past its lease, then SIGCONT it."""
    with Engine(CHARTS, storage=run.storage) as engine:
        roots = list(Journal.read(run.journal).roots.values())
        owners = {root: engine.instance(root).record.owner for root in unfinished(engine, roots)}
    counts = Counter(owners.values())
    run.frozen = max(run.workers, key=lambda worker: counts[worker.engine_id])
    run.owned_at_freeze = [root for root, owner in owners.items() if owner == run.frozen.engine_id]
    try:
        run.frozen.freeze()
        began = time.time()
        time.sleep(run.scenario.seconds)
    finally:
        run.frozen.thaw()
    return Fault(run.scenario.name, began, time.time())


FAULTS: dict[str, Callable[[Trial], Fault]] = {
    "pg-restart": restart,
    "pg-stop": stop,
    "pg-freeze": freeze_server,
    "sqlite-lock": hold_lock,
    "worker-freeze": freeze_worker,
}


@attrs.define
class Outcome:
    """What one scenario came to: the stranded trees and their evidence, the other problems, the figures."""

    scenario: Scenario
    fault: Fault
    trees: int
    stuck: list[UUID]
    report: str
    logs: str
    problems: list[str]
    figures: dict[str, float | int | str]
    repeats: int
    dropped: int
    """Units of work the workers logged as failed."""

    def summary(self) -> str:
        """One line of measured figures."""
        figures = self.figures
        since = "the lease lapsed" if self.scenario.name == "worker-freeze" else "the store answered again"
        moved = ""
        if "moved" in figures:
            moved = (
                f"; trees moved off the frozen worker {figures['moved']} (stayed {figures['stayed']}), "
                f"the last {figures.get('last_move_after_lapse', '-')}s after its lease lapsed"
            )
        return (
            f"fault suite {self.scenario.id}: {self.trees} trees, fault {figures['fault_seconds']}s; "
            f"stranded {len(self.stuck)}; of {figures['measured_trees']} trees measured, "
            f"{figures['done_after_recovery']} finished after {since}, the last instance "
            f"{figures['last_done_after_recovery']}s after it; of {figures['parts_across']} parts running "
            f"across it, the last moved again {figures['last_part_resumed_after_recovery']}s after it; "
            f"client refusals {figures['client_refusals']}; "
            f"task bodies run again {self.repeats}; units failed in workers' logs {self.dropped}{moved}"
        )

    def message(self) -> str:
        """The failure message: the stranded trees and their state, the other problems, the workers' logs."""
        fault, problems = self.fault, self.problems
        parts = [
            f"{self.scenario.id}: {len(self.stuck)} of {self.trees} trees stranded "
            f"{fault.duration + GRACE:.0f}s after a {fault.duration:.1f}s fault ended; "
            f"{len(problems)} other problem(s)",
            self.summary(),
        ]
        if self.stuck:
            parts.append("stranded trees:\n" + self.report)
        if problems:
            parts.append("problems:\n" + "\n".join(f"- {p}" for p in problems[:25]))
            if len(problems) > 25:
                parts.append(f"... and {len(problems) - 25} more")
        parts.append("worker logs:\n" + self.logs)
        return "\n".join(parts)


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_the_fleet_finishes_every_tree_once_after_a_fault(
    scenario: Scenario, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """After the fault every tree is done within its duration + 15 s, every accepted event processed once."""
    if scenario.long and not LONG:
        pytest.skip("a long fault (set INCARNATE_FAULTS_LONG=1 to run it)")
    cluster: PostgresCluster | None = None
    if scenario.store == "postgres":
        cluster = request.getfixturevalue("cluster")
        storage = cluster.storage(f"f_{uuid.uuid4().hex[:12]}")
    else:
        storage = Storage.sqlite(str(tmp_path / "faults.db"))
    outcome = run_scenario(scenario, tmp_path, storage, cluster)
    print("\n" + outcome.summary())
    if outcome.stuck or outcome.problems:
        pytest.fail(outcome.message(), pytrace=False)


def run_scenario(
    scenario: Scenario, directory: Path, storage: Storage, cluster: PostgresCluster | None
) -> Outcome:
    """Start the fleet and the client, inject the fault once half the trees started, wait, examine."""
    with Engine(CHARTS, storage=storage):
        pass  # the tables exist before the fleet starts
    load = scenario.load
    db = storage.url()
    env = {EFFECTS_VARIABLE: str(directory / "effects.log"), **dict(scenario.env)}
    options = (
        "--threads", "4", "--poll-interval", "0.2", "--lease", f"{scenario.lease:g}",
        "--recovery-ttl", f"{scenario.recovery_ttl:g}",
    )  # fmt: skip
    journal = directory / "journal.jsonl"
    with killing([]) as processes:
        workers = [spawn_cli_worker(directory, db, f"w{n}", env, *options) for n in range(WORKERS)]
        processes.extend(workers)
        for worker in workers:
            worker.wait_started()
        # The client gives up on what it could not deliver long after the test's own deadline.
        until = time.time() + load.spread + load.first + load.pings * load.gap + 2 * scenario.seconds + 60
        client = spawn_module(directory, "client", env, *load.arguments(db, journal, until))
        processes.append(client)
        trial = Trial(scenario, directory, storage, workers, processes, journal, cluster)
        half = load.trees // 2
        assert wait_for(lambda: len(Journal.read(journal).roots) >= half, 60.0), (
            f"the client did not start {half} trees:\n{client.output()[-2000:]}"
        )
        fault = FAULTS[scenario.name](trial)
        deadline = fault.ended + fault.duration + GRACE
        with Engine(CHARTS, storage=storage) as engine:
            while time.time() < deadline:
                found = Journal.read(journal)
                if found.ended and not unfinished(engine, list(found.roots.values())):
                    break
                time.sleep(0.5)
            found = Journal.read(journal)
            stuck = unfinished(engine, list(found.roots.values()))
            # Evidence first, while the workers still run (a graceful stop retires their heartbeats).
            report = evidence(engine, stuck, found, fault.ended) if stuck else ""
            logs = "\n".join(log_summary(worker, stuck) for worker in workers)
            if client.running():
                client.kill()
            for worker in workers:
                worker.stop()
            found = Journal.read(journal)
            runs = read_runs(directory / "effects.log")
            if trial.frozen is None:
                findings = examine(engine, found, fault, runs, stuck=stuck)
            else:  # measured from the moment the frozen worker's lease lapsed, over the trees it held
                findings = examine(
                    engine,
                    found,
                    fault,
                    runs,
                    frozen_pid=trial.frozen.pid,
                    affected=trial.owned_at_freeze,
                    recovered=fault.began + scenario.lease,
                    stuck=stuck,
                )
                problems, figures = handover(engine, trial, fault)
                findings.problems.extend(problems)
                findings.figures.update(figures)
    return Outcome(
        scenario,
        fault,
        len(found.roots),
        stuck,
        report,
        logs,
        findings.problems,
        findings.figures,
        repeats(runs),
        sum(failed_units(worker) for worker in workers),
    )


def handover(engine: Engine, trial: Trial, fault: Fault) -> tuple[list[str], dict[str, float | int | str]]:
    """Every tree the frozen worker held must have moved to another worker during the freeze.

    A tree it held that finished before the freeze (between the owners'
    read and the SIGSTOP) is left out. Returns the problems and the figures
    (trees moved, and the last move in seconds after the lease lapsed).
    """
    frozen = trial.frozen
    assert frozen is not None
    if not trial.owned_at_freeze:
        return [
            f"the frozen worker {frozen.engine_id} held no unfinished tree: the scenario proved nothing"
        ], {}
    lapsed = fault.began + trial.scenario.lease
    moves: dict[UUID, float] = {}
    stayed = []
    for root in trial.owned_at_freeze:
        events = engine.events_of(root)
        ends = [e for e in events if isinstance(e, Instance.Completed)]
        if ends and ends[0].timestamp.timestamp() < fault.began:
            continue
        claims = [
            e.timestamp.timestamp()
            for e in events
            if isinstance(e, Instance.Claimed)
            and e.previous == frozen.engine_id
            and fault.began <= e.timestamp.timestamp() <= fault.ended
        ]
        if claims:
            moves[root] = claims[0]
        else:
            stayed.append(root)
    problems = []
    if stayed:
        problems.append(
            f"{len(stayed)} of the trees the frozen worker {frozen.engine_id} held did not move to another "
            f"worker during its {fault.duration:.1f}s freeze (lease {trial.scenario.lease:g}s): "
            f"{[str(root) for root in stayed[:8]]}"
        )
    figures: dict[str, float | int | str] = {"moved": len(moves), "stayed": len(stayed)}
    if moves:
        figures["last_move_after_lapse"] = round(max(moves.values()) - lapsed, 2)
    return problems, figures
