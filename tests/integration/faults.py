"""The fault suite's harness: a private PostgreSQL cluster, the load driver, fault injectors and the checks.

- :class:`PostgresCluster` runs a PostgreSQL cluster of its own (``initdb``
  in a temporary directory, a free loopback port, its socket in that
  directory) that a test may restart, stop or freeze at will; the shared
  server the other tests use is never touched. As root it runs the server
  binaries as the ``postgres`` OS user (``initdb`` refuses root).
- The **load driver** (``python -m tests.integration.faults client``) is the
  client process: a plain :class:`~incarnate.Engine` that starts ``job``
  trees (``fault_charts``) by idempotency key and sends each its pings by
  key, retrying what the store refuses, and journals every attempt (JSON
  lines) so the test knows which events were accepted and when.
- The **lock holder** (``python -m tests.integration.faults hold-sqlite``)
  takes a SQLite file's write lock (``BEGIN EXCLUSIVE``) for a while.
- :func:`examine` checks the store after a fault: every tree done, every
  accepted ping processed exactly once, every child born once, every
  instance ended once, task bodies run again only where the fault explains
  it; and :func:`evidence` describes what is stuck (instance status, owner
  and its liveness, inbox, timers, children) for the failure message.

Workers are ``incarnate worker`` processes (:func:`spawn_cli_worker`),
wrapped in ``chaos_charts.WorkerProcess`` like the chaos test's.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import heapq
import itertools
import json
import os
import pwd
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, NoReturn
from uuid import UUID

import attrs
import pytest

from aggregates import Instance
from incarnate import Engine, Storage
from tests.integration.chaos_charts import REPOSITORY, Run, WorkerProcess, wait_for
from tests.integration.fault_charts import CHARTS, INSTANCES_PER_TREE, PING

REQUIRE_VARIABLE = "INCARNATE_REQUIRE_POSTGRES"
SERVER_USER = "postgres"
"""The OS user the private cluster's binaries run as when the tests run as root."""
DBNAME = "test"
"""The database the private cluster serves."""

# ---------------------------------------------------------------- the private cluster


def postgres_bindir() -> Path | None:
    """The directory of ``initdb`` and ``pg_ctl`` (the newest Debian install first), or None."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        key=lambda path: [int(part) if part.isdigit() else 0 for part in Path(path).parent.name.split(".")],
    )
    candidates = [Path(path) for path in reversed(found)]
    on_path = shutil.which("pg_ctl")
    if on_path:
        candidates.append(Path(on_path).resolve().parent)
    for directory in candidates:
        if (directory / "initdb").exists() and (directory / "pg_ctl").exists():
            return directory
    return None


def unavailable(reason: str) -> NoReturn:
    """Skip (fail under ``INCARNATE_REQUIRE_POSTGRES``) for want of a private cluster."""
    if os.environ.get(REQUIRE_VARIABLE):
        pytest.fail(f"cannot run a private PostgreSQL cluster: {reason}, and {REQUIRE_VARIABLE} is set")
    pytest.skip(f"cannot run a private PostgreSQL cluster: {reason}")


def free_port() -> int:
    """A TCP port nothing listens on at 127.0.0.1 now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _parent_of(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (read from ``/proc``)."""
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit() and _parent_of(int(entry)) == pid]


class PostgresCluster:
    """A PostgreSQL cluster of this test run's own, on a free loopback port; see :func:`private_postgres`."""

    def __init__(self, bindir: Path, directory: Path, user: str | None) -> None:
        self.bindir = bindir
        self.directory = directory
        self.data = directory / "data"
        self.log = directory / "server.log"
        self.user = user
        """The OS user the binaries run as (None: this process's own)."""
        self.port = free_port()
        self.frozen: list[int] = []

    def _run(self, program: str, *arguments: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / program), *arguments]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        # Files, not pipes: a server the command starts must not hold our end open.
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            code = subprocess.run(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, timeout=timeout, check=False
            ).returncode
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(
                command, code, out.read().decode(errors="replace"), err.read().decode(errors="replace")
            )

    def _check(self, done: subprocess.CompletedProcess[str], what: str) -> None:
        if done.returncode:
            raise RuntimeError(
                f"{what} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}\n"
                f"server log:\n{self.log_tail()}"
            )

    def init(self) -> None:
        """``initdb`` (trust authentication, superuser ``postgres``), start, create the database."""
        done = self._run(
            "initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--locale=C",
            "--no-sync",
        )  # fmt: skip
        self._check(done, "initdb")
        self.start()
        self.execute(f"CREATE DATABASE {DBNAME}", dbname="postgres")

    def start(self) -> None:
        """``pg_ctl start``, waiting until the server accepts connections."""
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 -c max_connections=200 "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=32MB"
        )
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "-t", "60", "start"
        )
        self._check(done, "pg_ctl start")

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE``, waiting until the server is down."""
        self._check(
            self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"), "pg_ctl stop"
        )

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart -m MODE``, waiting until the server accepts connections again."""
        done = self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-m", mode, "-w", "-t", "60", "restart"
        )
        self._check(done, "pg_ctl restart")

    def postmaster(self) -> int | None:
        """The server's main process id (``postmaster.pid``), or None when it is not running."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _parent_of(pid) is not None else None

    def server_processes(self) -> list[int]:
        """The postmaster and every process it forked (checkpointer, WAL writer, backends, ...)."""
        main = self.postmaster()
        return [] if main is None else [main, *children_of(main)]

    def freeze(self) -> list[int]:
        """SIGSTOP every server process (the postmaster first, so it forks no new backend); their ids."""
        main = self.postmaster()
        if main is None:
            raise RuntimeError("the private PostgreSQL server is not running: nothing to freeze")
        os.kill(main, signal.SIGSTOP)
        self.frozen = [main]
        for _ in range(2):  # a second pass catches a child forked while the first ran
            for pid in children_of(main):
                if pid not in self.frozen:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGSTOP)
                        self.frozen.append(pid)
        return list(self.frozen)

    def thaw(self) -> None:
        """SIGCONT every process :meth:`freeze` stopped."""
        for pid in reversed(self.frozen):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.frozen = []

    def execute(self, statement: str, dbname: str = DBNAME) -> None:
        """Run one statement (autocommit) as ``postgres`` over TCP."""
        import psycopg

        with psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            dbname=dbname,
            user="postgres",
            autocommit=True,
            connect_timeout=10,
        ) as connection:
            connection.execute(statement.encode())

    def storage(self, schema: str) -> Storage:
        """The store in ``schema`` of the cluster's database (created when missing)."""
        self.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
        return Storage.postgres(DBNAME, host="127.0.0.1", port=self.port, user="postgres", schema=schema)

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's log."""
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def destroy(self) -> None:
        """Thaw, stop at once, kill what is left, remove the directory; never raises."""
        with contextlib.suppress(Exception):
            self.thaw()
        main = self.postmaster()
        if main is not None:
            for pid in [main, *children_of(main)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            with contextlib.suppress(Exception):
                self._run(
                    "pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "-t", "20", "stop", timeout=30
                )
        main = self.postmaster()
        if main is not None:
            for pid in [main, *children_of(main)]:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.directory, ignore_errors=True)


@contextlib.contextmanager
def private_postgres() -> Iterator[PostgresCluster]:
    """A fresh private cluster serving database ``test``, destroyed afterwards (even on failure).

    Skips with the reason when the binaries are missing or the server user
    cannot be switched to; under ``INCARNATE_REQUIRE_POSTGRES`` that fails.
    """
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed")
    bindir = postgres_bindir()
    if bindir is None:
        unavailable("no initdb/pg_ctl found (looked in /usr/lib/postgresql/*/bin and on PATH)")
    user: str | None = None
    if os.geteuid() == 0:
        try:
            account = pwd.getpwnam(SERVER_USER)
        except KeyError:
            unavailable(f"running as root, and there is no {SERVER_USER!r} OS user to run initdb as")
        if shutil.which("runuser") is None:
            unavailable("running as root, and runuser is missing to run initdb as postgres")
        probe = subprocess.run(
            ["runuser", "-u", SERVER_USER, "--", "true"], capture_output=True, text=True, check=False
        )
        if probe.returncode:
            unavailable(f"running as root, and runuser -u {SERVER_USER} fails: {probe.stderr.strip()}")
        user = SERVER_USER
    directory = Path(tempfile.mkdtemp(prefix="incarnate-pg-"))
    if user is not None:
        os.chown(directory, account.pw_uid, account.pw_gid)
    cluster = PostgresCluster(bindir, directory, user)
    try:
        cluster.init()
        yield cluster
    finally:
        cluster.destroy()


# ----------------------------------------------------------------- worker processes

WORKER_CHARTS = "tests.integration.fault_charts:CHARTS"
WORKER_TASKS = "tests.integration.fault_charts:TASKS"


def spawn_cli_worker(
    directory: Path, db: str, name: str, env: dict[str, str], *options: str
) -> WorkerProcess:
    """Start ``incarnate worker`` on ``db`` serving the fault charts; its stderr in ``worker-NAME.log``.

    The caller must kill it in a ``finally`` (``chaos_charts.killing``).
    """
    log_path = directory / f"worker-{name}.log"
    command = [
        sys.executable, "-m", "incarnate", "worker", "--charts", WORKER_CHARTS, "--tasks", WORKER_TASKS,
        "--db", db, *options,
    ]  # fmt: skip
    with log_path.open("ab") as err:
        process = subprocess.Popen(command, cwd=REPOSITORY, stdout=err, stderr=err, env={**os.environ, **env})
    return WorkerProcess(name, process, log_path)


def spawn_module(directory: Path, name: str, env: dict[str, str], *arguments: str) -> WorkerProcess:
    """Start ``python -m tests.integration.faults ARGUMENTS`` (the client, the lock holder).

    Its output goes to ``NAME.log``; the caller must kill it in a ``finally``.
    """
    log_path = directory / f"{name}.log"
    command = [sys.executable, "-m", "tests.integration.faults", *arguments]
    with log_path.open("ab") as out:
        process = subprocess.Popen(command, cwd=REPOSITORY, stdout=out, stderr=out, env={**os.environ, **env})
    return WorkerProcess(name, process, log_path)


FAILED_UNIT = re.compile(r"work on \S+ failed")
"""What a worker logs when a unit of work raised."""


def failed_units(process: WorkerProcess) -> int:
    """How many units of work failed in a worker, by its log."""
    return len(FAILED_UNIT.findall(process.output()))


def log_summary(process: WorkerProcess, ids: Sequence[UUID] = (), tail: int = 8, width: int = 300) -> str:
    """A worker's log in brief: warnings and errors counted, failed units, lines naming ``ids``, its tail."""
    lines = process.output().splitlines()
    failed = [line for line in lines if FAILED_UNIT.search(line)]
    counts = Counter(level for line in lines for level in ("WARNING", "ERROR") if f" {level} " in line)
    naming = [line for line in lines if any(str(i) in line for i in ids)]
    state = "running" if process.running() else f"exited {process.process.returncode}"
    out = [
        f"--- {process.name} (pid {process.pid}, {process.engine_id or 'engine id unknown'}, {state}): "
        f"{len(lines)} lines, {counts['WARNING']} warnings, {counts['ERROR']} errors, "
        f"{len(failed)} 'work on ... failed'"
    ]
    out += [f"    failed unit: {line[:width]}" for line in failed[:3]]
    out += [f"    names a stuck instance: {line[:width]}" for line in naming[-5:]]
    out += [f"    | {line[:width]}" for line in lines[-tail:]]
    return "\n".join(out)


# ------------------------------------------------------------------------ the load


@attrs.frozen
class Load:
    """What the client does: ``trees`` jobs started over ``spread`` seconds, each sent ``pings`` pings.

    A tree's first ping is due ``first`` seconds after it started, the next
    ones ``gap`` seconds apart; a refused operation is tried again every
    ``retry`` seconds.
    """

    trees: int
    pings: int = 3
    spread: float = 4.0
    first: float = 1.0
    gap: float = 1.0
    retry: float = 0.3

    def arguments(self, db: str, journal: Path, until: float) -> list[str]:
        """The client program's command-line arguments."""
        return [
            "client", "--db", db, "--journal", str(journal), "--until", f"{until:.3f}",
            "--trees", str(self.trees), "--pings", str(self.pings), "--spread", str(self.spread),
            "--first", str(self.first), "--gap", str(self.gap), "--retry", str(self.retry),
        ]  # fmt: skip


def ping_key(tree: int, number: int) -> str:
    """The idempotency key (and data) of ping ``number`` of tree ``tree``."""
    return f"ping-{tree}-{number}"


def drive(db: str, journal_path: Path, load: Load, until: float) -> int:
    """The client program: start the trees, send their pings, journal every attempt; 0 when all landed."""
    journal = journal_path.open("a", encoding="utf-8", buffering=1)

    def note(**fields: object) -> None:
        journal.write(json.dumps({"at": round(time.time(), 4), **fields}) + "\n")

    engine = Engine(CHARTS, storage=Storage.from_url(db))
    began = time.time()
    note(op="begin")
    queue: list[tuple[float, int, int, int]] = []  # (due, order, tree, ping number; -1 starts the tree)
    order = 0
    for tree in range(load.trees):
        heapq.heappush(queue, (began + tree * load.spread / load.trees, order, tree, -1))
        order += 1
    roots: dict[int, UUID] = {}
    while queue and time.time() < until:
        due, _, tree, number = heapq.heappop(queue)
        time.sleep(max(0.0, min(due, until) - time.time()))
        try:
            if number < 0:
                root = engine.start("job", {"expected": load.pings}, key=f"tree-{tree}").id
                roots[tree] = root
                note(op="start", tree=tree, root=str(root), ok=True)
                for n in range(load.pings):
                    heapq.heappush(queue, (time.time() + load.first + n * load.gap, order, tree, n))
                    order += 1
            else:
                key = ping_key(tree, number)
                seq = engine.send(roots[tree], PING, {"key": key}, key=key)
                note(op="send", tree=tree, root=str(roots[tree]), key=key, seq=seq, ok=True)
        except Exception as error:  # noqa: BLE001 - the store refused: journal it, try again later
            text = f"{type(error).__name__}: {error}".replace("\n", " ")[:300]
            fields: dict[str, object] = {"op": "start" if number < 0 else "send", "tree": tree, "ok": False}
            if number >= 0:
                fields["key"] = ping_key(tree, number)
            note(**fields, error=text)
            heapq.heappush(queue, (time.time() + load.retry, order, tree, number))
            order += 1
            time.sleep(load.retry)  # the store is likely down for everything: do not hammer it
    note(op="end", pending=len(queue))
    journal.close()
    with contextlib.suppress(Exception):
        engine.close()
    return 0 if not queue else 1


@attrs.frozen
class Journal:
    """What the client journaled: the roots it started and the pings accepted, with times."""

    roots: dict[int, UUID]
    accepted: dict[UUID, dict[str, float]]
    """For each root, each accepted ping key and when its send returned."""
    refused: int
    """Attempts the store refused (each tried again)."""
    last_error: str
    ended: bool
    pending: int
    """Operations still undone when the client ended."""
    refused_between: tuple[float, float] | None
    """The first and last refused attempt (wall time)."""

    @classmethod
    def read(cls, path: Path) -> Journal:
        """Parse the client's journal (a partial last line is ignored)."""
        roots: dict[int, UUID] = {}
        accepted: dict[UUID, dict[str, float]] = defaultdict(dict)
        refused, last_error, ended, pending = 0, "", False, 0
        refusals: list[float] = []
        text = path.read_text(encoding="utf-8") if path.exists() else ""
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            if entry["op"] == "end":
                ended, pending = True, entry["pending"]
            elif not entry.get("ok", True):
                refused += 1
                last_error = entry["error"]
                refusals.append(entry["at"])
            elif entry["op"] == "start":
                roots[entry["tree"]] = UUID(entry["root"])
            elif entry["op"] == "send":
                accepted[UUID(entry["root"])].setdefault(entry["key"], entry["at"])
        window = (refusals[0], refusals[-1]) if refusals else None
        return cls(roots, dict(accepted), refused, last_error, ended, pending, window)


# ---------------------------------------------------------------------- the lock holder


def hold_sqlite(path: str, seconds: float) -> int:
    """Hold ``path``'s write lock (``BEGIN EXCLUSIVE``) for ``seconds``; print when locked and released."""
    connection = sqlite3.connect(path, timeout=30.0, isolation_level=None)
    connection.execute("BEGIN EXCLUSIVE")
    print(f"locked {time.time():.4f}", flush=True)
    time.sleep(seconds)
    connection.execute("COMMIT")
    print(f"released {time.time():.4f}", flush=True)
    connection.close()
    return 0


def marked(process: WorkerProcess, word: str, timeout: float) -> float:
    """The wall time the lock holder printed after ``word`` (waiting up to ``timeout`` seconds)."""
    pattern = re.compile(rf"^{word} (\d+\.\d+)$", re.MULTILINE)
    if not wait_for(lambda: pattern.search(process.output()) is not None or not process.running(), timeout):
        raise AssertionError(
            f"{process.name} did not print {word!r} within {timeout:g}s:\n{process.output()}"
        )
    found = pattern.search(process.output())
    if found is None:
        raise AssertionError(f"{process.name} exited without printing {word!r}:\n{process.output()}")
    return float(found[1])


# ------------------------------------------------------------------------ the checks


@attrs.frozen
class Fault:
    """One fault: its scenario's name and when it began and ended (wall time)."""

    name: str
    began: float
    ended: float

    @property
    def duration(self) -> float:
        """Seconds the store (or the worker) was out."""
        return self.ended - self.began


@attrs.define
class Findings:
    """What :func:`examine` found: the problems (empty: all good) and the measured figures."""

    problems: list[str] = attrs.field(factory=list)
    figures: dict[str, float | int | str] = attrs.field(factory=dict)


def _end_of(events: Sequence[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, Instance.Completed | Instance.Failed | Instance.Cancelled)]


def _claims_away(events: Sequence[Any], pid: int, after: float, before: float) -> bool:
    """Whether an instance was claimed away from the engine of process ``pid`` between two moments."""
    return any(
        isinstance(e, Instance.Claimed)
        and after <= e.timestamp.timestamp() <= before
        and f":{pid}:" in e.previous
        and f":{pid}:" not in e.owner
        for e in events
    )


def examine(
    engine: Engine,
    journal: Journal,
    fault: Fault,
    runs: list[Run],
    *,
    frozen_pid: int | None = None,
    affected: Sequence[UUID] | None = None,
    recovered: float | None = None,
    stuck: Collection[UUID] = (),
    margin: float = 2.0,
) -> Findings:
    """Check every tree the client started; the figures measure how long the fleet took after the fault.

    The figures: when the last instance of the ``affected`` trees (default:
    all) finished, in seconds after ``recovered`` (default: the fault's end,
    when the store answered again), and how many trees finished after it;
    and of their parts that were running across ``recovered`` (each had a
    task or a timer due), how long the last one waited for its next event.

    - every root and every instance of its tree is ``done``, each ended once,
      with ``INSTANCES_PER_TREE`` instances per tree;
    - every child was born once: one ``Birth`` per child id, no
      ``ChildRetry``/``ChildResume`` (nothing in these charts fails), one
      ``Started`` in each child's own stream;
    - every accepted ping has one ``Accepted`` event and one macrostep
      consuming it, and its key is in the root's output exactly once;
    - claims bump the incarnation by one each;
    - a task body ran again only if its earlier run overlapped the fault
      (give or take ``margin`` seconds: its outcome's commit met the fault),
      or its process was ``frozen_pid`` frozen meanwhile, or the store shows
      the task claimed away from that run's worker in between.

    The trees in ``stuck`` (reported with their evidence) are only checked
    for what ran twice, not for what they have not done yet.
    """
    findings = Findings()
    problems = findings.problems
    roots = sorted(journal.roots.values())
    by_root: dict[UUID, list[Instance]] = defaultdict(list)
    for instance in engine.instances():
        by_root[instance.record.root].append(instance)
    recovered = fault.ended if recovered is None else recovered
    measured = set(roots if affected is None else affected)
    last_done = recovered
    after = 0
    resumed: list[float] = []
    for root in roots:
        tree = by_root.get(root, [])
        births: Counter[UUID] = Counter()
        events_by_id: dict[UUID, list[Any]] = {}
        for instance in tree:
            events = engine.events_of(instance.id)
            events_by_id[instance.id] = events
            record = instance.record
            label = f"{record.name} {instance.id} (tree {root})"
            if record.status.value != "done" and root not in stuck:
                problems.append(f"{label} is {record.status.value}, error {record.error!r}")
            ends = _end_of(events)
            if len(ends) > 1:
                problems.append(f"{label} ended {len(ends)} times")
            if root in measured:
                for event in ends:
                    last_done = max(last_done, event.timestamp.timestamp())
                if record.name == "part":
                    resumed.extend(_resumed(events, recovered))
            started = sum(isinstance(e, Instance.Started) for e in events)
            if started != 1:
                problems.append(f"{label} has {started} Started events")
            for event in events:
                if isinstance(event, Instance.Birth):
                    births[event.facts.child_id] += 1
                elif isinstance(event, Instance.ChildRetry | Instance.ChildResume):
                    problems.append(f"{label} retried a child though nothing failed: {type(event).__name__}")
            claims = [e.incarnation for e in events if isinstance(e, Instance.Claimed)]
            if claims != list(range(2, 2 + len(claims))):
                problems.append(f"{label} claims skip or repeat incarnations: {claims}")
        children = [instance.id for instance in tree if instance.id != root]
        twice = {child: count for child, count in births.items() if count != 1}
        if twice:
            problems.append(f"tree {root}: children born more than once (child id: Births): {twice}")
        unborn = set(children) - set(births)
        if unborn:
            problems.append(
                f"tree {root}: instances with no Birth on their parent: {sorted(map(str, unborn))}"
            )
        if len(tree) != INSTANCES_PER_TREE and root not in stuck:
            problems.append(
                f"tree {root} has {len(tree)} instances, expected {INSTANCES_PER_TREE}: "
                f"{sorted(i.record.name for i in tree)}"
            )
        if root not in events_by_id:
            problems.append(f"tree {root}: the root is missing from the store")
            continue
        pings = journal.accepted.get(root, {})
        problems.extend(_check_pings(root, events_by_id[root], pings, by_root, complete=root not in stuck))
        root_ends = _end_of(events_by_id[root])
        if root in measured and root_ends and root_ends[0].timestamp.timestamp() > recovered:
            after += 1
    problems.extend(_check_runs(runs, fault, frozen_pid, margin, engine))
    if not journal.ended or journal.pending:
        problems.append(
            f"the client did not deliver everything: ended={journal.ended}, {journal.pending} operation(s) "
            f"undone; last refusal: {journal.last_error or 'none'}"
        )
    findings.figures.update(
        trees=len(roots),
        fault_seconds=round(fault.duration, 2),
        measured_trees=len(measured),
        done_after_recovery=after,
        last_done_after_recovery=round(last_done - recovered, 2),
        parts_across=len(resumed),
        last_part_resumed_after_recovery=round(max(resumed, default=0.0), 2),
        client_refusals=journal.refused,
        task_runs=len(runs),
    )
    return findings


def _resumed(events: Sequence[Any], recovered: float) -> list[float]:
    """For an instance that was running when the store recovered: seconds until its next event, else nothing.

    A part always has work due within a timer's length (its task or its
    next timer), so this is how long its stalled unit of work waited.
    """
    times = [event.timestamp.timestamp() for event in events]
    if not times or times[0] >= recovered or not _end_of(events) or times[-1] < recovered:
        return []
    return [next(t for t in times if t >= recovered) - recovered]


def _check_pings(
    root: UUID,
    events: Sequence[Any],
    pings: dict[str, float],
    by_root: dict[UUID, list[Instance]],
    *,
    complete: bool,
) -> list[str]:
    """Every accepted ping stored once, consumed by one macrostep, and in the root's output once.

    For a tree that is not ``complete`` (stranded), only a ping stored or consumed twice is reported.
    """
    problems = []
    accepted: dict[str, list[int]] = defaultdict(list)
    for event in events:
        if isinstance(event, Instance.Accepted) and event.message.key is not None:
            accepted[event.message.key].append(event.message.seq)
    consumed = Counter(
        e.consumed for e in events if isinstance(e, Instance.Stepped) and e.consumed is not None
    )
    rejected = {e.consumed for e in events if isinstance(e, Instance.EvidenceRejected)}
    for key in sorted(pings):
        seqs = accepted.get(key, [])
        if len(seqs) > 1 or (complete and not seqs):
            problems.append(f"tree {root}: ping {key} accepted by the client is stored {len(seqs)} times")
        if len(seqs) != 1:
            continue
        if seqs[0] in rejected:
            problems.append(f"tree {root}: ping {key} (message {seqs[0]}) was rejected instead of processed")
        elif consumed[seqs[0]] > 1 or (complete and consumed[seqs[0]] != 1):
            problems.append(
                f"tree {root}: ping {key} (message {seqs[0]}) consumed by {consumed[seqs[0]]} macrosteps"
            )
    root_instance = next((i for i in by_root.get(root, []) if i.id == root), None)
    output = root_instance.record.output if root_instance is not None else None
    collected = output.get("pings") if isinstance(output, dict) else None
    if isinstance(collected, list):
        seen = Counter(str(key) for key in collected)
        extra = {key: n for key, n in seen.items() if n != 1}
        if extra:
            problems.append(f"tree {root}: pings processed more than once (key: times): {extra}")
        missing = sorted(set(pings) - set(seen))
        if missing and complete:
            problems.append(f"tree {root}: accepted pings missing from its output: {missing}")
    return problems


def _check_runs(
    runs: list[Run], fault: Fault, frozen_pid: int | None, margin: float, engine: Engine
) -> list[str]:
    """A task body ran again only where the fault (or a claim away from its worker) explains it.

    After a store fault: the earlier run overlapped the fault (its outcome's
    commit met it). After a worker freeze: the earlier run was on the frozen
    worker when it froze, or the later one is the frozen worker's, begun as
    it was thawed (a unit under way when it froze: its body runs on, and its
    outcome is fenced). Either way: the store shows the task claimed away
    from the earlier run's worker between the two starts.
    """
    problems = []
    per_key: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        per_key[run.key].append(run)
    for key, key_runs in per_key.items():
        for earlier, later in itertools.pairwise(key_runs):
            end = earlier.end if earlier.end is not None else float("inf")
            if frozen_pid is not None:
                explained = (
                    earlier.pid == frozen_pid and earlier.start <= fault.ended and end >= fault.began
                ) or (later.pid == frozen_pid and fault.ended <= later.start <= fault.ended + margin)
            else:
                explained = earlier.start <= fault.ended + margin and end >= fault.began - margin
            if explained:
                continue
            events = engine.events_of(UUID(earlier.instance))
            if _claims_away(events, earlier.pid, earlier.start, later.start):
                continue
            problems.append(
                f"task {key} ran again though neither the fault nor a claim explains it: "
                f"pid {earlier.pid} {earlier.start:.3f}-{earlier.end}, "
                f"then pid {later.pid} {later.start:.3f} "
                f"(fault {fault.began:.3f}-{fault.ended:.3f}; frozen pid {frozen_pid})"
            )
    return problems


def repeats(runs: list[Run]) -> int:
    """How many task bodies ran more than once in all (runs beyond the first per key)."""
    return len(runs) - len({run.key for run in runs})


def unfinished(engine: Engine, roots: Sequence[UUID]) -> list[UUID]:
    """The roots not finished yet (a root the store cannot read counts as unfinished)."""
    out = []
    for root in roots:
        try:
            if not engine.instance(root).record.status.finished:
                out.append(root)
        except Exception:  # noqa: BLE001 - unreadable now: unfinished as far as anyone can tell
            out.append(root)
    return out


def evidence(engine: Engine, roots: Sequence[UUID], journal: Journal, since: float, limit: int = 8) -> str:
    """What each stuck tree looks like: every instance's status, owner, inbox, timers and last event."""
    try:
        beats = engine.parts.coordination.heartbeats()
        now = engine.parts.coordination.now()
    except Exception as error:  # noqa: BLE001 - evidence is best effort
        beats, now = {}, 0.0
        lines = [f"(heartbeats unreadable: {error})"]
    else:
        lines = [
            "heartbeats: "
            + ", ".join(
                f"{engine_id} expires in {beat.expires_at - now:+.1f}s" for engine_id, beat in beats.items()
            )
        ]
    states: Counter[str] = Counter()
    for root in roots:
        with contextlib.suppress(Exception):
            states[" / ".join(engine.snapshot(root).configuration)] += 1
    lines.append(f"{len(roots)} stuck tree(s) by configuration: {dict(states)}")
    for root in roots[:limit]:
        pings = journal.accepted.get(root, {})
        lines.append(f"tree {root}: {len(pings)} ping(s) accepted by the client")
        lines.extend(_describe(engine, root, beats, since, "  "))
    if len(roots) > limit:
        lines.append(f"... and {len(roots) - limit} more: {[str(r) for r in roots[limit:]]}")
    return "\n".join(lines)


def _describe(
    engine: Engine, instance_id: UUID, beats: dict[str, Any], since: float, indent: str
) -> list[str]:
    try:
        instance = engine.instance(instance_id)
        events = engine.events_of(instance_id)
    except Exception as error:  # noqa: BLE001 - evidence is best effort
        return [f"{indent}{instance_id}: unreadable ({error})"]
    record = instance.record
    owner = record.owner
    live = "no heartbeat row" if owner not in beats else "heartbeat row"
    with contextlib.suppress(Exception):
        live = "live" if engine.parts.coordination.is_live(owner) else "not live"
    inbox = [f"{m.seq}:{m.event.name}" for m in record.inbox]
    timers: list[str] = []
    configuration: tuple[str, ...] = ()
    if record.kind.value == "chart" and record.snapshot_parts is not None:
        with contextlib.suppress(Exception):
            snapshot = engine.snapshot(instance_id)
            configuration = snapshot.configuration
            timers = [f"{t.id}@{t.deadline - time.time():+.1f}s" for t in snapshot.timers]
    last = events[-1]
    line = (
        f"{indent}{record.name} {instance_id} status={record.status.value} owner={owner} ({live}) "
        f"incarnation={record.incarnation} configuration={list(configuration)} inbox={inbox} timers={timers} "
        f"last={type(last).__name__} at {last.timestamp.timestamp() - since:+.1f}s after the fault ended"
    )
    out = [line]
    for activation in record.activations:
        out.extend(_describe(engine, activation.child_id, beats, since, indent + "  "))
    return out


# ------------------------------------------------------------------------ the programs


def main(argv: list[str] | None = None) -> int:
    """``client`` (the load driver) or ``hold-sqlite`` (the lock holder)."""
    parser = argparse.ArgumentParser(prog="python -m tests.integration.faults")
    commands = parser.add_subparsers(dest="command", required=True)
    client = commands.add_parser("client")
    client.add_argument("--db", required=True)
    client.add_argument("--journal", required=True)
    client.add_argument("--until", type=float, required=True)
    client.add_argument("--trees", type=int, required=True)
    client.add_argument("--pings", type=int, default=3)
    client.add_argument("--spread", type=float, default=4.0)
    client.add_argument("--first", type=float, default=1.0)
    client.add_argument("--gap", type=float, default=1.0)
    client.add_argument("--retry", type=float, default=0.3)
    hold = commands.add_parser("hold-sqlite")
    hold.add_argument("--path", required=True)
    hold.add_argument("--seconds", type=float, required=True)
    args = parser.parse_args(argv)
    if args.command == "hold-sqlite":
        return hold_sqlite(args.path, args.seconds)
    load = Load(args.trees, args.pings, args.spread, args.first, args.gap, args.retry)
    return drive(args.db, Path(args.journal), load, args.until)


if __name__ == "__main__":
    sys.exit(main())
