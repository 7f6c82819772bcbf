"""Runners and configuration: the threaded runner finishes work and stops gracefully (every store)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import ConfigurationError, Engine, Storage, TaskCall, ThreadedRunner, _runners
from incarnate._process import Decision
from tests.scenarios import charts
from tests.scenarios.conftest import EngineFactory


def wait_for(condition: object, timeout: float = 20.0) -> bool:
    """Poll ``condition()`` until true or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.02)
    return False


def test_threaded_runner_runs_a_family_to_completion(make_engine: EngineFactory) -> None:
    """With three workers, a parent and its children run to completion."""
    runner = ThreadedRunner(workers=3)
    engine = make_engine(charts.ALL, {"charge": lambda call: "ok"}, runner=runner)
    runner.start()
    parent = engine.start("parent", {"members": ["a", "b", "c"]})
    assert wait_for(lambda: len(engine.children(parent)) == 3 and runner.idle())
    for kid in engine.children(parent):
        engine.send(kid.id, "finish")
    assert wait_for(lambda: engine.snapshot(parent).configuration == ("reviewing",))
    engine.send(parent, "approve")
    assert wait_for(lambda: engine.instance(parent).record.status is InstanceStatus.DONE)
    output = engine.instance(parent).record.output
    assert isinstance(output, dict) and output["results"] is not None
    assert sorted(str(r) for r in output["results"]) == ["done:a", "done:b", "done:c"]  # type: ignore[union-attr]
    assert list(runner.errors) == []


def test_a_born_task_goes_straight_to_a_task_thread(make_engine: EngineFactory) -> None:
    """A task child's whole unit of work runs on a task thread; no step thread touches it to hand it over."""
    runner = ThreadedRunner(workers=2)
    engine = make_engine(charts.ALL, {"charge": lambda call: "ok"}, runner=runner)
    runner.start()
    lanes: list[tuple[UUID, str]] = []
    process = engine.process

    def recording(instance_id: UUID) -> Decision | None:
        lanes.append((instance_id, threading.current_thread().name))
        return process(instance_id)

    engine.process = recording  # type: ignore[method-assign]
    roots = [engine.start("charging") for _ in range(5)]
    assert wait_for(lambda: all(engine.instance(r).record.status is InstanceStatus.DONE for r in roots))
    tasks = {i.id for i in engine.instances() if i.record.root in roots and i.id not in roots}
    assert len(tasks) == 5
    on_tasks = [lane for instance_id, lane in lanes if instance_id in tasks]
    assert on_tasks and all(lane.startswith("incarnate-task-") for lane in on_tasks), on_tasks
    assert list(runner.errors) == []


def test_idle_threads_sleep_until_work_is_queued_for_them(
    make_engine: EngineFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idle runner's step and task threads wake only when notified, and every queued unit notifies.

    With their safety wake-up a minute away, work sent after the threads
    fell asleep is still taken at once: a step (a message), then a task.
    """
    monkeypatch.setattr(_runners, "IDLE_WAIT", 60.0)
    runner = ThreadedRunner(workers=2, task_workers=2)
    engine = make_engine(charts.ALL, {"charge": lambda call: "ok"}, runner=runner)
    runner.start()
    parent = engine.start("parent", {"members": ["a"]})
    assert wait_for(lambda: len(engine.children(parent)) == 1 and runner.idle(), timeout=10.0)
    time.sleep(0.1)  # every thread is asleep on its condition now
    waits: list[str] = []  # a thread that wakes without work waits again: it is counted here
    for condition in (runner._ready, runner._task_ready):
        original = condition.wait

        def counted(timeout: float | None = None, original: Any = original) -> bool:
            waits.append(threading.current_thread().name)
            return bool(original(timeout))

        condition.wait = counted  # type: ignore[method-assign]
    time.sleep(0.3)
    assert waits == []  # nothing woke an idle thread
    began = time.monotonic()
    [kid] = engine.children(parent)
    with runner.inline(kid.id):  # a thread busy on the kid: the send only accepts and notifies
        engine.send(kid.id, "finish")
    assert wait_for(lambda: engine.snapshot(parent).configuration == ("reviewing",), timeout=10.0)
    time.sleep(0.3)
    root = engine.start("charging")  # its task goes to a sleeping task thread
    assert wait_for(lambda: engine.instance(root).record.status is InstanceStatus.DONE, timeout=10.0)
    assert time.monotonic() - began < 8.0  # a lost notification would wait for the 60 s wake-up
    assert list(runner.errors) == []


def test_stop_lets_in_flight_work_finish_and_starts_no_more(make_engine: EngineFactory) -> None:
    """Stopping waits for the task being run to commit its outcome, then processes nothing new."""
    started, release = threading.Event(), threading.Event()

    def charge(call: TaskCall) -> str:
        started.set()
        release.wait(10.0)
        return "paid"

    runner = ThreadedRunner(workers=2)
    engine = make_engine(charts.ALL, {"charge": charge}, runner=runner)
    runner.start()
    root = engine.start("charging")
    assert started.wait(10.0)
    stopper = threading.Thread(target=runner.stop)
    stopper.start()
    time.sleep(0.1)
    assert stopper.is_alive()  # still waiting for the task
    release.set()
    stopper.join(10.0)
    assert not stopper.is_alive()
    child_id = engine.instance(root).record.activations[0].child_id
    assert engine.instance(child_id).record.status is InstanceStatus.DONE
    assert engine.instance(root).record.inbox != ()  # accepted, waiting for the next engine
    engine.send(root, "ignored-while-stopped")
    time.sleep(0.2)
    assert len(engine.instance(root).record.inbox) == 2


def test_storage_from_environment_variables() -> None:
    """The eventsourcing environment variables select and configure the store."""
    assert Storage.from_env({}) == Storage.sqlite("incarnate.db")
    assert Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": "x.db"}) == (
        Storage.sqlite("x.db")
    )
    assert Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.popo"}) == Storage.popo()
    postgres = Storage.from_env(
        {
            "PERSISTENCE_MODULE": "eventsourcing.postgres",
            "POSTGRES_DBNAME": "orders",
            "POSTGRES_HOST": "db",
            "POSTGRES_PORT": "6543",
            "POSTGRES_USER": "app",
            "POSTGRES_PASSWORD": "secret",
            "POSTGRES_SCHEMA": "tenant1",
            "CREATE_TABLE": "n",
        }
    )
    assert postgres == Storage.postgres(
        "orders", host="db", port=6543, user="app", password="secret", schema="tenant1", create_tables=False
    )
    assert postgres.env()["CREATE_TABLE"] == "n"


def test_bad_storage_settings_are_clear_errors() -> None:
    """An unknown persistence module or a plain in-memory SQLite path is refused with the fix."""
    with pytest.raises(ConfigurationError, match="not supported"):
        Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.mongo"})
    with pytest.raises(ConfigurationError, match="popo"):
        Storage.sqlite(":memory:").env()


def test_postgres_needs_a_database_name() -> None:
    """PostgreSQL has no default database: leaving it out, in code or in the environment, names the fix."""
    with pytest.raises(ConfigurationError, match="needs POSTGRES_DBNAME"):
        Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_HOST": "db"})
    with pytest.raises(ConfigurationError, match="needs the database name"):
        Storage.postgres("")


def test_engine_reads_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no storage argument, the engine uses the store the environment names."""
    path = tmp_path / "from-env.db"
    monkeypatch.setenv("PERSISTENCE_MODULE", "eventsourcing.sqlite")
    monkeypatch.setenv("SQLITE_DBNAME", str(path))
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"})
    try:
        gate = engine.start("gate")
        assert engine.storage == Storage.sqlite(str(path))
    finally:
        engine.close()
    assert path.exists()
    again = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(str(path)))
    try:
        assert again.instance(gate).record.name == "gate"
    finally:
        again.close()
