"""The SQLite store: one file (WAL mode) holding the events, the listing and the coordination tables.

Several processes on one host may share the file. The listing and the
coordination each write through a connection of their own, taking the
file's write lock at ``BEGIN IMMEDIATE``: in WAL mode a deferred
transaction that upgrades to writing can fail at once with "database is
locked" whatever the busy timeout, while an immediate one waits its turn
behind the engine's commits. Readers never block.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent

from incarnate.errors import ConfigurationError, StorageError
from incarnate.store._port import Change, Heartbeat, Lease
from incarnate.store._sql import (
    COLUMNS,
    HEARTBEAT_COLUMNS,
    HEARTBEATS_TABLE,
    IN_FLIGHT_SQL,
    LEASE_COLUMNS,
    LEASES_TABLE,
    READ_COLUMNS,
    ROWS_TABLE,
    TRACKING_NAME,
    TRACKING_TABLE,
    UPSERT_SET,
    check_outcome,
    read_position,
    read_row,
    sql_filter,
)
from projections import ListingRow

SELECT_MANY_CHUNK = 500
"""Originators one query of ``select_many`` names at most (SQLite bounds the parameters of a statement)."""

if TYPE_CHECKING:
    from incarnate._storage import Storage

PERSISTENCE_MODULE = "eventsourcing.sqlite"
LOAD_CHUNK = 500
"""How many ids one listing read asks for at most (SQLite bounds a statement's parameters)."""


class SQLiteStore:
    """A SQLite file: the library's SQLite recorder, and our tables in the same file."""

    kind = "sqlite"

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    @property
    def path(self) -> str:
        """The database file (or a ``file:`` URI)."""
        return self.storage.sqlite_path

    def describe(self) -> str:
        """``SQLite file PATH``."""
        return f"SQLite file {self.path}"

    def url(self) -> str:
        """``sqlite:///PATH``."""
        return f"sqlite:///{self.path}"

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The library's SQLite settings: the file and its lock timeout."""
        if self.path in (":memory:", ""):
            raise ConfigurationError(
                "a plain ':memory:' SQLite database is empty for every pooled connection; use "
                "Storage.popo() for memory, or 'file:NAME?mode=memory&cache=shared'"
            )
        return {
            "PERSISTENCE_MODULE": PERSISTENCE_MODULE,
            "SQLITE_DBNAME": self.path,
            "SQLITE_LOCK_TIMEOUT": str(self.storage.timeout("lock_timeout", environ)),
        }

    def check(self) -> None:
        """Nothing to reach: opening the file reports its own errors."""

    def recorder(self, construct: Callable[[], ApplicationRecorder]) -> ApplicationRecorder:
        """The library's recorder over the file."""
        return construct()

    def connect(self) -> sqlite3.Connection:
        """A connection of our own to the file, in autocommit mode (transactions are begun explicitly)."""
        timeout = float(self.storage.timeout("lock_timeout"))
        connection = sqlite3.connect(
            self.path,
            timeout=timeout,
            isolation_level=None,
            check_same_thread=False,  # each user serialises its calls with a lock
            uri=self.path.startswith("file:"),
        )
        connection.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        return connection

    def listing_tables(self) -> SQLiteListingTables:
        """The listing's two tables in the file."""
        return SQLiteListingTables(self)

    def coordination(self) -> SQLiteCoordination:
        """The heartbeat and lease tables in the file."""
        return SQLiteCoordination(self)

    def crash_inside_commit(self, recorder: ApplicationRecorder) -> str | None:
        """The library's SQLite recorder inserts in ``_insert_events``, inside the commit's transaction."""
        return "_insert_events"

    def select_many(
        self, recorder: AggregateRecorder, originator_ids: Sequence[UUID], *, latest: bool = False
    ) -> dict[UUID, list[StoredEvent]] | None:
        """The events of many originators from the recorder's table, up to 500 ids per query."""
        table = getattr(recorder, "events_table_name", None)
        datastore = getattr(recorder, "datastore", None)
        if not isinstance(table, str) or datastore is None:
            return None
        found: dict[UUID, list[StoredEvent]] = {}
        for begin in range(0, len(originator_ids), SELECT_MANY_CHUNK):
            chunk = [i.hex for i in originator_ids[begin : begin + SELECT_MANY_CHUNK]]
            where = f"FROM {table} WHERE originator_id IN ({', '.join('?' * len(chunk))})"
            statement = (
                "SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY originator_id "
                f"ORDER BY originator_version DESC) AS newest {where}) WHERE newest = 1"
                if latest
                else f"SELECT * {where} ORDER BY originator_id, originator_version"
            )
            with datastore.transaction(commit=False) as cursor:
                cursor.execute(statement, chunk)
                for row in cursor.fetchall():
                    originator = UUID(row["originator_id"])
                    found.setdefault(originator, []).append(
                        StoredEvent(originator, row["originator_version"], row["topic"], row["state"])
                    )
        return found


@contextlib.contextmanager
def _immediate(connection: sqlite3.Connection) -> Iterator[None]:
    """One write transaction that holds the file's write lock from its start."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


def _open(store: SQLiteStore, what: str, create: Callable[[sqlite3.Connection], None]) -> sqlite3.Connection:
    try:
        connection = store.connect()
        with _immediate(connection):
            create(connection)
    except sqlite3.Error as error:
        raise StorageError(
            f"could not open the {what} in {store.describe()}: {error}; check that the file is "
            "writable and not on a network filesystem"
        ) from error
    return connection


class SQLiteListingTables:
    """The listing's rows and tracking position, two tables in the file."""

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, store: SQLiteStore) -> None:
        self._connection = _open(store, "listing", _create_listing)

    def position(self) -> int:
        """The stored position."""
        found = self._connection.execute(
            f"SELECT position FROM {TRACKING_TABLE} WHERE name = ?", (TRACKING_NAME,)
        ).fetchone()
        return 0 if found is None else read_position(found[0])

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The stored rows of ``ids``."""
        keys = [str(row_id) for row_id in ids]
        found: dict[UUID, ListingRow] = {}
        for start in range(0, len(keys), LOAD_CHUNK):
            chunk = keys[start : start + LOAD_CHUNK]
            marks = ", ".join("?" * len(chunk))
            cursor = self._connection.execute(
                f"SELECT {READ_COLUMNS} FROM {ROWS_TABLE} WHERE id IN ({marks})", chunk
            )
            for values in cursor.fetchall():  # read whole: a bad row must not leave a statement open
                row = read_row(_row, values)
                found[row.id] = row
        return found

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        """Move the position and upsert the rows in one transaction, or nothing when the position moved."""
        with _immediate(self._connection):
            cursor = self._connection.execute(
                f"UPDATE {TRACKING_TABLE} SET position = ? WHERE name = ? AND position = ?",
                (position, TRACKING_NAME, expected),
            )
            if cursor.rowcount != 1:
                return False  # nothing was written; committing the empty transaction is harmless
            self._connection.executemany(
                f"INSERT INTO {ROWS_TABLE} ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))}) "
                f"ON CONFLICT (id) DO UPDATE SET {UPSERT_SET}",
                [
                    (
                        str(row.id),
                        seq,
                        str(row.root),
                        None if row.parent is None else str(row.parent),
                        row.kind,
                        row.name,
                        row.status,
                        row.owner,
                        row.version,
                        int(row.has_snapshot),
                        row.changed_at,
                    )
                    for seq, row in changes
                ],
            )
        return True

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        """The rows in insertion order, filtered."""
        where = sql_filter(in_flight=in_flight, roots=roots)
        cursor = self._connection.execute(f"SELECT {READ_COLUMNS} FROM {ROWS_TABLE}{where} ORDER BY seq")
        return [read_row(_row, values) for values in cursor.fetchall()]

    def reset(self) -> None:
        """Delete every row and move the position back to 0, in one transaction."""
        with _immediate(self._connection):
            self._connection.execute(f"DELETE FROM {ROWS_TABLE}")
            self._connection.execute(
                f"UPDATE {TRACKING_TABLE} SET position = 0 WHERE name = ?", (TRACKING_NAME,)
            )

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


def _create_listing(connection: sqlite3.Connection) -> None:
    execute = connection.execute
    execute(
        f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} ("
        "id TEXT PRIMARY KEY, seq INTEGER NOT NULL, root TEXT NOT NULL, parent TEXT, "
        "kind TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, owner TEXT NOT NULL, "
        "version INTEGER NOT NULL, has_snapshot INTEGER NOT NULL, changed_at REAL NOT NULL DEFAULT 0)"
    )
    # A listing written before rows had a change time gains the column
    # (SQLite has no ADD COLUMN IF NOT EXISTS).
    columns = {values[1] for values in execute(f"PRAGMA table_info({ROWS_TABLE})").fetchall()}
    if "changed_at" not in columns:
        execute(f"ALTER TABLE {ROWS_TABLE} ADD COLUMN changed_at REAL NOT NULL DEFAULT 0")
    execute(f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_seq ON {ROWS_TABLE} (seq)")
    execute(f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_in_flight ON {ROWS_TABLE} (seq) WHERE {IN_FLIGHT_SQL}")
    execute(f"CREATE TABLE IF NOT EXISTS {TRACKING_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)")
    execute(
        f"INSERT INTO {TRACKING_TABLE} (name, position) VALUES (?, 0) ON CONFLICT (name) DO NOTHING",
        (TRACKING_NAME,),
    )


def _row(values: Sequence[Any]) -> ListingRow:
    row_id, root, parent, kind, name, status, owner, version, has_snapshot, changed_at = values
    return ListingRow(
        id=UUID(row_id),
        root=UUID(root),
        parent=None if parent is None else UUID(parent),
        kind=kind,
        name=name,
        status=status,
        owner=owner,
        version=int(version),
        has_snapshot=bool(has_snapshot),
        changed_at=float(changed_at),
    )


def _create_coordination(connection: sqlite3.Connection) -> None:
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {HEARTBEATS_TABLE} ("
        'engine_id TEXT PRIMARY KEY, "group" TEXT NOT NULL, beat_at REAL NOT NULL, expires_at REAL NOT NULL)'
    )
    connection.execute(
        f"CREATE TABLE IF NOT EXISTS {LEASES_TABLE} ("
        "root TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at REAL NOT NULL, "
        "attempts INTEGER NOT NULL, outcome TEXT NOT NULL, message TEXT NOT NULL)"
    )


class SQLiteCoordination:
    """Heartbeats and leases in the file; the host's clock; always the leader (one host).

    SQLite has no notifications: :meth:`wait` sleeps, and the caller polls.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._connection = _open(store, "coordination tables", _create_coordination)

    def now(self) -> float:
        """The host's clock."""
        return time.time()

    @contextlib.contextmanager
    def _locked(self, doing: str) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._connection
            except sqlite3.Error as error:
                raise StorageError(
                    f"could not {doing} in {self._store.describe()}: {type(error).__name__}: {error}"
                ) from error

    def beat(self, engine_id: str, group: str, lease: float) -> Heartbeat:
        """Upsert ``engine_id``'s heartbeat."""
        now = self.now()
        beat = Heartbeat(engine_id=engine_id, group=group, beat_at=now, expires_at=now + lease)
        with self._locked("record a heartbeat") as connection:
            connection.execute(
                f"INSERT INTO {HEARTBEATS_TABLE} ({HEARTBEAT_COLUMNS}) VALUES (?, ?, ?, ?) "
                'ON CONFLICT (engine_id) DO UPDATE SET "group" = excluded."group", '
                "beat_at = excluded.beat_at, expires_at = excluded.expires_at",
                (engine_id, group, beat.beat_at, beat.expires_at),
            )
        return beat

    def retire(self, engine_id: str) -> None:
        """Mark ``engine_id``'s heartbeat retired: no lease left from now."""
        now = self.now()
        with self._locked("retire a heartbeat") as connection:
            connection.execute(
                f"UPDATE {HEARTBEATS_TABLE} SET beat_at = ?, expires_at = ? WHERE engine_id = ?",
                (now, now, engine_id),
            )

    def heartbeats(self, group: str | None = None) -> dict[str, Heartbeat]:
        """Every heartbeat row (of ``group``)."""
        query = f"SELECT {HEARTBEAT_COLUMNS} FROM {HEARTBEATS_TABLE}"
        with self._locked("read heartbeats") as connection:
            if group is None:
                rows = connection.execute(query).fetchall()
            else:
                rows = connection.execute(query + ' WHERE "group" = ?', (group,)).fetchall()
        return {row[0]: Heartbeat(row[0], row[1], float(row[2]), float(row[3])) for row in rows}

    def is_live(self, engine_id: str) -> bool:
        """Whether ``engine_id``'s heartbeat has not expired."""
        with self._locked("read a heartbeat") as connection:
            found = connection.execute(
                f"SELECT expires_at FROM {HEARTBEATS_TABLE} WHERE engine_id = ?", (engine_id,)
            ).fetchone()
        return found is not None and float(found[0]) > self.now()

    def claim(self, roots: Sequence[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        """Lease up to ``limit`` free roots to ``holder`` in one immediate transaction."""
        won: list[UUID] = []
        with self._locked("claim recovery leases") as connection, _immediate(connection):
            now = self.now()
            for root in dict.fromkeys(roots):
                if len(won) >= limit:
                    break
                found = connection.execute(
                    f"SELECT expires_at, attempts, outcome FROM {LEASES_TABLE} WHERE root = ?", (str(root),)
                ).fetchone()
                if found is not None and found[2] == "" and float(found[0]) >= now:
                    continue
                attempts = 1 if found is None else int(found[1]) + 1
                connection.execute(
                    f"INSERT INTO {LEASES_TABLE} ({LEASE_COLUMNS}) VALUES (?, ?, ?, ?, '', '') "
                    "ON CONFLICT (root) DO UPDATE SET holder = excluded.holder, "
                    "expires_at = excluded.expires_at, attempts = excluded.attempts, "
                    "outcome = '', message = ''",
                    (str(root), holder, now + lease, attempts),
                )
                won.append(root)
        return won

    def release(self, root: UUID, holder: str, *, outcome: str, message: str = "") -> bool:
        """End ``holder``'s lease on ``root``."""
        check_outcome(outcome)
        with self._locked("release a recovery lease") as connection:
            cursor = connection.execute(
                f"UPDATE {LEASES_TABLE} SET outcome = ?, message = ? "
                "WHERE root = ? AND holder = ? AND outcome = ''",
                (outcome, message, str(root), holder),
            )
            return cursor.rowcount == 1

    def leases(self) -> list[Lease]:
        """Every lease row."""
        with self._locked("read recovery leases") as connection:
            rows = connection.execute(f"SELECT {LEASE_COLUMNS} FROM {LEASES_TABLE} ORDER BY root").fetchall()
        return [Lease(UUID(r[0]), r[1], float(r[2]), int(r[3]), r[4], r[5]) for r in rows]

    def lead(self, lock_id: int, holder: str) -> bool:
        """Always: the processes sharing a SQLite file run on one host, and each may lead."""
        return True

    def resign(self, lock_id: int, holder: str) -> None:
        """Nothing to give up."""

    def wait(self, timeout: float) -> bool:
        """Sleep ``timeout`` seconds (ended early by :meth:`close`); False: SQLite never notifies."""
        self._closed.wait(timeout)
        return False

    def close(self) -> None:
        """Close the connection and end any wait."""
        self._closed.set()
        with self._lock:
            self._connection.close()
