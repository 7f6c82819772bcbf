"""``incarnate worker`` processes: wake-ups across processes, take-overs, graceful stop, ``--db`` URLs.

Every worker here is a real OS process (``python -m incarnate worker``) on a
real SQLite file or the real PostgreSQL (a fresh schema per test); the
clients are other processes (the CLI, or ``python -c`` over the API). Every
wait is bounded in time, and every process is killed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import pytest

from incarnate import ConfigurationError, Engine, PostgresStorage, RecoverySettings, Storage, Worker
from incarnate._worker import recovery_settings
from tests.integration.worker_charts import CHARTS, RUNS_VARIABLE, TASKS
from tests.stores import storage_for

ROOT = Path(__file__).resolve().parents[2]
CHARTS_PATH = "tests.integration.worker_charts:CHARTS"
TASKS_PATH = "tests.integration.worker_charts:TASKS"
STARTUP = 30.0
"""Seconds a worker process may take to import, open its store and log that it started."""


class WorkerProcess:
    """One ``incarnate worker`` process, its output in files."""

    def __init__(self, process: subprocess.Popen[bytes], stdout: Path, stderr: Path) -> None:
        self.process = process
        self.stdout = stdout
        self.stderr = stderr
        self.engine_id = ""

    def output(self) -> str:
        """Everything the process wrote so far, standard output then standard error."""
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")

    def wait_started(self) -> str:
        """Block until the worker logs that it started; returns its engine id."""
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            found = re.search(r" started on .* engine_id=(\S+)", self.stderr.read_text(errors="replace"))
            if found:
                self.engine_id = found[1]
                return self.engine_id
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"the worker did not start:\n{self.output()}")

    def terminate(self, timeout: float = 10.0, signal_number: int = signal.SIGTERM) -> float:
        """Send ``signal_number``, wait for the exit; the seconds it took (fails past ``timeout``)."""
        started = time.monotonic()
        self.process.send_signal(signal_number)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the worker did not exit {timeout}s after a signal:\n{self.output()}"
            ) from None
        return time.monotonic() - started


def worker_command(db: str, *options: str) -> list[str]:
    """``python -m incarnate worker`` with the test charts and tasks on ``db``, and ``options``."""
    command = [sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--tasks", TASKS_PATH]
    return [*command, "--db", db, *options]


@contextlib.contextmanager
def worker(
    tmp_path: Path, db: str, *options: str, env: dict[str, str] | None = None
) -> Iterator[WorkerProcess]:
    """A started worker process on ``db``; killed on the way out if it still runs."""
    count = len(list(tmp_path.glob("worker-*.err")))
    stdout, stderr = tmp_path / f"worker-{count}.out", tmp_path / f"worker-{count}.err"
    command = worker_command(db, "--threads", "2", "--poll-interval", "0.1", *options)
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=out, stderr=err, env={**os.environ, **(env or {})}
        )
    try:
        running = WorkerProcess(process, stdout, stderr)
        running.wait_started()
        yield running
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def run(*command: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a client process to completion (bounded), from the repository root."""
    return subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, **(env or {})},
    )


def start_in_client(db: str, chart: str, count: int = 1) -> list[UUID]:
    """Start ``count`` roots of ``chart`` from a separate process with a plain engine (it runs nothing)."""
    data = "{'n': n}" if chart == "job" else "None"
    code = (
        "import sys; from incarnate import Engine, Storage; "
        "from tests.integration.worker_charts import CHARTS, TASKS\n"
        "with Engine(CHARTS, TASKS, storage=Storage.from_url(sys.argv[1])) as engine:\n"
        f"    for n in range({count}): print(engine.start({chart!r}, {data}))"
    )
    done = run(sys.executable, "-c", code, db)
    assert done.returncode == 0, done.stderr
    return [UUID(line) for line in done.stdout.split()]


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.02) -> float | None:
    """Poll ``condition`` until true; the seconds it took, or None after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if condition():
            return time.monotonic() - started
        time.sleep(interval)
    return None


@contextlib.contextmanager
def store(kind: str, tmp_path: Path) -> Iterator[tuple[Storage, str, Engine]]:
    """A fresh store, its ``--db`` text, and a plain engine over it (its tables now exist)."""
    with storage_for(kind, tmp_path) as storage, Engine(CHARTS, TASKS, storage=storage) as engine:
        yield storage, storage.url(), engine


def status(engine: Engine, instance_id: UUID) -> str:
    """The instance's status, read from the store now."""
    return engine.instance(instance_id).record.status.value


def owner(engine: Engine, instance_id: UUID) -> str:
    """The instance's owner, read from the store now."""
    return engine.instance(instance_id).record.owner


# ------------------------------------------------------------------ tests


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_event_sent_from_another_process_is_processed_promptly(kind: str, tmp_path: Path) -> None:
    """An event the CLI sends to a gate a worker holds is stepped by that worker within 2 s."""
    with store(kind, tmp_path) as (_, db, engine), worker(tmp_path, db, "--no-recovery") as running:
        (gate,) = start_in_client(db, "gate")
        assert wait_for(lambda: owner(engine, gate) == running.engine_id, 10.0) is not None, running.output()
        sent = run(sys.executable, "-m", "incarnate", "send", str(gate), "answer", "--db", db)
        assert sent.returncode == 0, sent.stderr
        took = wait_for(lambda: status(engine, gate) == "done", 2.0)
        assert took is not None, f"the answer was not processed within 2 s:\n{running.output()}"
        assert running.terminate() < 10.0
        assert running.process.returncode == 0, running.output()


def test_a_root_started_by_a_client_is_taken_over_and_completed(tmp_path: Path) -> None:
    """A root a plain engine in another process started (and never ran) is taken over and run once."""
    runs = tmp_path / "runs.txt"
    with store("sqlite", tmp_path) as (_, db, engine):
        with worker(tmp_path, db, "--no-recovery", env={RUNS_VARIABLE: str(runs)}) as running:
            (job,) = start_in_client(db, "job")
            took = wait_for(lambda: status(engine, job) == "done", 10.0)
            assert took is not None, running.output()
            assert owner(engine, job) == running.engine_id
            assert engine.instance(job).record.output == {"n": 0}
            running.terminate()
        assert len(runs.read_text().splitlines()) == 1


def test_a_worker_that_embeds_tasks_runs_them_without_streams_of_their_own(tmp_path: Path) -> None:
    """``--embed-tasks``: the task a worker's macrostep births is its parent's, and runs once."""
    runs = tmp_path / "runs.txt"
    with store("sqlite", tmp_path) as (_, db, engine):
        with worker(
            tmp_path, db, "--no-recovery", "--embed-tasks", env={RUNS_VARIABLE: str(runs)}
        ) as running:
            (errand,) = start_in_client(db, "errand")
            assert wait_for(lambda: owner(engine, errand) == running.engine_id, 10.0) is not None
            sent = run(sys.executable, "-m", "incarnate", "send", str(errand), "go", "--db", db)
            assert sent.returncode == 0, sent.stderr
            assert wait_for(lambda: status(engine, errand) == "done", 10.0) is not None, running.output()
            running.terminate()
        assert engine.instance(errand).record.output == {"n": 7}
        [birth] = [e for e in engine.events_of(errand) if type(e).__name__ == "Birth"]
        assert birth.embedded
        task_id = birth.facts.child_id
        assert engine.parts.journal.recorder.select_events(task_id) == []  # no stream of its own
        assert engine.instance(task_id).record.output == {"n": 7}  # rebuilt from its parent's events
        [line] = runs.read_text().splitlines()
        assert line.startswith(str(task_id))


@pytest.mark.parametrize("signal_number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_stops_gracefully_and_frees_what_the_worker_held(
    signal_number: signal.Signals, tmp_path: Path
) -> None:
    """SIGTERM or SIGINT: the worker exits 0 in seconds, its heartbeat retired, its gate claimable at once."""
    with store("sqlite", tmp_path) as (_, db, engine):
        with worker(tmp_path, db, "--no-recovery", "--lease", "60") as running:
            (gate,) = start_in_client(db, "gate")
            assert wait_for(lambda: owner(engine, gate) == running.engine_id, 10.0) is not None
            assert engine.parts.coordination.is_live(running.engine_id)
            took = running.terminate(signal_number=signal_number)
            assert running.process.returncode == 0, running.output()
            assert took < 5.0
        assert engine.parts.coordination.heartbeats()[running.engine_id].retired
        taken = engine.take_over(gate, reason="the worker stopped")
        assert gate in taken.claimed
        assert owner(engine, gate) == engine.engine_id
        assert " stopped" in running.output()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_worker_restarted_with_its_engine_id_takes_its_trees_back_at_once(
    kind: str, tmp_path: Path
) -> None:
    """SIGKILLed and restarted with ``--engine-id``, a worker runs its gates again before its lease ends."""
    with store(kind, tmp_path) as (_, db, engine):
        options = ("--engine-id", "node-1", "--lease", "60", "--no-recovery")
        with worker(tmp_path, db, *options) as first:
            assert first.engine_id == "node-1"
            gates = start_in_client(db, "gate", count=3)
            held = wait_for(lambda: all(owner(engine, g) == "node-1" for g in gates), 10.0)
            assert held is not None, first.output()
            incarnations = [engine.instance(g).record.incarnation for g in gates]
            first.process.kill()
            first.process.wait(10)
        assert engine.parts.coordination.is_live("node-1")  # its lease has a minute to run
        with worker(tmp_path, db, *options) as second:
            taken = wait_for(
                lambda: all(
                    engine.instance(g).record.incarnation > i
                    for g, i in zip(gates, incarnations, strict=True)
                ),
                10.0,
            )
            assert taken is not None, second.output()
            assert "takes back 3 call tree(s) a past life of its id left" in second.output()
            sent = run(sys.executable, "-m", "incarnate", "send", str(gates[0]), "answer", "--db", db)
            assert sent.returncode == 0, sent.stderr
            assert wait_for(lambda: status(engine, gates[0]) == "done", 10.0) is not None, second.output()
            second.terminate()
        assert [status(engine, g) for g in gates[1:]] == ["running", "running"]


def test_an_engine_id_must_be_a_short_printable_name(tmp_path: Path) -> None:
    """``--engine-id`` that is empty, too long or unprintable is refused (status 2) with what to give."""
    for bad in ("", "x" * 64, "a\tb"):
        refused = run(*worker_command(str(tmp_path / "s.db"), "--engine-id", bad))
        assert (
            refused.returncode == 2 and "--engine-id must be 1 to 63 printable characters" in refused.stderr
        )


def test_a_password_in_a_store_url_never_appears(tmp_path: Path) -> None:
    """With ``--db postgresql://USER:secret@...``, no output, log line or error shows the password."""
    with store("postgres", tmp_path) as (storage, _, engine):
        assert isinstance(storage, PostgresStorage)
        user, schema = storage.user, storage.schema
        where = f"{storage.host}:{storage.port}/{storage.dbname}"
        db = f"postgresql://{user}:secret@{where}?schema={schema}"
        with worker(tmp_path, db, "--no-recovery", "--log-level", "debug") as running:
            (job,) = start_in_client(db, "job")
            assert wait_for(lambda: status(engine, job) == "done", 10.0) is not None, running.output()
            listed = run(sys.executable, "-m", "incarnate", "list", "--all", "--db", db)
            running.terminate()
        unreachable = db.replace(f":{storage.port}/", ":1/")
        failed = run(sys.executable, "-m", "incarnate", "list", "--db", unreachable)
        bad = run(sys.executable, "-m", "incarnate", "list", "--db", db.replace("?schema=", "?nonsense="))
        assert listed.returncode == 0, listed.stderr
        assert str(job) in listed.stdout
        assert failed.returncode != 0 and failed.stderr
        assert bad.returncode == 2 and bad.stderr
        texts = [running.output(), listed.stdout, listed.stderr, failed.stdout, failed.stderr, bad.stderr]
        assert "took over root" in running.output()
        assert not [text for text in texts if "secret" in text]


def test_two_workers_on_one_sqlite_file_complete_every_instance_exactly_once(tmp_path: Path) -> None:
    """Two worker processes share a SQLite file; every job a client starts completes, its task run once."""
    runs = tmp_path / "runs.txt"
    env = {RUNS_VARIABLE: str(runs)}
    with store("sqlite", tmp_path) as (_, db, engine):
        with worker(tmp_path, db, env=env) as first, worker(tmp_path, db, env=env) as second:
            jobs = start_in_client(db, "job", count=12)
            finished = wait_for(lambda: all(status(engine, job) == "done" for job in jobs), 20.0, 0.1)
            assert finished is not None, first.output() + second.output()
            assert first.process.poll() is None and second.process.poll() is None
            live = engine.parts.coordination.heartbeats()
            assert first.engine_id in live and second.engine_id in live
            first.terminate()
            second.terminate()
            assert (first.process.returncode, second.process.returncode) == (0, 0)
        owners = {owner(engine, job) for job in jobs}
        assert owners <= {first.engine_id, second.engine_id}
        for job in jobs:
            completed = [e for e in engine.events_of(job) if type(e).__name__ == "Completed"]
            assert len(completed) == 1
        ran = [line.split()[0] for line in runs.read_text().splitlines()]
        assert len(ran) == len(set(ran)) == len(jobs)


def test_a_worker_on_a_file_that_is_no_store_exits_2_with_one_line(tmp_path: Path) -> None:
    """``incarnate worker`` on a file that is not a SQLite store exits 2 with one error line, no traceback."""
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 64)
    done = run(sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--db", str(garbage))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("incarnate worker: error: ")
    assert "Traceback" not in done.stderr
    assert garbage.read_bytes() == bytes(range(256)) * 64


def test_a_worker_needs_a_threaded_runner(tmp_path: Path) -> None:
    """``Worker`` refuses an engine whose runner is not a ThreadedRunner, naming the fix."""
    storage = Storage.sqlite(str(tmp_path / "w.db"))
    fix = r"runner=ThreadedRunner\(workers=N\)"
    with Engine(CHARTS, TASKS, storage=storage) as engine, pytest.raises(ConfigurationError, match=fix):
        Worker(engine)


def test_each_group_elects_its_own_recovery_leader() -> None:
    """A worker's recovery settings take its group, and a group of its own gets a lock id of its own."""
    default = recovery_settings(RecoverySettings(), "default")
    blue = recovery_settings(RecoverySettings(), "blue")
    assert (default.group, blue.group) == ("default", "blue")
    assert default.lock_id == RecoverySettings().lock_id != blue.lock_id
    assert 0 < blue.lock_id < 2**63
    assert recovery_settings(RecoverySettings(lock_id=7), "blue").lock_id == 7
    with pytest.raises(ConfigurationError, match="same group"):
        recovery_settings(RecoverySettings(group="green"), "blue")
