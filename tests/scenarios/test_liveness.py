"""Liveness of one threaded engine: work that failed on the store is retried once it answers again,
and timers fire on time while every task thread is blocked in a task body."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import Engine, EngineError, Fenced, RecoverySettings, Storage, TaskCall, ThreadedRunner, Worker
from incarnate import _worker as worker_module
from incarnate._work import UnitOfWork
from statechart import Chart, JsonValue, after, final, invoke, state, transition

TIMED = Chart("timed", state("waiting", on=[after(1.0, "late")]), final("late"))
"""A root whose only work is a timer due one second after it starts."""

GATE = Chart("gate", state("waiting", on=[transition("approve", "approved")]), final("approved"))
"""A root that waits for ``approve``."""

BLOCKING = Chart(
    "blocking",
    state("working", invoke=[invoke("slow", task="block")], on=[transition("done.invoke.slow", "finished")]),
    final("finished"),
)
"""A root whose task body blocks until the test releases it."""


def wait_for(predicate: Callable[[], bool], timeout: float) -> float | None:
    """Poll ``predicate`` until it holds; the seconds it took, or None past ``timeout``."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():
            return time.monotonic() - began
        time.sleep(0.02)
    return None


def test_work_that_failed_on_a_locked_store_is_retried(tmp_path: Path) -> None:
    """Timers and accepted events that fell due while another process held the write lock past the
    engine's lock timeout are processed once the lock is released: nothing is stranded."""
    path = str(tmp_path / "locked.db")
    storage = Storage.sqlite(path, lock_timeout=1)
    with Engine([TIMED, GATE], storage=storage, runner=ThreadedRunner(workers=2)) as engine:
        timed = [engine.start("timed") for _ in range(3)]
        gates = [engine.start("gate") for _ in range(2)]
        for gate in gates:
            engine.send(gate, "approve")
        blocker = sqlite3.connect(path, timeout=5)
        try:
            # The gates may step before the lock is taken; the timers fall due under it (1 s).
            blocker.execute("BEGIN EXCLUSIVE")
            time.sleep(2.5)  # past the timers' deadline and the engine's 1 s lock timeout
        finally:
            blocker.rollback()
            blocker.close()
        everyone = [*timed, *gates]

        def finished() -> bool:
            return all(engine.instance(i).record.status is InstanceStatus.DONE for i in everyone)

        took = wait_for(finished, timeout=15.0)
        assert took is not None, {str(i): engine.instance(i).record.status.value for i in everyone}
        assert not engine.runner.retrying()  # type: ignore[attr-defined]


def test_a_timer_fires_on_time_while_every_task_thread_is_blocked(tmp_path: Path) -> None:
    """Task bodies run on their own threads: a 1 s timer fires within 1.5 s although they all block."""
    release = threading.Event()
    started = threading.Semaphore(0)

    def block(call: TaskCall) -> JsonValue:
        started.release()
        release.wait(20.0)
        return "released"

    runner = ThreadedRunner(workers=2, task_workers=2)
    storage = Storage.sqlite(str(tmp_path / "busy.db"))
    with Engine([BLOCKING, TIMED], {"block": block}, storage=storage, runner=runner) as engine:
        try:
            blocked = [engine.start("blocking") for _ in range(3)]  # more tasks than task threads
            for _ in range(2):
                assert started.acquire(timeout=10.0), "the task threads did not start the bodies"
            began = time.monotonic()
            timed = engine.start("timed")
            took = wait_for(lambda: engine.instance(timed).record.status is InstanceStatus.DONE, 10.0)
            assert took is not None, "the timer never fired"
            assert time.monotonic() - began < 1.5, (
                f"the 1 s timer fired after {time.monotonic() - began:.2f}s"
            )
        finally:
            release.set()
        done = wait_for(
            lambda: all(engine.instance(b).record.status is InstanceStatus.DONE for b in blocked), 15.0
        )
        assert done is not None


def test_two_threaded_engines_never_take_each_others_live_trees(tmp_path: Path) -> None:
    """An engine that runs work beats a heartbeat: another engine's resume_all leaves its trees alone,
    and takes them at once after it closes (a retired heartbeat)."""
    path = str(tmp_path / "two.db")
    first = Engine([GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id="first")
    second = Engine(
        [GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id="second"
    )
    try:
        gate = first.start("gate")
        assert second.resume_all() == 0
        assert [held.holder for held in second.left_alone] == ["first"]
        assert second.instance(gate).record.owner == "first"
        first.close()
        assert second.parts.coordination.heartbeats()["first"].retired
        assert second.resume_all() == 1
        second.send(gate, "approve")
        done = wait_for(lambda: second.instance(gate).record.status is InstanceStatus.DONE, 10.0)
        assert done is not None
    finally:
        first.close()
        second.close()


def test_a_restart_leaves_live_engines_trees_alone_without_reading_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """resume_all() knows a tree whose root a live engine owns is held from the listing: it reads
    none of its instances (a restart costs what its own trees cost, not the fleet's)."""
    path = str(tmp_path / "fleet.db")
    parent = Chart(
        "parent",
        state("waiting", invoke=[invoke("kid", chart="gate")], on=[transition("done.invoke.kid", "done")]),
        final("done"),
    )
    first = Engine([parent, GATE], storage=Storage.sqlite(path), engine_id="first")
    second = Engine([parent, GATE], storage=Storage.sqlite(path), engine_id="second")
    try:
        roots = [first.start("parent") for _ in range(3)]
        first.run_until_idle()
        first.parts.coordination.beat("first", "default", 60.0)
        reads: list[UUID] = []
        for name in ("read", "prefetch"):
            method = getattr(second.parts.reads, name)

            def counted(ids: object, *rest: object, _method: Callable[..., object] = method) -> object:
                reads.append(ids)  # type: ignore[arg-type]
                return _method(ids, *rest)

            monkeypatch.setattr(second.parts.reads, name, counted)
        assert second.resume_all() == 0
        assert sorted(held.root for held in second.left_alone) == sorted(roots)
        assert {held.holder for held in second.left_alone} == {"first"}
        assert reads == [], "the live engine's trees were read"
        assert all(first.owns(root) for root in roots)
    finally:
        first.close()
        second.close()


def test_a_gracefully_stopped_workers_trees_move_at_once(tmp_path: Path) -> None:
    """After a graceful stop the other worker's recovery manager takes the trees within seconds,
    although its ttl (60 s) has not passed since they last changed."""
    path = str(tmp_path / "handover.db")
    settings = RecoverySettings(ttl=60.0, scan_interval=0.2, item_timeout=5.0)
    leaving = Engine(
        [GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id="leaving"
    )
    staying = Engine(
        [GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id="staying"
    )
    try:
        with Worker(staying, lease=5.0, poll_interval=0.1, recovery=settings):
            worker = Worker(leaving, lease=5.0, poll_interval=0.1, recovery=None)
            worker.start()
            gates = [leaving.start("gate") for _ in range(3)]
            time.sleep(0.5)
            assert {staying.instance(g).record.owner for g in gates} == {"leaving"}
            stopped = time.monotonic()
            worker.stop()
            moved = wait_for(lambda: {staying.instance(g).record.owner for g in gates} == {"staying"}, 10.0)
            assert moved is not None, "the trees did not move"
            assert time.monotonic() - stopped < 5.0
            for gate in gates:
                staying.send(gate, "approve")
            done = wait_for(
                lambda: all(staying.instance(g).record.status is InstanceStatus.DONE for g in gates), 10.0
            )
            assert done is not None
    finally:
        leaving.close()
        staying.close()


def test_finished_instances_are_forgotten(tmp_path: Path) -> None:
    """Nothing of a finished instance stays in the engine's ownership memory: it grows with the
    instances in flight, not with those handled."""
    storage = Storage.sqlite(str(tmp_path / "memory.db"))
    with Engine([GATE, BLOCKING], {"block": lambda call: "ok"}, storage=storage) as engine:
        gates = [engine.start("gate") for _ in range(20)]
        tasks = [engine.start("blocking") for _ in range(5)]
        engine.run_until_idle()
        assert engine.parts.holdings.sizes()[0] == 20  # the gates wait; the blocking roots and tasks are done
        for gate in gates:
            engine.send(gate, "approve")
        engine.run_until_idle()
        assert all(engine.instance(i).record.status is InstanceStatus.DONE for i in [*gates, *tasks])
        assert engine.parts.holdings.sizes() == (0, 0, 0)
        assert engine.parts.holdings.held() == {} and engine.parts.holdings.acquired() == frozenset()
        remembered = engine.parts.copies.remembered()  # the engine's own caches of copies
        assert remembered.isdisjoint({*gates, *tasks})


def test_new_roots_spread_over_the_live_workers(tmp_path: Path) -> None:
    """Thirty roots a client starts go to three workers about evenly (10 ± 4 each), not to the fastest."""
    path = str(tmp_path / "spread.db")
    engines = [
        Engine([GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id=f"w{n}")
        for n in range(3)
    ]
    # A long poll makes every follower see the thirty roots in one batch, as after a burst.
    workers = [Worker(engine, lease=10.0, poll_interval=1.0, recovery=None) for engine in engines]
    try:
        for worker in workers:
            worker.start()
        with Engine([GATE], storage=Storage.sqlite(path), engine_id="client") as client:
            roots = [client.start("gate") for _ in range(30)]

            def owners() -> list[str]:
                return [client.instance(root).record.owner for root in roots]

            assert wait_for(lambda: "client" not in owners(), 20.0) is not None, owners()
            spread = {engine.engine_id: owners().count(engine.engine_id) for engine in engines}
            assert all(6 <= count <= 14 for count in spread.values()), spread
    finally:
        for worker in workers:
            worker.stop()
        for engine in engines:
            engine.close()


def test_the_watchdog_wakes_a_held_instance_whose_wake_up_was_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event accepted from another process whose wake-up never reached the runner is still
    processed: the worker's watchdog finds the held instance with work due and wakes it."""
    monkeypatch.setattr(worker_module, "WATCHDOG_INTERVAL", 0.2)
    path = str(tmp_path / "watchdog.db")
    engine = Engine([GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1))
    runner = engine.runner
    assert isinstance(runner, ThreadedRunner)
    lost: list[object] = []
    notify = runner.notify

    def lossy(instance_id: UUID) -> None:
        if instance_id == target[0] and not lost:
            lost.append(instance_id)  # the first wake-up for it goes missing
            return
        notify(instance_id)

    target: list[UUID] = []
    try:
        with Worker(engine, lease=10.0, poll_interval=0.05, recovery=None):
            gate = engine.start("gate")
            target.append(gate)
            monkeypatch.setattr(runner, "notify", lossy)
            with Engine([GATE], storage=Storage.sqlite(path), engine_id="client") as client:
                client.send(gate, "approve")
            took = wait_for(lambda: engine.instance(gate).record.status is InstanceStatus.DONE, 10.0)
            assert lost, "the wake-up was not lost: the test proves nothing"
            assert took is not None, "the watchdog never woke it"
    finally:
        engine.close()


def test_the_librarys_save_cannot_write_an_instance_unfenced(tmp_path: Path) -> None:
    """Engine.save() (inherited from eventsourcing's Application) refuses an instance: no unfenced write."""
    with Engine([GATE], storage=Storage.sqlite(str(tmp_path / "save.db"))) as engine:
        gate = engine.start("gate")
        instance = engine.instance(gate)
        instance.record_incident("test", "written around the fencing check", park=True)
        with pytest.raises(EngineError, match="without checking that this engine owns it"):
            engine.parts.journal.save(instance)
        assert engine.instance(gate).record.status is InstanceStatus.RUNNING


def test_a_unit_whose_instance_was_dropped_meanwhile_is_fenced_at_its_commit(tmp_path: Path) -> None:
    """The commit re-checks the holdings: an instance another thread dropped after the unit of work
    checked it (a claim seen by the follower, a fenced write) is not written."""
    with Engine([GATE], storage=Storage.sqlite(str(tmp_path / "recheck.db"))) as engine:
        gate = engine.start("gate")
        version = engine.instance(gate).version
        uow = UnitOfWork(engine.parts.commits)
        instance = uow.load(gate)
        assert instance is not None
        uow.fence(instance)  # held: the check passes now
        instance.record_incident("test", "a write decided while the engine still held it", park=False)
        engine.parts.holdings.fence(gate)  # another thread learns it lost the instance
        with pytest.raises(Fenced):
            engine.parts.commits.commit(uow)
        assert engine.instance(gate).version == version


def test_placing_new_roots_a_few_at_a_time_reads_the_listing_now_and_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that wakes for every new root reads the in-flight roots at most once a second to place
    them, counting its own placements in between; a root placed again reads them afresh."""
    path = str(tmp_path / "place.db")
    engine = Engine([GATE], storage=Storage.sqlite(path), runner=ThreadedRunner(workers=1), engine_id="w1")
    try:
        worker = Worker(engine, lease=10.0, recovery=None)
        engine.parts.coordination.beat("w2", "default", 60.0)  # a second live member of the group
        reads: list[dict[str, bool]] = []
        rows = engine.listing.rows

        def counted(**options: bool) -> object:
            reads.append(options)
            return rows(**options)

        monkeypatch.setattr(engine.listing, "rows", counted)
        with Engine([GATE], storage=Storage.sqlite(path), engine_id="client") as client:
            roots: list[UUID] = [client.start("gate").id for _ in range(6)]
        mine = [root for root in roots if worker._mine([root])]
        assert reads == [{"in_flight": True, "roots": True}], "one read for six roots placed one by one"
        assert 2 <= len(mine) <= 4, "the roots it placed counted: about half are its own"
        worker._mine(roots[:1], rounds=1)
        assert len(reads) == 2, "a root placed again reads the listing afresh"
    finally:
        engine.close()
