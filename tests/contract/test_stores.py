"""Each store adapter passes the store port's contract (``incarnate.testing.StoreContract``), and more.

PostgreSQL tests skip with a reason when no server answers, except when
``INCARNATE_REQUIRE_POSTGRES`` is set (CI), where they fail.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from incarnate import Engine, MemoryStorage, PostgresStorage, SQLiteStorage
from incarnate.store import Coordination
from incarnate.testing import StoreContract
from tests.scenarios import charts
from tests.stores import storage_for

ROOT = Path(__file__).resolve().parents[2]

_OLD_LISTING = (
    "CREATE TABLE incarnate_listing ("
    "id {uuid} PRIMARY KEY, seq bigint NOT NULL, root {uuid} NOT NULL, parent {uuid}, "
    "kind text NOT NULL, name text NOT NULL, status text NOT NULL, owner text NOT NULL, "
    "version bigint NOT NULL, has_snapshot boolean NOT NULL)"
)
_OLD_ROW = (
    "INSERT INTO incarnate_listing VALUES "
    "('{id}', 1, '{id}', NULL, 'chart', 'order', 'running', 'e', 3, {true})"
)
_OLD_HEARTBEATS = (
    'CREATE TABLE incarnate_heartbeats (engine_id text PRIMARY KEY, "group" text NOT NULL, '
    "beat_at {double} NOT NULL, expires_at {double} NOT NULL)"
)
_OLD_BEAT = "INSERT INTO incarnate_heartbeats VALUES ('old-engine', 'default', 1000.0, 1030.0)"


def _reads_old_heartbeats(open_coordination: Callable[[], Coordination]) -> None:
    """Opening coordinations (twice) over a heartbeat table without loads migrates it; its rows read on."""
    for _ in range(2):  # the second opening finds the column already there
        coordination = open_coordination()
        try:
            assert coordination.heartbeats()["old-engine"].beat_at == 1000.0
            assert "old-engine" not in coordination.loads()  # written before loads: unknown
            coordination.beat("new-engine", "default", 30.0, {"running": 1})
            assert coordination.loads() == {"new-engine": {"running": 1}}
        finally:
            coordination.close()


class TestMemoryStore(StoreContract):
    """The in-memory store: engines over one named store share it, and its inserts wake waiters."""

    notifies = True

    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[MemoryStorage]:
        """A fresh named in-memory store, forgotten afterwards."""
        with storage_for("popo", tmp_path) as storage:
            assert isinstance(storage, MemoryStorage)
            yield storage


class TestSQLiteStore(StoreContract):
    """A SQLite file: everyone leads (one host); a commit by another connection wakes a waiter."""

    notifies = True

    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[SQLiteStorage]:
        """A fresh file in the test's directory."""
        with storage_for("sqlite", tmp_path) as storage:
            assert isinstance(storage, SQLiteStorage)
            yield storage

    def test_a_listing_written_before_change_times_is_migrated(self, storage: SQLiteStorage) -> None:
        """Opening a listing table without the changed_at column adds it (idempotently); old rows read 0.0."""
        row_id = uuid.uuid4()
        with contextlib.closing(sqlite3.connect(storage.path)) as connection:
            connection.execute(_OLD_LISTING.format(uuid="TEXT"))
            connection.execute(_OLD_ROW.format(id=row_id, true=1))
            connection.commit()
        for _ in range(2):  # the second opening finds the column already there
            tables = storage.open().listing_tables()
            try:
                assert tables.load({row_id})[row_id].changed_at == 0.0
            finally:
                tables.close()

    def test_heartbeats_written_before_loads_are_migrated(self, storage: SQLiteStorage) -> None:
        """A heartbeat table without the load column gains it (idempotently); its old rows have no load."""
        with contextlib.closing(sqlite3.connect(storage.path)) as connection:
            connection.execute(_OLD_HEARTBEATS.format(double="REAL"))
            connection.execute(_OLD_BEAT)
            connection.commit()
        _reads_old_heartbeats(lambda: storage.open().coordination())


def _connect(storage: PostgresStorage) -> Any:
    """A psycopg connection (autocommit) to ``storage``'s database, in its schema."""
    import psycopg

    return psycopg.connect(
        host=storage.host,
        port=storage.port,
        dbname=storage.dbname,
        user=storage.user,
        autocommit=True,
        options=f"-c search_path={storage.schema}",
    )


class TestPostgresStore(StoreContract):
    """PostgreSQL in a fresh schema: one leader per lock id (advisory locks), LISTEN/NOTIFY wake-ups."""

    leads_alone = True
    notifies = True

    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[PostgresStorage]:
        """A fresh schema in the test database, dropped afterwards."""
        with storage_for("postgres", tmp_path) as storage:
            assert isinstance(storage, PostgresStorage)
            yield storage

    def test_a_listing_written_before_change_times_is_migrated(self, storage: PostgresStorage) -> None:
        """Opening a listing table without the changed_at column adds it (idempotently); old rows read 0.0."""
        row_id = uuid.uuid4()
        with _connect(storage) as connection:
            connection.execute(_OLD_LISTING.format(uuid="uuid").encode())
            connection.execute(_OLD_ROW.format(id=row_id, true="true").encode())
        for _ in range(2):  # the second opening finds the column already there
            tables = storage.open().listing_tables()
            try:
                assert tables.load({row_id})[row_id].changed_at == 0.0
            finally:
                tables.close()

    def test_heartbeats_written_before_loads_are_migrated(self, storage: PostgresStorage) -> None:
        """A heartbeat table without the load column gains it (idempotently); its old rows have no load."""
        with _connect(storage) as connection:
            connection.execute(_OLD_HEARTBEATS.format(double="double precision").encode())
            connection.execute(_OLD_BEAT.encode())
        _reads_old_heartbeats(lambda: storage.open().coordination())

    def test_wait_wakes_on_an_event_saved_by_another_process(self, storage: PostgresStorage) -> None:
        """An event committed by another process wakes wait() within a second (LISTEN/NOTIFY)."""
        Engine(
            charts.ALL, {"charge": lambda call: "ok"}, storage=storage
        ).close()  # tables and chart versions
        coordination: Coordination = storage.open().coordination()
        try:
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
        finally:
            coordination.close()
        assert process.returncode == 0
        assert woken_at is not None
        inserted_at = float(out.split()[0])
        assert 0.0 <= woken_at - inserted_at < 1.0

    def test_a_heartbeat_never_waits_behind_a_blocked_coordination_query(
        self, storage: PostgresStorage
    ) -> None:
        """A beat returns at once while another coordination call of the same engine waits on a row lock."""
        import psycopg

        coordination = storage.open().coordination()
        root = uuid.uuid4()
        assert coordination.claim([root], "engine-a", 30.0, 1) == [root]
        table = f"{storage.schema}.incarnate_leases"
        with psycopg.connect(
            host=storage.host, port=storage.port, dbname=storage.dbname, user=storage.user
        ) as blocker:
            blocker.execute(
                f"SELECT root FROM {table} WHERE root = %s FOR UPDATE", (root,)
            )  # in a transaction
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
