"""The recovery manager's scenarios, on a real SQLite file and the real PostgreSQL.

Roots are started by an engine that never heartbeats (``dead-owner``), so
any other engine may recover them at once; the manager under test runs on
a second engine over the same store. Every wait is bounded.
"""

from __future__ import annotations

import logging
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import UUID, uuid4

import attrs
import pytest

from aggregates import Instance, InstanceStatus
from incarnate import (
    ConfigurationError,
    Engine,
    PostgresStorage,
    RecoveryManager,
    RecoverySettings,
    Storage,
    StorageError,
    SweepReport,
    TaskFunction,
)
from incarnate.store._port import Lease
from projections import CheckpointError, ListingRow
from tests.scenarios import charts
from tests.stores import storage_for

ROOT_DIR = Path(__file__).resolve().parents[2]
LOGGER = "incarnate.recovery.manager"
TASKS: dict[str, TaskFunction] = {"charge": lambda call: "ok"}


@pytest.fixture(params=["sqlite", "postgres"])
def fleet_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """An empty SQLite file or PostgreSQL schema."""
    with storage_for(request.param, tmp_path) as storage:
        yield storage


@pytest.fixture
def engines(fleet_storage: Storage) -> Iterator[Callable[[str], Engine]]:
    """Build engines over the test's store by id; each is closed at the end."""
    built: list[Engine] = []

    def build(engine_id: str) -> Engine:
        engine = Engine(charts.ALL, TASKS, storage=fleet_storage, engine_id=engine_id)
        built.append(engine)
        return engine

    yield build
    for engine in reversed(built):
        engine.close()


def settings(**changes: object) -> RecoverySettings:
    """Fast settings for tests, with a lock id of this test's own (advisory locks span the database)."""
    base = RecoverySettings(
        ttl=0.0,
        scan_interval=0.1,
        lease_duration=5.0,
        item_timeout=2.0,
        lock_id=random.SystemRandom().randrange(1, 2**62),
    )
    return attrs.evolve(base, **changes)  # type: ignore[arg-type]


def dead_roots(build: Callable[[str], Engine], count: int, chart: str = "gate") -> list[UUID]:
    """Start ``count`` roots on an engine that never heartbeats, then close it."""
    engine = build("dead-owner")
    roots: list[UUID] = [engine.start(chart) for _ in range(count)]
    engine.run_until_idle()
    return roots


def leases(engine: Engine) -> dict[UUID, Lease]:
    """The store's recovery leases by root."""
    return {lease.root: lease for lease in engine.parts.coordination.leases()}


def until(predicate: Callable[[], bool], timeout: float = 15.0, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` seconds passed; whether it held."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def expired(engine: Engine, roots: list[UUID]) -> Callable[[], bool]:
    """Whether every lease on ``roots`` has expired by the store's clock."""

    def check() -> bool:
        now = engine.parts.coordination.now()
        found = leases(engine)
        return all(found[root].expires_at <= now for root in roots)

    return check


# ------------------------------------------------------------------ stop()


def test_stop_mid_fan_out_leaves_undispatched_leases_to_expire(
    engines: Callable[[str], Engine], caplog: pytest.LogCaptureFixture
) -> None:
    """stop() mid fan-out waits for the call in progress, dispatches no more; a new manager gets the rest."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    roots = dead_roots(engines, 5)
    first = engines("replica-1")
    started = threading.Event()
    release = threading.Event()
    calls: list[UUID] = []

    def slow(root: UUID) -> None:
        calls.append(root)
        started.set()
        release.wait(10.0)

    manager = RecoveryManager(first, settings(worker_count=1, lease_duration=1.5, item_timeout=10.0), slow)
    reports: list[SweepReport] = []
    sweeper = threading.Thread(target=lambda: reports.append(manager.sweep()))
    stopper = threading.Thread(target=manager.stop)
    sweeper.start()
    try:
        assert started.wait(10.0)
        stopper.start()
        time.sleep(0.3)
        assert stopper.is_alive(), "stop() returned while a handler call was still running"
        release.set()
        stopper.join(10.0)
        sweeper.join(10.0)
        assert not stopper.is_alive() and not sweeper.is_alive(), "stop() deadlocked"
    finally:
        release.set()
    [report] = reports
    assert (report.claimed, report.dispatched, report.succeeded, report.failed) == (5, 1, 1, 0)
    assert report.cancelled and calls == roots[:1]
    held = leases(first)
    assert held[roots[0]].outcome == "succeeded"
    assert all(held[root].holder == "replica-1" and held[root].outcome == "" for root in roots[1:])
    summary = [r for r in caplog.records if "claimed=5 dispatched=1 succeeded=1 failed=0" in r.getMessage()]
    assert [r.levelno for r in summary] == [logging.WARNING]
    assert any(r.levelno == logging.DEBUG and "cancelled" in r.getMessage() for r in caplog.records)

    second = engines("replica-2")
    fresh = RecoveryManager(second, settings())  # the default handler: engine.take_over(root)
    assert fresh.sweep().claimed == 1  # only the released root: the others' leases still hold
    assert until(expired(second, roots[1:]))
    later = fresh.sweep()
    assert (later.claimed, later.succeeded) == (4, 4)
    assert all(second.owns(root) for root in roots)


# ---------------------------------------------------------- lapsed claims


def test_a_lapsed_claim_is_picked_up_by_another_replica(engines: Callable[[str], Engine]) -> None:
    """A lease held by a replica that died is skipped while it lasts and taken over once it expired."""
    [root] = dead_roots(engines, 1)
    engine = engines("replica-1")
    assert engine.parts.coordination.claim([root], "crashed-replica", 0.5, 1) == [root]
    seen: list[UUID] = []
    manager = RecoveryManager(engine, settings(), seen.append)
    skipped = manager.sweep()
    assert (skipped.candidates, skipped.claimed, seen) == (1, 0, [])
    assert until(expired(engine, [root]))
    taken = manager.sweep()
    assert (taken.claimed, taken.succeeded, seen) == (1, 1, [root])
    lease = leases(engine)[root]
    assert (lease.holder, lease.outcome) == ("replica-1", "succeeded")


def test_children_are_never_candidates(engines: Callable[[str], Engine]) -> None:
    """Only the root of a dead owner's call tree is handed to the handler, never its in-flight child."""
    [parent] = dead_roots(engines, 1, chart="parent")
    engine = engines("replica-1")
    [kid] = engine.children(parent)
    assert kid.record.status.value in ("born", "running")
    seen: list[UUID] = []
    report = RecoveryManager(engine, settings(), seen.append).sweep()
    assert (report.candidates, report.claimed, seen) == (1, 1, [parent])


# ------------------------------------------------------------- leadership


def test_leader_failover_after_sigkill(fleet_storage: Storage, engines: Callable[[str], Engine]) -> None:
    """A manager does not sweep while a leader process holds the lock, and leads soon after kill -9."""
    if not isinstance(fleet_storage, PostgresStorage):
        pytest.skip("leader election is a PostgreSQL advisory lock; a SQLite engine always leads")
    [root] = dead_roots(engines, 1)
    standby = engines("standby")
    config = settings()
    seen: list[UUID] = []
    manager = RecoveryManager(standby, config, seen.append)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.scenarios.manager_leader",
            "--schema",
            fleet_storage.schema,
            "--user",
            fleet_storage.user,
            "--host",
            fleet_storage.host,
            "--port",
            str(fleet_storage.port),
            "--dbname",
            fleet_storage.dbname,
            "--lock-id",
            str(config.lock_id),
            "--seconds",
            "60",
        ],
        cwd=ROOT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 30.0)
        assert ready, "the leader process did not report leadership within 30 s"
        assert process.stdout.readline().strip() == "leading"
        follower = manager.sweep()
        assert (follower.leader, follower.claimed, seen) == (False, 0, [])
        process.send_signal(signal.SIGKILL)
        process.wait(10.0)
        killed_at = time.monotonic()
        assert until(lambda: manager.sweep().leader, timeout=20.0, step=0.1)
        assert time.monotonic() - killed_at < 20.0
        assert seen == [root]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(10.0)
        manager.stop()


# ---------------------------------------------------------------- orphans


def test_a_child_whose_parent_vanished_becomes_orphan_after_the_grace_period(
    engines: Callable[[str], Engine],
) -> None:
    """A child whose parent has no record and no event is written orphan, not failed, after the grace."""
    owner = engines("dead-owner")
    parent = owner.start("parent")
    owner.run_until_idle()
    [kid] = owner.children(parent)
    facts = kid.record.birth
    assert facts is not None
    ghost = uuid4()
    lost_facts = attrs.evolve(facts, ref=attrs.evolve(facts.ref, parent=ghost), root=ghost)
    lost_kid = Instance.born(lost_facts, fingerprint=owner.charts["kid"].fingerprint, owner="dead-owner")
    owner.parts.commits.save_instances(lost_kid)
    lost = lost_facts.child_id

    engine = engines("replica-1")
    seen: list[UUID] = []
    manager = RecoveryManager(engine, settings(ttl=3600.0, orphan_grace_period=1.0), seen.append)
    early = manager.sweep()
    assert (early.claimed, early.orphaned) == (0, 0), "promoted before the grace period"
    reports: list[SweepReport] = []

    def promoted() -> bool:
        reports.append(manager.sweep())
        return reports[-1].orphaned == 1

    assert until(promoted)
    assert reports[-1].claimed == 1 and seen == []
    record = engine.instance(lost).record
    assert record.status is InstanceStatus.ORPHAN  # its own status: neither failed nor cancelled
    engine.listing.catch_up()
    row = engine.listing.get(lost)
    assert row is not None and row.status == "orphan" and not row.in_flight
    assert leases(engine)[lost].outcome == "orphan"
    assert engine.instance(kid.id).record.status.value in ("born", "running")  # its parent exists


# ------------------------------------------------------ per-item timeouts


def test_a_hung_handler_is_abandoned_and_never_run_twice_at_once(engines: Callable[[str], Engine]) -> None:
    """A call past item_timeout is abandoned, its lease left to expire; it is retried only once it ended."""
    [root] = dead_roots(engines, 1)
    engine = engines("replica-1")
    gate = threading.Event()
    lock = threading.Lock()
    calls: list[UUID] = []
    active = [0, 0]  # now, peak

    def hung(root: UUID) -> None:
        with lock:
            calls.append(root)
            active[0] += 1
            active[1] = max(active)
        try:
            gate.wait(20.0)
        finally:
            with lock:
                active[0] -= 1

    manager = RecoveryManager(engine, settings(item_timeout=0.3, lease_duration=0.8), hung)
    try:
        began = time.monotonic()
        first = manager.sweep()
        assert time.monotonic() - began < 5.0, "the sweep waited for the hung call"
        assert (first.claimed, first.dispatched, first.failed, first.timed_out) == (1, 1, 1, 1)
        lease = leases(engine)[root]
        assert (lease.holder, lease.outcome) == ("replica-1", "")  # not released: it expires
        assert until(expired(engine, [root]))
        assert manager.sweep().claimed == 0  # lease lapsed, but the first call still runs
        assert calls == [root] and manager.running == {root}
    finally:
        gate.set()
    assert until(lambda: not manager.running)
    retried = manager.sweep()
    assert (retried.claimed, retried.succeeded) == (1, 1)
    assert calls == [root, root] and active[1] == 1


# --------------------------------------------------- outcomes and summary


@attrs.frozen
class _Parked:
    parked: bool = True


def test_outcomes_are_classified_and_the_summary_is_logged(
    engines: Callable[[str], Engine], caplog: pytest.LogCaptureFixture
) -> None:
    """Each kind of outcome is released with its name and counted in the logged summary line."""
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    roots = dead_roots(engines, 5)
    engine = engines("replica-1")
    ok, flaky, broken, parked, boom = roots

    def handler(root: UUID) -> object:
        if root == flaky:
            raise StorageError("the store blinked")
        if root == broken:
            raise CheckpointError(root, "team[a]", "missing activation")
        if root == parked:
            return _Parked()
        if root == boom:
            raise RuntimeError("boom")
        return None

    report = RecoveryManager(engine, settings(worker_count=2), handler).sweep()
    assert (report.claimed, report.dispatched, report.succeeded, report.failed) == (5, 5, 1, 4)
    assert (report.transient, report.errors, report.timed_out, report.cancelled) == (1, 1, 0, False)
    outcomes = {root: lease.outcome for root, lease in leases(engine).items()}
    assert outcomes == {
        ok: "succeeded",
        flaky: "transient",
        broken: "failed",
        parked: "failed",
        boom: "error",
    }
    assert "RuntimeError: boom" in leases(engine)[boom].message
    summary = [r for r in caplog.records if "claimed=5 dispatched=5 succeeded=1 failed=4" in r.getMessage()]
    assert [r.levelno for r in summary] == [logging.INFO]
    [trace] = [r for r in caplog.records if r.exc_info and str(boom) in r.getMessage()]
    assert trace.levelno == logging.WARNING


# --------------------------------------------------------------- settings


def test_unsafe_settings_warn_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """start() warns of a lease shorter than the scan interval or a batch's worst case; 0 workers fails."""
    caplog.set_level(logging.WARNING, logger=LOGGER)
    assert RecoverySettings().warnings() == []
    engine = Engine(
        charts.ALL, TASKS, storage=Storage.sqlite(str(tmp_path / "settings.db")), engine_id="replica-1"
    )
    try:
        unsafe = settings(
            lease_duration=2.0, scan_interval=5.0, batch_size=100, worker_count=4, item_timeout=1.0
        )
        manager = RecoveryManager(engine, unsafe, lambda root: None)
        manager.start()
        assert manager.stop(10.0)
        messages = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("shorter than scan_interval" in m for m in messages)
        assert any("25 x 1 s = 25 s" in m for m in messages)
        with pytest.raises(ConfigurationError, match="worker_count must be at least 1"):
            RecoveryManager(engine, settings(worker_count=0))
        RecoveryManager(engine, settings(worker_count=0, enabled=False))  # a disabled manager needs none
    finally:
        engine.close()


def test_a_started_manager_recovers_in_the_background(engines: Callable[[str], Engine]) -> None:
    """start() sweeps every scan_interval on its own thread until stop()."""
    roots = dead_roots(engines, 2)
    engine = engines("replica-1")
    seen: list[UUID] = []
    manager = RecoveryManager(engine, settings(), seen.append)
    manager.start()
    try:
        assert until(lambda: sorted(set(seen)) == sorted(roots))
    finally:
        assert manager.stop(10.0)


def test_a_backlog_is_swept_batch_after_batch_without_waiting(engines: Callable[[str], Engine]) -> None:
    """After a full batch that all succeeded the manager sweeps again at once, not a scan interval later."""
    roots = dead_roots(engines, 6)
    engine = engines("replica-1")
    manager = RecoveryManager(engine, settings(batch_size=2, scan_interval=60.0, lease_duration=60.0))
    manager.start()
    try:
        assert until(lambda: all(engine.owns(root) for root in roots), timeout=20.0)
    finally:
        assert manager.stop(10.0)


# ---------------------------------------------------- shares of a batch


def _counting_claim_saves(engine: Engine) -> list[int]:
    """Count the saves of ``engine`` that claim instances: one entry (the instances claimed) per save."""
    saves: list[int] = []
    commits = engine.parts.commits
    save = commits.save_instances

    def counted(*instances: Instance) -> None:
        claims = sum(isinstance(e, Instance.Claimed) for i in instances for e in i.pending_events)
        if claims:
            saves.append(claims)
        save(*instances)

    commits.save_instances = counted  # type: ignore[method-assign]
    return saves


def _counting_listing_reads(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, bool]]:
    """Record the options of every read of ``engine``'s listing rows, one entry per read."""
    reads: list[dict[str, bool]] = []
    rows = engine.listing.rows

    def counted_rows(**options: bool) -> list[ListingRow]:
        reads.append(options)
        return rows(**options)

    monkeypatch.setattr(engine.listing, "rows", counted_rows)
    return reads


def test_the_default_handler_takes_a_batch_over_in_shares(
    engines: Callable[[str], Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a handler of the caller's, each thread's share of a batch is claimed in one save.

    Every tree still moves as a unit (root and child) and every root's
    lease is released with its own outcome.
    """
    roots = dead_roots(engines, 5, chart="parent") + dead_roots(engines, 4)
    engine = engines("replica-1")
    saves = _counting_claim_saves(engine)
    coordination = engine.parts.coordination
    released: list[int] = []
    release_many = coordination.release_many

    def counted_release(roots: list[UUID], holder: str, **outcome: str) -> int:
        released.append(len(roots))
        return release_many(roots, holder, **outcome)

    monkeypatch.setattr(coordination, "release_many", counted_release)
    report = RecoveryManager(engine, settings(worker_count=2, batch_size=9)).sweep()
    assert (report.claimed, report.dispatched, report.succeeded, report.failed) == (9, 9, 9, 0)
    assert sorted(saves) == [4, 10], "two shares (5 trees of 2, 4 of 1), each claimed in one save"
    assert sorted(released) == [4, 5], "each share's leases released in one statement"
    assert all(engine.owns(root) for root in roots)
    assert all(engine.owns(kid.id) for root in roots[:5] for kid in engine.children(root))
    assert {lease.outcome for lease in leases(engine).values()} == {"succeeded"}


def test_a_tree_held_by_a_live_engine_fails_only_its_own_root_in_a_share(
    engines: Callable[[str], Engine],
) -> None:
    """A share in which one tree has a member on a live engine: that root is transient, the rest move."""
    roots = dead_roots(engines, 3, chart="parent")
    engine = engines("replica-1")
    [kid] = engine.children(roots[1])
    kid.claim("live-one", reason="held elsewhere")
    engine.parts.commits.save_instances(kid)
    engine.parts.coordination.beat("live-one", "default", 60.0)
    report = RecoveryManager(engine, settings(worker_count=1)).sweep()
    assert (report.claimed, report.succeeded, report.failed, report.transient) == (3, 2, 1, 1)
    outcomes = {root: lease.outcome for root, lease in leases(engine).items()}
    assert outcomes == {roots[0]: "succeeded", roots[1]: "transient", roots[2]: "succeeded"}
    assert "live engine 'live-one'" in leases(engine)[roots[1]].message
    assert engine.owns(roots[0]) and engine.owns(roots[2]) and not engine.owns(roots[1])
    assert engine.instance(kid.id).record.owner == "live-one"  # nothing of the held tree was claimed


def test_a_backlog_drains_without_reading_the_listing_for_every_batch(
    engines: Callable[[str], Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The roots a scan did not lease are the next scans' candidates; each lease offers a bounded slice.

    The listing's in-flight rows are read again only once the leftovers
    are used up, so draining a backlog of n trees reads them about once,
    not once per batch (n^2 / batch rows in all).
    """
    roots = dead_roots(engines, 7)
    engine = engines("replica-1")
    reads = _counting_listing_reads(engine, monkeypatch)
    coordination = engine.parts.coordination
    offered: list[int] = []
    claim = coordination.claim

    def counted_claim(candidates: list[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        offered.append(len(candidates))
        return claim(candidates, holder, lease, limit)

    monkeypatch.setattr(coordination, "claim", counted_claim)
    manager = RecoveryManager(engine, settings(batch_size=2, worker_count=1, scan_interval=60.0))
    claimed = [manager.sweep().claimed for _ in range(5)]
    assert claimed == [2, 2, 2, 1, 0]
    candidates = [options for options in reads if options.get("roots")]
    assert len(candidates) == 2, "the listing was read for the first scan and once the leftovers ran out"
    assert max(offered) <= 4, "a lease offers at most twice the batch size"
    assert all(engine.owns(root) for root in roots)
    assert {lease.outcome for lease in leases(engine).values()} == {"succeeded"}


def test_a_leftover_whose_owner_came_back_to_life_is_dropped(engines: Callable[[str], Engine]) -> None:
    """A root left over from the previous scan is not leased once its owner beats again."""
    roots = dead_roots(engines, 3)
    engine = engines("replica-1")
    manager = RecoveryManager(engine, settings(batch_size=1, worker_count=1, scan_interval=60.0))
    assert manager.sweep().claimed == 1
    engine.parts.coordination.beat("dead-owner", "default", 60.0)  # back to life
    later = manager.sweep()
    assert (later.candidates, later.claimed, later.failed) == (0, 0, 0)
    assert engine.owns(roots[0]) and not engine.owns(roots[1]) and not engine.owns(roots[2])


def test_a_scan_reads_the_in_flight_roots_and_looks_for_orphans_now_and_then(
    engines: Callable[[str], Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lost roots are found among the in-flight roots alone; the children are read for orphans at most
    every tenth of the grace period (a fan-out's children outnumber its roots)."""
    dead_roots(engines, 2, chart="parent")
    engine = engines("replica-1")
    reads = _counting_listing_reads(engine, monkeypatch)
    manager = RecoveryManager(engine, settings(ttl=3600.0, orphan_grace_period=3600.0, scan_interval=0.1))
    for _ in range(3):
        assert manager.sweep().candidates == 0  # younger than the ttl: nothing to do
    assert reads == [
        {"in_flight": True, "roots": True},
        {"in_flight": True},  # the first scan also looks for orphans
        {"in_flight": True, "roots": True},
        {"in_flight": True, "roots": True},
    ]
