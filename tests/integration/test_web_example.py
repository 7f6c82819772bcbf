"""The web-app example (``docs/examples/approval``) end to end, with real processes.

Each test runs ``incarnate worker`` and the Starlette application under
``uvicorn`` as real OS processes on a real SQLite file or the real
PostgreSQL (a fresh schema per test), and talks to the application over
HTTP with ``httpx``, as a browser or another service would. Every wait is
bounded in time, and every process is killed in a ``finally``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID

import httpx
import pytest

from aggregates import Instance
from docs.examples.approval.charts import CHARTS, OUTBOX_VARIABLE, TASKS
from incarnate import Engine
from tests.stores import storage_for

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHARTS_PATH = "docs.examples.approval.charts:CHARTS"
TASKS_PATH = "docs.examples.approval.charts:TASKS"
STARTUP = 30.0
"""Seconds a process may take to import, open its store and say it is ready."""
REQUEST = {"title": "a new laptop", "amount": 1200.0, "reviewer": "alice"}


class Process:
    """A started OS process, its standard output and error in files."""

    def __init__(self, name: str, command: list[str], tmp_path: Path, env: dict[str, str]) -> None:
        count = len(list(tmp_path.glob(f"{name}-*.log")))
        self.log = tmp_path / f"{name}-{count}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}
            )

    def output(self) -> str:
        """Everything the process wrote so far."""
        return self.log.read_text(errors="replace")

    def wait_for_output(self, pattern: str) -> re.Match[str]:
        """Block until the output matches ``pattern``; fails if the process exits or ``STARTUP`` passes."""
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline:
            found = re.search(pattern, self.output())
            if found:
                return found
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in the output of {self.process.args!r}:\n{self.output()}")

    def kill(self, signal_number: int = signal.SIGKILL) -> None:
        """Send ``signal_number`` and wait (bounded) for the process to exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal_number)
        self.process.wait(10)


@contextlib.contextmanager
def processes() -> Iterator[list[Process]]:
    """A list to put started processes in; every one still running is killed on the way out."""
    started: list[Process] = []
    try:
        yield started
    finally:
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
            process.process.wait(10)


def start_worker(
    started: list[Process], tmp_path: Path, db: str, outbox: Path, *options: str
) -> tuple[Process, str]:
    """An ``incarnate worker`` for the example's charts, started; returns it and its engine id."""
    command = [sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--tasks", TASKS_PATH]
    command += ["--db", db, "--threads", "2", "--poll-interval", "0.1", *options]
    worker = Process("worker", command, tmp_path, {OUTBOX_VARIABLE: str(outbox)})
    started.append(worker)
    return worker, worker.wait_for_output(r" started on .* engine_id=(\S+)")[1]


def start_web(started: list[Process], tmp_path: Path, db: str) -> str:
    """The example's web application under uvicorn on a free local port, started; returns its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", "docs.examples.approval.app:app"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    web = Process("web", command, tmp_path, {"APPROVAL_DB": db})
    started.append(web)
    web.wait_for_output("Application startup complete")
    return f"http://127.0.0.1:{port}"


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``condition`` until it holds (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return False


@contextlib.contextmanager
def store(kind: str, tmp_path: Path) -> Iterator[tuple[str, Engine]]:
    """A fresh store's ``--db`` text, and a plain engine over it (its tables now exist)."""
    with storage_for(kind, tmp_path) as storage, Engine(CHARTS, TASKS, storage=storage) as engine:
        yield storage.url(), engine


def waiting_at_the_gate(client: httpx.Client, approval: str) -> bool:
    """Whether the approval's reviewer was notified and it now waits for a decision."""
    shown = client.get(f"/approvals/{approval}").json()
    return bool(shown["configuration"] == ["open", "waiting"] and shown["context"]["notice"])


def status(client: httpx.Client, approval: str) -> str:
    """The approval's status, as the application shows it."""
    return str(client.get(f"/approvals/{approval}").json()["status"])


def decisions_under(engine: Engine, approval: str, key: str) -> int:
    """How many events the approval accepted under ``key``."""
    return sum(
        1
        for event in engine.events_of(UUID(approval))
        if isinstance(event, Instance.Accepted) and event.message.key == key
    )


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_approval_started_over_http_is_answered_once_and_completes(kind: str, tmp_path: Path) -> None:
    """A worker notifies the reviewer and waits; a decision submitted twice with one key is one step."""
    outbox = tmp_path / "outbox.jsonl"
    with store(kind, tmp_path) as (db, engine), processes() as started:
        worker, _ = start_worker(started, tmp_path, db, outbox, "--no-recovery")
        with httpx.Client(base_url=start_web(started, tmp_path, db), timeout=10.0) as client:
            created = client.post("/approvals", json=REQUEST)
            assert created.status_code == 201, created.text
            approval = created.json()["id"]
            assert created.headers["location"] == f"/approvals/{approval}"
            assert wait_for(lambda: waiting_at_the_gate(client, approval), 10.0), worker.output()

            decision = {"decision": "approve", "by": "alice", "comment": "fine"}
            headers = {"Idempotency-Key": "form-8812"}
            first = client.post(f"/approvals/{approval}/decision", json=decision, headers=headers)
            second = client.post(f"/approvals/{approval}/decision", json=decision, headers=headers)
            changed = client.post(
                f"/approvals/{approval}/decision", json={**decision, "decision": "reject"}, headers=headers
            )
            assert first.status_code == second.status_code == changed.status_code == 202, first.text
            assert first.json() == second.json() == changed.json()
            assert first.json()["decision"] == "approve"
            waited = client.post(f"/approvals/{approval}/decision?wait=5", json=decision, headers=headers)
            assert waited.status_code == 202, waited.text
            assert waited.json() == {
                **first.json(),
                "step": {"status": "done", "configuration": ["approved"]},
            }

            assert wait_for(lambda: status(client, approval) == "done", 10.0), worker.output()
            shown = client.get(f"/approvals/{approval}").json()
            late = client.post(
                f"/approvals/{approval}/decision", json=decision, headers={"Idempotency-Key": "b"}
            )
            missing = client.get(f"/approvals/{UUID(int=7)}")
        assert shown["configuration"] == ["approved"]
        assert shown["output"]["decision"] == "approved"
        assert shown["output"]["by"] == "alice"
        assert shown["output"]["notice"]["to"] == "alice"
        assert decisions_under(engine, approval, "form-8812") == 1
        assert late.status_code == 409, late.text
        assert missing.status_code == 404
        assert [json.loads(line)["to"] for line in outbox.read_text().splitlines()] == ["alice"]


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_an_approval_survives_its_worker_being_killed(kind: str, tmp_path: Path) -> None:
    """SIGKILL the worker while an approval waits; another worker recovers it and a decision completes it."""
    outbox = tmp_path / "outbox.jsonl"
    with store(kind, tmp_path) as (db, engine), processes() as started:
        first, first_id = start_worker(started, tmp_path, db, outbox, "--no-recovery", "--lease", "1")
        with httpx.Client(base_url=start_web(started, tmp_path, db), timeout=10.0) as client:
            approval = client.post("/approvals", json=REQUEST).json()["id"]
            assert wait_for(lambda: waiting_at_the_gate(client, approval), 10.0), first.output()
            assert engine.instance(UUID(approval)).record.owner == first_id

            first.kill(signal.SIGKILL)
            assert wait_for(lambda: not engine.parts.coordination.is_live(first_id), 5.0)
            second, second_id = start_worker(started, tmp_path, db, outbox, "--recovery-ttl", "0")
            answered = client.post(
                f"/approvals/{approval}/decision",
                json={"decision": "reject", "by": "bob"},
                headers={"Idempotency-Key": "form-1"},
            )
            assert answered.status_code == 202, answered.text
            assert wait_for(lambda: status(client, approval) == "done", 15.0), second.output()
            shown = client.get(f"/approvals/{approval}").json()
        assert shown["output"]["decision"] == "rejected"
        assert shown["output"]["by"] == "bob"
        assert engine.instance(UUID(approval)).record.owner == second_id
        # The reviewer was notified before the crash: recovery re-attached, it did not notify again.
        assert len(outbox.read_text().splitlines()) == 1


def test_a_negative_recovery_ttl_is_refused_before_the_worker_starts(tmp_path: Path) -> None:
    """``incarnate worker --recovery-ttl -1`` exits 2 with a message naming the option, creating nothing."""
    db = tmp_path / "approvals.db"
    command = [sys.executable, "-m", "incarnate", "worker", "--charts", CHARTS_PATH, "--tasks", TASKS_PATH]
    done = subprocess.run(
        [*command, "--db", str(db), "--recovery-ttl", "-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "--recovery-ttl must be 0 or more seconds, got -1" in done.stderr
    assert not db.exists()
