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
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import ClassVar
from uuid import UUID

import attrs
from eventsourcing.persistence import AggregateRecorder, ApplicationRecorder, StoredEvent

from aggregates import uuid_of
from incarnate._limits import MAX_PAYLOAD_VARIABLE
from incarnate._storage import DEFAULT_SQLITE_PATH, Storage, accepted_forms, optional_setting
from incarnate.errors import ConfigurationError, StorageError
from incarnate.store._port import Heartbeat, Load
from incarnate.store._sql import (
    HEARTBEAT_COLUMNS,
    HEARTBEAT_UPSERT,
    HEARTBEATS_TABLE,
    LEASE_COLUMNS,
    LEASES_TABLE,
    LOAD_COLUMN,
    ROWS_TABLE,
    Connection,
    Dialect,
    Parameters,
    SQLCoordination,
    SQLListingTables,
    Types,
    encode_load,
)

SELECT_MANY_CHUNK = 500
"""Originators one query of ``select_many`` names at most (SQLite bounds the parameters of a statement)."""

PERSISTENCE_MODULE = "eventsourcing.sqlite"
LOAD_CHUNK = 500
"""How many ids one listing read asks for at most (SQLite bounds a statement's parameters)."""
DEFAULT_LOCK_TIMEOUT = 30
"""Seconds a SQLite writer waits for the database lock."""


@attrs.frozen
class SQLiteStorage(Storage):
    """A SQLite file (WAL mode): the embedded default; several processes on one host may share it.

    ``path`` is a file path or a ``file:`` URI (``file:NAME?mode=memory&cache=shared``).
    """

    schemes: ClassVar[tuple[str, ...]] = ("sqlite",)
    modules: ClassVar[tuple[str, ...]] = (PERSISTENCE_MODULE, "sqlite")
    url_form: ClassVar[str] = "a SQLite file path (or sqlite:///PATH)"
    timeouts: ClassVar[Mapping[str, tuple[str, int]]] = {
        "lock_timeout": ("SQLITE_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT),
    }

    path: str = DEFAULT_SQLITE_PATH
    lock_timeout: int | None = attrs.field(default=None, kw_only=True)
    """Seconds a writer waits for the file's lock (``SQLITE_LOCK_TIMEOUT``, default 30)."""

    @classmethod
    def parse_url(cls, text: str) -> SQLiteStorage:
        """A bare path, or ``sqlite:///PATH`` (``sqlite:////abs/path.db`` for an absolute path)."""
        if "://" not in text:
            return cls(text)
        path = text[len("sqlite:///") :] if text.lower().startswith("sqlite:///") else ""
        if not path:
            raise ConfigurationError(
                f"store URL {text!r} names no file: write sqlite:///relative.db or "
                f"sqlite:////absolute/path.db; accepted: {accepted_forms()}"
            )
        return cls(path)

    @classmethod
    def parse_env(cls, env: Mapping[str, str]) -> SQLiteStorage:
        """``SQLITE_DBNAME`` (default ``./incarnate.db``) and ``SQLITE_LOCK_TIMEOUT``."""
        return cls(
            env.get("SQLITE_DBNAME", DEFAULT_SQLITE_PATH),
            max_payload_bytes=optional_setting(env, MAX_PAYLOAD_VARIABLE),
            lock_timeout=optional_setting(env, "SQLITE_LOCK_TIMEOUT"),
        )

    def open(self) -> SQLiteStore:
        """The SQLite adapter."""
        return SQLiteStore(self)

    def describe(self) -> str:
        """``SQLite file PATH``."""
        return f"SQLite file {self.path}"

    def url(self) -> str:
        """``sqlite:///PATH``."""
        return f"sqlite:///{self.path}"

    def missing(self, named_by: str) -> str | None:
        """A file path that names no file (a ``file:`` URI may name a store in memory: never missing)."""
        if self.path.startswith("file:") or Path(self.path).is_file():
            return None
        return (
            f"no store at {self.path!r} (named by {named_by}); pass --db PATH naming the SQLite file "
            "an engine wrote"
        )


class SQLiteStore:
    """A SQLite file: the library's SQLite recorder, and our tables in the same file."""

    kind = "sqlite"

    def __init__(self, storage: SQLiteStorage) -> None:
        self.storage = storage

    @property
    def path(self) -> str:
        """The database file (or a ``file:`` URI)."""
        return self.storage.path

    def describe(self) -> str:
        """``SQLite file PATH``."""
        return self.storage.describe()

    def url(self) -> str:
        """``sqlite:///PATH``."""
        return self.storage.url()

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
        """The library's recorder over the file, reading ids back through :func:`~aggregates.uuid_of`.

        The library parses the id of every record and notification it reads
        with ``UUID(text)``; a tree's ids recur in every one of them.
        """
        recorder = construct()
        uuids = getattr(getattr(recorder, "datastore", None), "originator_id_type", None) == "uuid"
        if uuids and hasattr(recorder, "convert_originator_id"):
            recorder.convert_originator_id = uuid_of
        return recorder

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
                    originator = uuid_of(row["originator_id"])
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


def _add_column(connection: Connection, table: str, column: str, definition: str) -> None:
    """Add ``column`` to ``table`` when it lacks it (SQLite has no ADD COLUMN IF NOT EXISTS)."""
    columns = {values[1] for values in connection.execute(f"PRAGMA table_info({table})", {}).fetchall()}
    if column not in columns:
        connection.execute(f'ALTER TABLE {table} ADD COLUMN "{column}" {definition}', {})


def _open(store: SQLiteStore, what: str, create: Callable[[Connection], None]) -> sqlite3.Connection:
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


class _SQLite(Dialect):
    """SQLite's spelling: ``:name`` parameters, our tables by their plain names, ids as text."""

    types = Types(
        uuid="TEXT", text="TEXT", bigint="INTEGER", integer="INTEGER", boolean="INTEGER", double="REAL"
    )

    def mark(self, name: str) -> str:
        """``:name``."""
        return f":{name}"

    def table(self, name: str) -> str:
        """The table's plain name."""
        return name

    def encode_id(self, value: UUID) -> object:
        """Ids are stored as text."""
        return str(value)


class SQLiteListingTables(_SQLite, SQLListingTables):
    """The listing's rows and tracking position, two tables in the file."""

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__()
        self._connection = _open(store, "listing", self.create)

    def connection(self) -> sqlite3.Connection:
        """The listing's own connection."""
        return self._connection

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """An immediate transaction: it waits its turn for the write lock instead of failing."""
        return _immediate(self._connection)

    def insert_many(self, statement: str, rows: Sequence[Parameters]) -> None:
        """``executemany``."""
        self._connection.executemany(statement, rows)

    def where_ids(self, ids: Sequence[UUID], column: str = "id") -> Iterator[tuple[str, Parameters]]:
        """``column IN (…)``, up to 500 ids per statement."""
        for start in range(0, len(ids), LOAD_CHUNK):
            chunk = {f"id{n}": str(row_id) for n, row_id in enumerate(ids[start : start + LOAD_CHUNK])}
            yield f"{column} IN ({', '.join(self.mark(name) for name in chunk)})", chunk

    def add_changed_at(self, connection: Connection) -> None:
        """Add the column when the table lacks it (SQLite has no ADD COLUMN IF NOT EXISTS)."""
        _add_column(connection, ROWS_TABLE, "changed_at", "REAL NOT NULL DEFAULT 0")

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


WAKE_CHECK = 0.01
"""Seconds between two looks at the file's ``data_version`` while :meth:`SQLiteCoordination.wait` waits."""


class SQLiteCoordination(_SQLite, SQLCoordination):
    """Heartbeats and leases in the file; the host's clock; always the leader (one host).

    SQLite has no notifications; :meth:`wait` reads the file's
    ``PRAGMA data_version`` (changed by every commit of another connection,
    read from the shared memory index: no disk access) every
    :data:`WAKE_CHECK` seconds instead, so a commit by another process wakes
    a waiting worker within about 10 ms.
    """

    errors: tuple[type[Exception], ...] = (sqlite3.Error,)

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store.describe())
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._connection = _open(store, "coordination tables", self.create)
        self._seen_version: int | None = None
        """The file's ``data_version`` when :meth:`wait` last looked (None before the first wait)."""
        self._beat = (
            f"INSERT INTO {HEARTBEATS_TABLE} ({HEARTBEAT_COLUMNS}, {LOAD_COLUMN}) "
            f"VALUES (:engine_id, :group, :beat_at, :expires_at, :load) {HEARTBEAT_UPSERT}"
        )
        self._retire = (
            f"UPDATE {HEARTBEATS_TABLE} SET beat_at = :now, expires_at = :now WHERE engine_id = :engine_id"
        )

    def add_load(self, connection: Connection) -> None:
        """Add the column when the table lacks it."""
        _add_column(connection, HEARTBEATS_TABLE, "load", "TEXT")

    def clock(self) -> str:
        """The ``now`` parameter, from the host's clock."""
        return ":now"

    def clock_parameters(self) -> Parameters:
        """The host's clock."""
        return {"now": self.now()}

    @contextlib.contextmanager
    def session(self) -> Iterator[sqlite3.Connection]:
        """The coordination's connection, under its lock."""
        with self._lock:
            yield self._connection

    def now(self) -> float:
        """The host's clock."""
        return time.time()

    def beat(self, engine_id: str, group: str, lease: float, load: Load | None = None) -> Heartbeat:
        """Upsert ``engine_id``'s heartbeat and its load."""
        text = encode_load(engine_id, load)
        now = self.now()
        beat = Heartbeat(engine_id=engine_id, group=group, beat_at=now, expires_at=now + lease)
        with self.query("record a heartbeat") as connection:
            connection.execute(
                self._beat,
                {
                    "engine_id": engine_id,
                    "group": group,
                    "beat_at": beat.beat_at,
                    "expires_at": beat.expires_at,
                    "load": text,
                },
            )
        return beat

    def retire(self, engine_id: str) -> None:
        """Mark ``engine_id``'s heartbeat retired: no lease left from now."""
        with self.query("retire a heartbeat") as connection:
            connection.execute(self._retire, {"engine_id": engine_id, **self.clock_parameters()})

    def release_rows(self, connection: Connection, statement: str, rows: Sequence[Parameters]) -> int:
        """One immediate transaction."""
        assert isinstance(connection, sqlite3.Connection)
        with _immediate(connection):
            return sum(connection.execute(statement, row).rowcount for row in rows)

    def claim(self, roots: Sequence[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        """Lease up to ``limit`` free roots to ``holder`` in one immediate transaction."""
        won: list[UUID] = []
        with self.query("claim recovery leases"), _immediate(self._connection):
            connection = self._connection
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

    def lead(self, lock_id: int, holder: str) -> bool:
        """Always: the processes sharing a SQLite file run on one host, and each may lead."""
        return True

    def resign(self, lock_id: int, holder: str) -> None:
        """Nothing to give up."""

    def leaders(self) -> dict[str, frozenset[int]] | None:
        """None: no lock is held, every engine leads."""
        return None

    def wait(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for a commit by another connection; True when one came.

        A commit since the previous call counts (True at once), as a
        notification queued between two waits does on PostgreSQL; the first
        call starts looking from now. :meth:`close` ends a wait (False).
        """
        deadline = time.monotonic() + timeout
        while True:
            version = self._data_version()
            if version is None:
                return False  # closed
            if self._seen_version is not None and version != self._seen_version:
                self._seen_version = version
                return True
            self._seen_version = version
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._closed.wait(min(WAKE_CHECK, remaining)):
                return False

    def _data_version(self) -> int | None:
        """The file's ``PRAGMA data_version`` on this connection; None once closed."""
        with self._lock:
            if self._closed.is_set():
                return None
            try:
                found = self._connection.execute("PRAGMA data_version").fetchone()
            except sqlite3.Error as error:
                raise StorageError(
                    f"could not look for commits by other processes in {self.where}: "
                    f"{type(error).__name__}: {error}"
                ) from error
        return int(found[0])

    def close(self) -> None:
        """Close the connection and end any wait."""
        self._closed.set()
        with self._lock:
            self._connection.close()
