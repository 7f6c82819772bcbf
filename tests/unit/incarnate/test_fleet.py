"""The fleet's read model: each engine's state, heartbeat age, leadership, trees and load, and the reports."""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from incarnate import Engine, RecoverySettings, Storage, ThreadedRunner, Worker
from incarnate._fleet import ABSENT, LAPSED, LIVE, RECENT, RETIRED, EngineRow, Fleet, WorkerLoad, fleet
from incarnate._liveness import Heartbeat
from incarnate.store import Coordination
from statechart import JsonValue
from tests.fleet_samples import LOAD as SAMPLE_LOAD
from tests.scenarios.charts import GATE
from tests.stores import storage_for

LOAD = attrs.evolve(SAMPLE_LOAD, retrying=1, timers=4, held=9, task_threads=2, behind=5, lag=0.25)
ROW_KEYS = {
    "engine_id",
    "group",
    "state",
    "leader",
    "heartbeat_age",
    "beat_at",
    "beat_at_epoch",
    "expires_at",
    "expires_at_epoch",
    "trees",
    "in_flight",
    "running",
    "queued",
    "retrying",
    "timers",
    "held",
    "threads",
    "task_threads",
    "lag",
    "behind",
    "position",
    "host",
    "pid",
}
"""The keys of an engine's row, as docs/reference/cli.md lists them."""


def wait_for(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll ``condition`` every 20 ms until true or ``timeout`` seconds passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


@pytest.fixture(params=["popo", "sqlite"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """An empty in-memory store, then a SQLite file."""
    with storage_for(request.param, tmp_path) as storage:
        yield storage


@pytest.fixture
def open_engine(storage: Storage) -> Iterator[Callable[..., Engine]]:
    """Build engines (running no work) over the test's store; all are closed at the end."""
    engines: list[Engine] = []

    def build(engine_id: str, **kwargs: Any) -> Engine:
        engines.append(Engine([GATE], storage=storage, engine_id=engine_id, **kwargs))
        return engines[-1]

    yield build
    for engine in reversed(engines):
        engine.close()


def by_id(read: Fleet) -> dict[str, EngineRow]:
    """The fleet's rows by engine id."""
    return {row.engine_id: row for row in read.rows}


# ------------------------------------------------------------------ the report


def test_a_report_reads_back_and_an_unreadable_one_is_unknown() -> None:
    """A load reads back from its JSON; a missing or mistyped field makes it unknown; extra keys do not."""
    document = LOAD.to_json()
    assert WorkerLoad.from_json(document) == LOAD
    assert WorkerLoad.from_json({**document, "newer": [1, 2]}) == LOAD
    assert WorkerLoad.from_json({**document, "lag": 1}) == attrs.evolve(LOAD, lag=1.0)
    assert WorkerLoad.from_json({**document, "leading": None}) == attrs.evolve(LOAD, leading=None)
    for name, value in [("running", None), ("queued", "3"), ("held", True), ("lag", "0"), ("host", 1)]:
        assert WorkerLoad.from_json({**document, name: value}) is None, name
    assert WorkerLoad.from_json({k: v for k, v in document.items() if k != "position"}) is None
    assert LOAD.in_flight == 5


def test_the_runner_counts_its_queue_and_timers() -> None:
    """ThreadedRunner.load() counts distinct queued instances and watched deadlines, nothing running."""
    runner = ThreadedRunner(workers=1)  # never attached: nothing takes from its queue
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for instance_id in (a, b, a):
        runner.notify(instance_id)
    runner.notify_at(10.0, c)
    runner.notify_at(10.0, c)
    runner.notify_at(20.0, c)
    load = runner.load()
    assert (load.running, load.queued, load.retrying, load.timers) == (0, 2, 0, 2)


def test_a_failing_report_never_costs_a_beat(storage: Storage) -> None:
    """A report that raises, or is no JSON, is left out; the beat itself is recorded."""
    store = storage.open()
    coordination = store.coordination()
    try:
        heartbeat = Heartbeat(lambda: coordination, "reporter")

        def broken() -> dict[str, JsonValue]:
            raise RuntimeError("no report today")

        heartbeat.reporting(broken)
        heartbeat.beat()
        assert "reporter" in coordination.heartbeats()
        assert coordination.loads() == {}
        heartbeat.reporting(lambda: {"nan": float("nan")})
        heartbeat.beat()
        assert coordination.loads() == {}
        heartbeat.reporting(lambda: {"running": 1})
        heartbeat.beat()
        assert coordination.loads() == {"reporter": {"running": 1}}
    finally:
        coordination.close()


def test_a_worker_reports_its_load_with_each_heartbeat(storage: Storage, tmp_path: Path) -> None:
    """A running worker's beats carry its threads, what it holds, its leadership and its follower's lag."""
    engine = Engine([GATE], storage=storage, runner=ThreadedRunner(workers=2, task_workers=1))
    settings = RecoverySettings(scan_interval=0.1, lease_duration=5.0)
    try:
        gate = engine.start("gate")
        worker = Worker(engine, lease=0.6, poll_interval=0.05, recovery=settings)  # beats every 0.2 s
        with worker:
            coordination = engine.parts.coordination

            def reported() -> WorkerLoad | None:
                document = coordination.loads().get(engine.engine_id)
                return None if document is None else WorkerLoad.from_json(document)

            assert wait_for(lambda: getattr(reported(), "leading", None) is True, 5.0), reported()
            load = reported()
            assert load is not None
            assert (load.threads, load.task_threads, load.pid, load.host) == (
                2,
                1,
                os.getpid(),
                socket.gethostname(),
            )
            assert load.held >= 1 and load.behind == 0
            assert 0.0 <= load.lag < 5.0
            engine.send(gate, "answer")
            assert wait_for(lambda: engine.instance(gate).record.status.finished, 5.0)
            assert wait_for(lambda: getattr(reported(), "position", 0) > 0, 5.0), reported()
        row = by_id(fleet(engine))[engine.engine_id]
        assert (row.state, row.leader, row.trees) == (RETIRED, False, 0)
        assert row.load is not None  # the last report stays with the retired row
    finally:
        engine.close()


# ------------------------------------------------------------------ the read model


def test_each_engine_has_its_state_leadership_trees_and_load(
    open_engine: Callable[..., Engine], storage: Storage
) -> None:
    """Live, lapsed, retired and absent engines; trees are in-flight roots owned; leaders as reported."""
    reader = open_engine("reader")
    owner = open_engine("w-live")
    roots = [owner.start("gate") for _ in range(2)]
    owner.send(roots[1], "answer")
    owner.run_until_idle()  # one root done: it no longer counts
    reader.start("gate")  # owned by an engine that never beats
    coordination: Coordination = reader.parts.coordination
    coordination.beat("w-live", "default", 60.0, LOAD.to_json())
    coordination.beat("w-plain", "default", 60.0)
    coordination.beat("w-lapsed", "default", 0.05, LOAD.to_json())
    coordination.beat("w-retired", "default", 60.0, LOAD.to_json())
    coordination.retire("w-retired")
    coordination.beat("w-batch", "batch", 60.0, attrs.evolve(LOAD, leading=False).to_json())
    time.sleep(0.1)
    read = fleet(reader)
    rows = by_id(read)
    assert [row.engine_id for row in read.rows] == [
        "w-batch",
        "w-live",
        "w-plain",
        "w-lapsed",
        "w-retired",
        "reader",
    ]
    assert {name: row.state for name, row in rows.items()} == {
        "w-batch": LIVE,
        "w-live": LIVE,
        "w-plain": LIVE,
        "w-lapsed": LAPSED,
        "w-retired": RETIRED,
        "reader": ABSENT,
    }
    assert read.leaders_from == "reports"
    assert {name: row.leader for name, row in rows.items()} == {
        "w-batch": False,
        "w-live": True,
        "w-plain": None,  # a live engine that reports nothing: unknown
        "w-lapsed": False,  # not live: not sweeping, whatever it reported last
        "w-retired": False,
        "reader": False,
    }
    assert {name: row.trees for name, row in rows.items()} == {
        "w-batch": 0,
        "w-live": 1,
        "w-plain": 0,
        "w-lapsed": 0,
        "w-retired": 0,
        "reader": 1,
    }
    assert rows["w-live"].load == LOAD and rows["w-plain"].load is None
    assert rows["reader"].group is None and rows["reader"].heartbeat_age is None
    live = rows["w-live"]
    assert live.heartbeat_age is not None and 0.0 <= live.heartbeat_age < 5.0
    assert live.beat_at is not None and live.expires_at == pytest.approx(live.beat_at + 60.0)
    assert abs(read.now - time.time()) < 5.0


def test_a_group_shows_its_own_engines_only(open_engine: Callable[..., Engine]) -> None:
    """With a group, only its engines are read; engines without a heartbeat have no group and are left out."""
    reader = open_engine("reader")
    reader.start("gate")
    coordination = reader.parts.coordination
    coordination.beat("w-live", "default", 60.0, LOAD.to_json())
    coordination.beat("w-batch", "batch", 60.0, LOAD.to_json())
    read = fleet(reader, group="batch")
    assert (read.group, [row.engine_id for row in read.rows]) == ("batch", ["w-batch"])
    assert [row.engine_id for row in fleet(reader, group="nobody").rows] == []


def test_old_engines_that_own_nothing_are_left_out_unless_asked(
    open_engine: Callable[..., Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An hour after their last beat, engines owning nothing are counted in left_off; everyone shows them."""
    reader = open_engine("reader")
    owner = open_engine("w-owner")
    owner.start("gate")
    coordination = reader.parts.coordination
    for name in ("w-owner", "w-gone", "w-done"):
        coordination.beat(name, "default", 30.0, LOAD.to_json())
    coordination.retire("w-done")
    later = coordination.now() + RECENT + 60.0
    monkeypatch.setattr(coordination, "now", lambda: later)
    read = fleet(reader)
    assert [row.engine_id for row in read.rows] == ["w-owner"]
    assert read.left_off == 2
    assert by_id(read)["w-owner"].state == LAPSED
    everyone = fleet(reader, everyone=True)
    assert [row.engine_id for row in everyone.rows] == ["w-gone", "w-owner", "w-done"]
    assert everyone.left_off == 0


def test_the_json_form_has_the_documented_keys(open_engine: Callable[..., Engine]) -> None:
    """The fleet's JSON: its own keys and one object per engine; an unknown load is nulls."""
    reader = open_engine("reader")
    coordination = reader.parts.coordination
    coordination.beat("w-live", "default", 60.0, LOAD.to_json())
    coordination.beat("w-plain", "default", 60.0)
    document = fleet(reader).to_json()
    assert set(document) == {"now", "now_epoch", "group", "leaders_from", "left_off", "engines"}
    engines = document["engines"]
    assert isinstance(engines, list)
    live, plain = engines
    assert isinstance(live, dict) and isinstance(plain, dict)
    assert set(live) == set(plain) == ROW_KEYS
    assert {k: live[k] for k in ("engine_id", "state", "leader", "in_flight", "lag", "host")} == {
        "engine_id": "w-live",
        "state": "live",
        "leader": True,
        "in_flight": 5,
        "lag": 0.25,
        "host": "web-1",
    }
    known = {"engine_id", "group", "state", "heartbeat_age", "trees", "beat_at", "beat_at_epoch"}
    known |= {"expires_at", "expires_at_epoch"}
    assert {key: plain[key] for key in ROW_KEYS - known} == dict.fromkeys(ROW_KEYS - known)
    assert isinstance(live["beat_at"], str) and isinstance(live["beat_at_epoch"], float)
