"""Chaos: worker processes are killed and frozen at random while call trees run; every tree completes once.

A controller (this process) starts ``order`` call trees (``chaos_charts``:
fan-out children whose tasks log their side effects by idempotency key, a
task that fails its first attempt and is retried, a timer, and a human gate)
from a plain engine, answers each gate through the API a moment after the
tree reaches it, and every few seconds either SIGKILLs a random worker (a new
one replaces it) or SIGSTOPs one and SIGCONTs it after more than its lease. The thawing runs on
a thread of its own: on SQLite a worker frozen inside a write transaction
holds the file's lock, and the controller's own writes wait for it.

At the end: every tree completed exactly once with every outcome and its
gate's answer (nothing accepted is lost), nothing is stuck past the deadline,
every instance ended once, and a task body ran again — possibly overlapping
the first run, on another worker — only when the worker of the earlier run
was killed or frozen between the two starts. The counts of such repeats are
printed (``pytest -s``).

Two variants: three workers on PostgreSQL and two worker processes on one
SQLite file. The default sizes keep the whole module under about 90 s; set
``INCARNATE_CHAOS_LONG=1`` for the long run (200 trees and three minutes of
chaos on PostgreSQL). ``INCARNATE_CHAOS_SEED`` replays a run's random choices.
Every wait is bounded; every process is killed in a ``finally``.
"""

from __future__ import annotations

import itertools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from uuid import UUID

import attrs
import pytest

from aggregates import Instance
from incarnate import Engine, Storage
from tests.integration.chaos_charts import (
    CHARTS,
    EFFECTS_VARIABLE,
    REPOSITORY,
    TASKS,
    Run,
    WorkerProcess,
    killing,
    read_runs,
    spawn_worker,
)
from tests.stores import storage_for

LONG = os.environ.get("INCARNATE_CHAOS_LONG") == "1"
SEED = int(os.environ.get("INCARNATE_CHAOS_SEED", random.SystemRandom().randrange(1_000_000)))
LEASE = 2.0
"""Seconds one heartbeat keeps a worker live."""
WORKER_OPTIONS = ("--threads", "4", "--lease", str(LEASE), "--ttl", "0.5", "--scan-interval", "0.5")


@attrs.frozen
class Size:
    """How big one chaos run is."""

    store: str
    workers: int
    trees: int
    chaos: float
    """Seconds of chaos (trees are started during the first three quarters of it)."""
    drain: float
    """Seconds after the chaos within which every tree must have completed."""


SIZES = (
    [Size("postgres", 3, 200, 180.0, 240.0), Size("sqlite", 2, 60, 60.0, 120.0)]
    if LONG
    else [Size("postgres", 3, 40, 20.0, 45.0), Size("sqlite", 2, 12, 10.0, 45.0)]
)


@attrs.frozen
class Disruption:
    """A worker killed (``until`` None: for good) or frozen from ``at`` until ``until``."""

    engine_id: str
    kind: str
    at: float
    until: float | None


class Fleet:
    """The worker processes of one run, and what the controller did to them."""

    def __init__(self, directory: Path, db: str, env: dict[str, str], processes: list[WorkerProcess]) -> None:
        self.directory = directory
        self.db = db
        self.env = env
        self.processes = processes
        self.slots: list[WorkerProcess] = []
        self.thaw_at: dict[int, float] = {}
        self.frozen_since: dict[int, float] = {}
        self.disruptions: list[Disruption] = []
        self.spawned = 0
        self.lock = threading.Lock()
        """Held while a worker is killed, frozen or thawed (by the controller or the thawing thread)."""

    def spawn(self) -> WorkerProcess:
        """A new worker process (not waited for)."""
        worker = spawn_worker(self.directory, self.db, f"w{self.spawned}", self.env, *WORKER_OPTIONS)
        worker.engine_id = f"w{self.spawned}-{worker.pid}"  # the engine id the worker program gives itself
        self.spawned += 1
        self.processes.append(worker)
        return worker

    def calm(self) -> list[int]:
        """The slots whose worker runs and is not frozen."""
        with self.lock:
            return [s for s in range(len(self.slots)) if s not in self.thaw_at and self.slots[s].running()]

    def kill(self, slot: int) -> None:
        """SIGKILL the worker in ``slot`` and start a new one in its place."""
        with self.lock:
            self._kill(slot)

    def _kill(self, slot: int) -> None:
        worker = self.slots[slot]
        self.disruptions.append(Disruption(worker.engine_id, "kill", time.time(), None))
        worker.process.send_signal(signal.SIGKILL)
        worker.process.wait(10)
        self.slots[slot] = self.spawn()

    def freeze(self, slot: int, rng: random.Random) -> None:
        """SIGSTOP the worker in ``slot``; it is thawed after more than its lease."""
        with self.lock:
            worker = self.slots[slot]
            worker.freeze()
            self.frozen_since[slot] = time.time()
            self.thaw_at[slot] = time.monotonic() + LEASE + rng.uniform(0.5, 1.5)

    def thaw(self, slot: int) -> None:
        """SIGCONT the worker in ``slot``."""
        worker = self.slots[slot]
        worker.thaw()
        self.disruptions.append(
            Disruption(worker.engine_id, "freeze", self.frozen_since.pop(slot), time.time())
        )
        del self.thaw_at[slot]

    def thaw_due(self, everything: bool = False) -> None:
        """Thaw the workers whose freeze has lasted long enough (or all of them)."""
        with self.lock:
            for slot, when in list(self.thaw_at.items()):
                if everything or time.monotonic() >= when:
                    self.thaw(slot)

    @contextmanager
    def thawing(self, limit: float) -> Iterator[None]:
        """Thaw due workers every 50 ms from a thread of its own, for at most ``limit`` seconds.

        Not from the controller's loop: on SQLite a worker frozen inside a
        write transaction holds the file's lock, so a ``start`` or ``send``
        of the controller waits until that worker is thawed.
        """
        stop = threading.Event()
        deadline = time.monotonic() + limit

        def thaw_while_running() -> None:
            while not stop.wait(0.05) and time.monotonic() < deadline:
                self.thaw_due()

        thread = threading.Thread(target=thaw_while_running, name="thawing", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(10)
            self.thaw_due(everything=True)

    def output(self) -> str:
        """The last lines of every worker's log."""
        return "\n".join(f"--- {p.name}\n" + "\n".join(p.output().splitlines()[-15:]) for p in self.processes)


class Gates:
    """Answers each tree's gate through the API, a random moment after the tree reached it."""

    def __init__(self, engine: Engine, rng: random.Random) -> None:
        self.engine = engine
        self.rng = rng
        self.due: dict[UUID, float] = {}
        self.answered: set[UUID] = set()
        self.checked = 0.0

    def tick(self, roots: list[UUID]) -> None:
        """Answer the due gates; every half second, look for trees newly at their gate."""
        now = time.monotonic()
        for root, when in list(self.due.items()):
            if now >= when:
                self.engine.send(root, "answer", {"root": str(root)}, key=f"answer-{root}")
                self.answered.add(root)
                del self.due[root]
        if now - self.checked < 0.5:
            return
        self.checked = now
        for root in roots:
            waiting = root not in self.answered and root not in self.due
            if waiting and self.engine.snapshot(root).configuration == ("gate",):
                self.due[root] = now + self.rng.uniform(0.0, 2.0)


def unfinished(engine: Engine, roots: list[UUID]) -> list[UUID]:
    """The roots that have not finished yet."""
    return [root for root in roots if not engine.instance(root).record.status.finished]


@pytest.mark.slow
@pytest.mark.parametrize("size", SIZES, ids=[size.store for size in SIZES])
def test_call_trees_complete_exactly_once_while_workers_are_killed_and_frozen(
    size: Size, tmp_path: Path
) -> None:
    """Under random SIGKILL/SIGSTOP of workers every tree completes once; repeats only after a lost lease."""
    rng = random.Random(SEED)
    effects = tmp_path / "effects.log"
    print(f"\nchaos on {size.store}: seed {SEED} (INCARNATE_CHAOS_SEED={SEED} replays its choices)")
    with (
        storage_for(size.store, tmp_path) as storage,
        Engine(CHARTS, TASKS, storage=storage) as client,
        killing([]) as processes,
    ):
        fleet = Fleet(tmp_path, storage.url(), {EFFECTS_VARIABLE: str(effects)}, processes)
        fleet.slots = [fleet.spawn() for _ in range(size.workers)]
        for worker in fleet.slots:
            worker.wait_started()
        gates = Gates(client, rng)
        roots: list[UUID] = []
        began = time.monotonic()
        next_disruption = began + rng.uniform(1.0, 3.0)
        with fleet.thawing(size.chaos + 60.0):
            while (now := time.monotonic()) < began + size.chaos:
                # Trees start all through the first three quarters of the chaos.
                while len(roots) < size.trees * min(1.0, (now - began) / (0.75 * size.chaos)) + 1:
                    if len(roots) == size.trees:
                        break
                    roots.append(client.start("order"))
                if now >= next_disruption:
                    calm = fleet.calm()
                    if len(calm) >= 2:  # one worker at least keeps working
                        slot = rng.choice(calm)
                        if rng.random() < 0.5:
                            fleet.kill(slot)
                        else:
                            fleet.freeze(slot, rng)
                    next_disruption = now + rng.uniform(1.5, 3.5)
                gates.tick(roots)
                time.sleep(0.05)
        deadline = time.monotonic() + size.drain
        while unfinished(client, roots) and time.monotonic() < deadline:
            gates.tick(roots)
            time.sleep(0.1)
        stuck = unfinished(client, roots)
        assert not stuck, f"{len(stuck)} trees stuck, e.g. {stuck[0]} (seed {SEED}):\n{fleet.output()}"
        for worker in fleet.slots:
            worker.stop()
        kills = sum(d.kind == "kill" for d in fleet.disruptions)
        freezes = len(fleet.disruptions) - kills
        print(f"chaos: {kills} workers killed, {freezes} frozen past their lease, {len(roots)} trees")
        assert kills + freezes >= 2, "too little chaos to prove anything"
        assert gates.answered == set(roots)
        check_trees(client, roots)
        check_runs(client, read_runs(effects), fleet.disruptions)


OPEN_AT_ONCE = """
import sys, time
from incarnate import Engine, Storage
from tests.integration.chaos_charts import CHARTS, TASKS
storage = Storage.from_url(sys.argv[1])
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # every process opens the store at this moment
for _ in range(3):
    Engine(CHARTS, TASKS, storage=storage).close()
"""


@pytest.mark.slow
def test_a_fleet_starting_at_once_on_postgresql_opens_the_store_in_every_process(tmp_path: Path) -> None:
    """Six processes opening one existing PostgreSQL store at the same moment all succeed."""
    with storage_for("postgres", tmp_path) as storage, Engine(CHARTS, TASKS, storage=storage):
        open_at_once(storage, 6)


@pytest.mark.slow
def test_a_fleet_starting_at_once_on_a_new_postgresql_schema_creates_it_once_in_every_process(
    tmp_path: Path,
) -> None:
    """Six processes opening one empty PostgreSQL schema at the same moment all succeed.

    The first start of a fleet: every process creates the library's composite
    types, tables and functions and ours, and only one may win each.
    """
    with storage_for("postgres", tmp_path) as storage:
        open_at_once(storage, 6)
        with Engine(CHARTS, TASKS, storage=storage) as engine:
            stored = engine.parts.journal.recorder.select_notifications(start=1, limit=1_000)
            assert len(stored) == len(engine.charts)  # each chart's version recorded once, nothing else


def open_at_once(storage: Storage, count: int) -> None:
    """``count`` processes each open ``storage`` three times, the first all at one moment; none fails."""
    at = time.time() + 3.0
    command = [sys.executable, "-c", OPEN_AT_ONCE, storage.url(), str(at)]
    processes = [
        subprocess.Popen(command, cwd=REPOSITORY, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(count)
    ]
    try:
        results = [process.communicate(timeout=60) for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    failed = [
        err.decode(errors="replace")[-300:]
        for (_, err), p in zip(results, processes, strict=True)
        if p.returncode
    ]
    assert not failed, failed


def check_trees(engine: Engine, roots: list[UUID]) -> None:
    """Every tree completed once with all its outcomes and its answer; every instance ended once."""
    by_root: dict[UUID, list[Instance]] = defaultdict(list)
    for instance in engine.instances():
        by_root[instance.record.root].append(instance)
    assert set(by_root) == set(roots)
    for root in roots:
        output = engine.instance(root).record.output
        assert engine.instance(root).record.status.value == "done", output
        assert isinstance(output, dict)
        assert output["answer"] == {"root": str(root)}  # the accepted answer was processed
        assert isinstance(output["items"], dict)
        assert sorted(output["items"]) == ["a", "b"]
        assert isinstance(output["flaky"], dict) and output["flaky"]["attempt"] == 2  # retried once
        for instance in by_root[root]:
            events = engine.events_of(instance.id)
            ends = [
                e for e in events if isinstance(e, Instance.Completed | Instance.Failed | Instance.Cancelled)
            ]
            assert len(ends) == 1, f"{instance.record.name} {instance.id} ended {len(ends)} times"
            claims = [e.incarnation for e in events if isinstance(e, Instance.Claimed)]
            assert claims == list(range(2, 2 + len(claims)))  # each claim bumps the incarnation once
        # The root, two items and their tasks, and the flaky task's two attempts.
        assert len(by_root[root]) == 7, [i.record.name for i in by_root[root]]


def claims_of(client: Engine, run: Run) -> list[tuple[float, str, str]]:
    """The stored claims of a run's task instance: (time, new owner, previous owner), oldest first."""
    return [
        (event.timestamp.timestamp(), event.owner, event.previous)
        for event in client.events_of(UUID(run.instance))
        if isinstance(event, Instance.Claimed)
    ]


def check_runs(client: Engine, runs: list[Run], disruptions: list[Disruption]) -> None:
    """A task body ran again only after its earlier run's worker lost it mid-task (counts printed).

    A worker loses an incarnation when it is killed or frozen past its lease,
    or when its heartbeat lapses for any other reason (a starved process on a
    loaded host is, to the fleet, a frozen one): the store then shows the
    incarnation claimed away from it between the two runs. Any other repeat
    fails, naming the runs and the stored claims.
    """
    disrupted: dict[str, list[Disruption]] = defaultdict(list)
    for disruption in disruptions:
        disrupted[disruption.engine_id].append(disruption)

    def signalled(earlier: Run, later: Run) -> bool:
        """Whether the earlier run's worker was killed or frozen between the two starts."""
        return any(
            d.at <= later.start and (d.until is None or d.until >= earlier.start)
            for d in disrupted[earlier.worker]
        )

    def lapsed(earlier: Run, later: Run, claims: list[tuple[float, str, str]]) -> bool:
        """Whether the store shows the incarnation claimed away from the earlier worker in between."""
        return any(
            earlier.start <= at <= later.start and previous == earlier.worker != owner
            for at, owner, previous in claims
        )

    assert runs, "no task ran"
    per_key: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        per_key[run.key].append(run)
    repeats = overlaps = unsignalled = 0
    for key, key_runs in per_key.items():
        for earlier, later in itertools.pairwise(key_runs):
            repeats += 1
            if earlier.end is None or earlier.end > later.start:
                overlaps += 1
            if signalled(earlier, later):
                continue
            claims = claims_of(client, earlier)
            assert lapsed(earlier, later, claims), (
                f"{key} ran again though its worker kept it: {earlier} then {later}; claims {claims}"
            )
            unsignalled += 1
    print(
        f"side effects run again after their worker lost them mid-task: {repeats} "
        f"(killed or frozen: {repeats - unsignalled}; heartbeat lapsed on a loaded host: {unsignalled}); "
        f"overlapping the earlier run: {overlaps}"
    )
