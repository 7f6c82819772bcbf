"""The contract of Coordination: heartbeats, recovery leases, leadership and wake-ups on every store."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from incarnate import Engine, MemoryStorage, PostgresStorage, Storage
from incarnate.store import Coordination, ListingTables, Store
from tests.scenarios import charts

OpenCoordination = Callable[[], Coordination]
ROOT = Path(__file__).resolve().parents[2]
LOCK_ID = 0x1C4A_7E00_0000_0042


def test_now_is_the_store_clock_in_epoch_seconds(open_coordination: OpenCoordination) -> None:
    """The store's clock reads seconds since the epoch, close to this host's clock here."""
    assert abs(open_coordination().now() - time.time()) < 5.0


def test_a_heartbeat_is_live_until_it_expires(open_coordination: OpenCoordination) -> None:
    """An engine is live while its heartbeat has not expired, and another coordination agrees."""
    coordination, other = open_coordination(), open_coordination()
    beat = coordination.beat("engine-a", "default", 0.4)
    assert beat.expires_at - beat.beat_at == pytest.approx(0.4, abs=1e-6)
    assert (coordination.is_live("engine-a"), other.is_live("engine-a")) == (True, True)
    assert other.is_live("engine-never") is False
    time.sleep(0.6)
    assert (coordination.is_live("engine-a"), other.is_live("engine-a")) == (False, False)
    assert "engine-a" in other.heartbeats()  # a lapsed heartbeat is still listed


def test_a_beat_renews_and_a_retire_ends_at_once(open_coordination: OpenCoordination) -> None:
    """Beating again extends the lease (and may move the group); retiring ends liveness at once, marked."""
    coordination = open_coordination()
    first = coordination.beat("engine-a", "default", 30.0)
    second = coordination.beat("engine-a", "batch", 60.0)
    assert second.expires_at > first.expires_at
    assert coordination.heartbeats() == {"engine-a": second}
    assert not second.retired
    coordination.retire("engine-a")
    coordination.retire("engine-a")  # retiring twice is harmless
    assert not coordination.is_live("engine-a")
    retired = coordination.heartbeats()["engine-a"]
    assert retired.retired and retired.group == "batch" and retired.expires_at < second.expires_at
    coordination.retire("engine-b")  # an engine that never beat gets no row
    assert set(coordination.heartbeats()) == {"engine-a"}


def test_heartbeats_filter_by_group(open_coordination: OpenCoordination) -> None:
    """heartbeats(group) lists only that group's engines; without a group, every engine."""
    coordination = open_coordination()
    coordination.beat("a", "default", 30.0)
    coordination.beat("b", "batch", 30.0)
    assert set(coordination.heartbeats("batch")) == {"b"}
    assert set(coordination.heartbeats()) == {"a", "b"}


def test_claim_skips_held_leases_and_keeps_the_order_and_limit(open_coordination: OpenCoordination) -> None:
    """A claim takes free roots in the order given up to its limit, and skips roots leased to anyone."""
    first, second = open_coordination(), open_coordination()
    roots = [uuid.uuid4() for _ in range(6)]
    assert first.claim(roots[:3], "manager-a", 30.0, 10) == roots[:3]
    assert second.claim(roots, "manager-b", 30.0, 2) == roots[3:5]
    assert first.claim(roots, "manager-a", 30.0, 10) == [roots[5]]  # its own held leases are skipped too
    assert first.claim(roots, "manager-a", 30.0, 10) == []
    holders = {lease.root: lease.holder for lease in second.leases()}
    assert holders == {
        root: "manager-a" if i in (0, 1, 2, 5) else "manager-b" for i, root in enumerate(roots)
    }


def test_expired_and_released_leases_are_taken_over(open_coordination: OpenCoordination) -> None:
    """A lease past its expiry, or released with an outcome, goes to the next claimer, counting an attempt."""
    first, second = open_coordination(), open_coordination()
    expiring, released = uuid.uuid4(), uuid.uuid4()
    assert first.claim([expiring], "manager-a", 0.2, 10) == [expiring]
    assert first.claim([released], "manager-a", 30.0, 10) == [released]
    assert first.release(released, "manager-a", outcome="transient", message="conflict") is True
    assert {lease.root: lease.outcome for lease in second.leases()}[released] == "transient"
    time.sleep(0.4)
    assert second.claim([expiring, released], "manager-b", 30.0, 10) == [expiring, released]
    leases = {lease.root: lease for lease in first.leases()}
    assert {(lease.holder, lease.attempts, lease.outcome, lease.message) for lease in leases.values()} == {
        ("manager-b", 2, "", "")
    }


def test_release_by_another_holder_changes_nothing(open_coordination: OpenCoordination) -> None:
    """Releasing a lease one does not hold (or no longer holds) returns False and leaves it held."""
    coordination = open_coordination()
    root = uuid.uuid4()
    assert coordination.release(root, "manager-a", outcome="succeeded") is False  # never leased
    coordination.claim([root], "manager-a", 30.0, 1)
    assert coordination.release(root, "manager-b", outcome="succeeded") is False
    assert coordination.release(root, "manager-a", outcome="failed", message="parked") is True
    assert coordination.release(root, "manager-a", outcome="succeeded") is False  # already released
    (lease,) = coordination.leases()
    assert (lease.holder, lease.outcome, lease.message) == ("manager-a", "failed", "parked")


def test_release_refuses_an_unknown_outcome(open_coordination: OpenCoordination) -> None:
    """An outcome outside succeeded/transient/failed/orphan/error is a ValueError naming them."""
    coordination = open_coordination()
    root = uuid.uuid4()
    coordination.claim([root], "manager-a", 30.0, 1)
    with pytest.raises(ValueError, match="succeeded, transient, failed, orphan, error"):
        coordination.release(root, "manager-a", outcome="")


def test_concurrent_claims_never_lease_one_root_twice(open_coordination: OpenCoordination) -> None:
    """Two threads claiming the same roots at once, each through its own coordination, never both win one."""
    roots = [uuid.uuid4() for _ in range(40)]
    coordinations = [open_coordination(), open_coordination()]
    won: dict[str, list[uuid.UUID]] = {"a": [], "b": []}
    errors: list[BaseException] = []
    start = threading.Barrier(2, timeout=10)

    def claim(name: str, coordination: Coordination) -> None:
        try:
            start.wait()
            for offset in range(0, len(roots), 4):
                won[name].extend(coordination.claim(roots[offset:] + roots[:offset], name, 30.0, 3))
        except Exception as error:  # noqa: BLE001 -- reported below, not lost in the thread
            errors.append(error)

    threads = [
        threading.Thread(target=claim, args=(name, c)) for name, c in zip(won, coordinations, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert errors == []
    assert not any(thread.is_alive() for thread in threads)
    assert set(won["a"]).isdisjoint(won["b"])
    assert len(won["a"]) + len(won["b"]) == len(set(won["a"]) | set(won["b"]))
    assert len(won["a"]) + len(won["b"]) == len(roots)  # 2 x 10 claims of 3 cover all 40 roots
    holders = {lease.root: lease.holder for lease in coordinations[0].leases()}
    assert holders == {**dict.fromkeys(won["a"], "a"), **dict.fromkeys(won["b"], "b")}


def test_leadership(storage: Storage, open_coordination: OpenCoordination) -> None:
    """PostgreSQL: one leader per lock id until it resigns or closes; SQLite and memory: everyone leads."""
    first, second = open_coordination(), open_coordination()
    assert first.lead(LOCK_ID, "engine-a") is True
    assert first.lead(LOCK_ID, "engine-a") is True  # staying leader
    if not isinstance(storage, PostgresStorage):
        assert second.lead(LOCK_ID, "engine-b") is True
        return
    assert second.lead(LOCK_ID, "engine-b") is False
    assert second.lead(LOCK_ID + 1, "engine-b") is True  # another lock id is independent
    first.resign(LOCK_ID, "engine-a")
    assert second.lead(LOCK_ID, "engine-b") is True
    assert first.lead(LOCK_ID, "engine-a") is False
    second.close()
    assert first.lead(LOCK_ID, "engine-a") is True


def test_wait_times_out_without_new_events(open_coordination: OpenCoordination) -> None:
    """With nothing committed, wait() returns False once its timeout has passed."""
    coordination = open_coordination()
    coordination.wait(0.0)  # starts listening where the store notifies
    started = time.monotonic()
    assert coordination.wait(0.3) is False
    assert 0.25 <= time.monotonic() - started < 3.0


_INSERT_FROM_ANOTHER_PROCESS = """
import sys, time
from incarnate import Engine, Storage
from tests.scenarios import charts
engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.from_url(sys.argv[1]))
time.sleep(0.5)
print(time.time(), flush=True)
engine.start("gate")
engine.close()
"""


def test_wait_wakes_on_an_event_saved_by_another_process(
    storage: Storage, open_coordination: OpenCoordination
) -> None:
    """PostgreSQL: an event committed by another process wakes wait() within a second (LISTEN/NOTIFY)."""
    if not isinstance(storage, PostgresStorage):
        pytest.skip("only PostgreSQL notifies; SQLite is polled, and memory lives in one process")
    Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage).close()  # tables and chart versions
    coordination = open_coordination()
    while coordination.wait(0.05):  # listening from here on; earlier inserts drained
        pass
    process = subprocess.Popen(
        [sys.executable, "-c", _INSERT_FROM_ANOTHER_PROCESS, storage.url()],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        woken_at = None
        deadline = time.monotonic() + 30
        while woken_at is None and time.monotonic() < deadline:
            if coordination.wait(1.0):
                woken_at = time.time()
        out, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait(timeout=10)
    assert process.returncode == 0
    assert woken_at is not None
    inserted_at = float(out.split()[0])
    assert 0.0 <= woken_at - inserted_at < 1.0


def test_wait_wakes_on_an_insert_into_a_shared_memory_store(
    storage: Storage, open_coordination: OpenCoordination
) -> None:
    """Memory: an insert by another engine over the same named store wakes wait() at once."""
    if not isinstance(storage, MemoryStorage):
        pytest.skip("covered per store by the tests above")
    coordination = open_coordination()
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage)
    try:
        assert coordination.wait(0.0) is True  # the chart versions it recorded
        waker = threading.Timer(0.2, lambda: engine.start("gate"))
        started = time.monotonic()
        waker.start()
        assert coordination.wait(5.0) is True
        assert time.monotonic() - started < 1.0
        waker.join(timeout=10)
    finally:
        engine.close()


def test_many_engines_may_create_the_tables_at_once(store: Store) -> None:
    """Opening the coordination and listing tables from four threads at once over a new store succeeds."""
    errors: list[Exception] = []
    opened: list[Coordination | ListingTables] = []
    start = threading.Barrier(4, timeout=10)

    def open_both() -> None:
        try:
            start.wait()
            opened.append(store.coordination())
            opened.append(store.listing_tables())
        except Exception as error:  # noqa: BLE001 -- reported below, not lost in the thread
            errors.append(error)

    threads = [threading.Thread(target=open_both) for _ in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert errors == []
        assert len(opened) == 8
    finally:
        for item in opened:
            item.close()


def test_a_heartbeat_never_waits_behind_a_blocked_coordination_query(storage: Storage) -> None:
    """A beat returns at once while another coordination call of the same engine waits on a row lock."""
    if not isinstance(storage, PostgresStorage):
        pytest.skip("only PostgreSQL has row locks another session can hold")
    import psycopg

    coordination = storage.open().coordination()
    root = uuid.uuid4()
    assert coordination.claim([root], "engine-a", 30.0, 1) == [root]
    table = f"{storage.schema}.incarnate_leases"
    with psycopg.connect(
        host=storage.host,
        port=storage.port,
        dbname=storage.dbname,
        user=storage.user,
    ) as blocker:
        blocker.execute(f"SELECT root FROM {table} WHERE root = %s FOR UPDATE", (root,))  # in a transaction
        releasing = threading.Thread(
            target=lambda: coordination.release(root, "engine-a", outcome="succeeded"), daemon=True
        )
        releasing.start()
        time.sleep(0.5)  # the release now waits for the row, holding the engine's coordination queries
        assert releasing.is_alive()
        began = time.monotonic()
        coordination.beat("engine-a", "default", 10.0)
        waited = time.monotonic() - began
        blocker.rollback()
    releasing.join(timeout=15)
    coordination.close()
    assert waited < 2.0, f"the heartbeat waited {waited:.1f}s behind another query"
