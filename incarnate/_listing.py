"""The recovery listing, kept durably next to the events it is folded from.

:class:`Listing` follows an engine's notification log and folds each
stored event into one row per instance (see :mod:`projections._listing`).
Rows and the tracking position live in the engine's own database — an
in-memory table for POPO, two tables for SQLite and PostgreSQL
(``incarnate_listing`` and ``incarnate_listing_tracking``, created
idempotently) — and every batch writes its changed rows and its new
position in one transaction, so a crash between batches neither skips nor
repeats a notification.

The listing is a view that may lag the log: it shows what had been folded
at its last :meth:`Listing.catch_up`. It decides nothing. Whoever resumes,
claims or resolves an instance it lists reloads the aggregate and decides
on that.

Corruption never stops it: a stored event that does not decode is folded
from its position alone (see :func:`projections._listing.apply_undecodable`),
and a stored row or position that does not read makes the listing rebuild
itself from the log, each with a logged warning.
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import json
import logging
import sqlite3
import threading
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

from eventsourcing.persistence import Notification, PersistenceError
from eventsourcing.utils import TopicError, resolve_topic

from aggregates.errors import DecodeError
from incarnate.errors import EngineError, StorageError
from projections._listing import (
    INSTANCE_TOPIC_PREFIX,
    ListingRow,
    apply_notification,
    apply_undecodable,
    needs_state,
    select_rows,
)

if TYPE_CHECKING:
    import psycopg

    from incarnate._engine import Engine

log = logging.getLogger("incarnate.listing")
_T = TypeVar("_T")

BATCH_SIZE = 500
"""How many notifications one catch-up transaction folds at most."""

ROWS_TABLE = "incarnate_listing"
TRACKING_TABLE = "incarnate_listing_tracking"
TRACKING_NAME = "listing"
"""The listing's key in the tracking table."""

SQLITE_BUSY_TIMEOUT = 30.0
"""Seconds a SQLite statement waits for another connection's write lock (the engine's too)."""

_IN_FLIGHT_SQL = "status IN ('born', 'running', 'parked')"
# Written identically in the partial index and the queries, so both stores use the index.
_COLUMNS = ("id", "seq", "root", "parent", "kind", "name", "status", "owner", "version", "has_snapshot")
_READ_COLUMNS = ", ".join(c for c in _COLUMNS if c != "seq")

Change = tuple[int, ListingRow]
"""A row to write, with its insertion sequence (used only when the row is new)."""


class _UnreadableRow(Exception):
    """A stored listing row (or the position) does not read back; the listing rebuilds itself."""

    def __init__(self, key: object, error: Exception) -> None:
        super().__init__(f"listing row {key}: {type(error).__name__}: {error}")


class Listing:
    """The in-flight listing of an engine's store, folded from its notification log.

    :meth:`catch_up` reads the notifications after the stored position, in
    batches of :data:`BATCH_SIZE`, and writes each batch's changed rows with
    its new position in one transaction. Two listings over one store (two
    engines, or two processes) may catch up at once: a batch commits only
    if the position is still the one it started from, so each notification
    is applied exactly once; the loser re-reads and continues.

    The listing lags the log until the next catch-up, and a row's status is
    only as fresh as that. Nothing here makes a recovery decision: the
    engine and the command line use it to find candidates, then load each
    instance's aggregate and decide on what it says.

    The position is a notification id, so the listing relies on ids becoming
    visible in order. The library's SQLite and PostgreSQL recorders commit
    under a table lock and keep this; PostgreSQL's
    ``POSTGRES_ENABLE_DB_FUNCTIONS`` does not, and must stay off.

    Thread-safe: one lock serialises every call on a listing.
    """

    def __init__(self, engine: Engine, *, batch_size: int = BATCH_SIZE) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.engine = engine
        self.batch_size = batch_size
        self._lock = threading.Lock()
        self._closed = False
        self._backend = _open_backend(engine)

    # ---------------------------------------------------------- catching up

    def catch_up(self, limit: int | None = None) -> int:
        """Fold the notifications after the stored position; returns how many were processed.

        With ``limit``, at most that many are processed. Each batch commits
        on its own, so an error leaves every earlier batch applied and the
        failed one not at all.
        """
        if limit is not None and limit < 0:
            raise ValueError(f"limit must not be negative, got {limit}")
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._catch_up(limit))

    def _catch_up(self, limit: int | None) -> int:
        processed = 0
        while limit is None or processed < limit:
            size = self.batch_size if limit is None else min(self.batch_size, limit - processed)
            done = self._fold_batch(size)
            if done is None:
                continue  # another listing moved the position first: start again from it
            processed += done
            if done < size:
                break
        return processed

    def _readable(self, read: Callable[[], _T]) -> _T:
        """``read()``; if a stored row does not read back, rebuild the listing from the log and retry once."""
        try:
            return read()
        except _UnreadableRow as error:
            log.warning(
                "%s in %s does not read; rebuilding the listing from the event log",
                error,
                self.engine.storage.describe(),
            )
        with self._storage_errors("reset the listing"):
            self._backend.reset()
        try:
            self._catch_up(None)
            return read()
        except _UnreadableRow as error:
            raise StorageError(
                f"the listing in {self.engine.storage.describe()} does not read back after a rebuild: "
                f"{error}; check the database"
            ) from error

    def _fold_batch(self, size: int) -> int | None:
        """Fold and write one batch; its size, or None when another writer advanced first."""
        backend = self._backend
        with self._storage_errors("read the listing position"):
            position = backend.position()
        notifications = self._notifications(position + 1, size)
        if not notifications:
            return 0
        originators = [_originator(n) for n in notifications]
        with self._storage_errors("read listing rows"):
            before = backend.load(set(originators))
        rows = dict(before)
        first_seen: dict[UUID, int] = {}
        for notification, originator in zip(notifications, originators, strict=True):
            self._fold(rows, notification, originator)
            if originator not in before and originator in rows:
                first_seen.setdefault(originator, notification.id)
        changes = sorted(
            ((first_seen.get(row_id, 0), row) for row_id, row in rows.items() if before.get(row_id) != row),
            key=lambda change: change[0],
        )
        with self._storage_errors("write listing rows"):
            advanced = backend.write(changes, position, notifications[-1].id)
        return len(notifications) if advanced else None

    def _fold(self, rows: dict[UUID, ListingRow], notification: Notification, originator: UUID) -> None:
        topic = notification.topic
        version = notification.originator_version
        try:
            if not topic.startswith(INSTANCE_TOPIC_PREFIX):
                resolve_topic(topic)  # another aggregate's event (ignored), or an unreadable topic
            state = self._decode(notification, originator) if needs_state(topic) else {}
            apply_notification(rows, topic, originator, version, state)
        except (DecodeError, TopicError) as error:
            log.warning(
                "listing: stored event %s of %s at version %s does not decode (%s: %s); "
                "listed from its position only, recovery will park its call tree",
                topic,
                originator,
                version,
                type(error).__name__,
                error,
            )
            apply_undecodable(rows, originator, version)

    def _notifications(self, start: int, limit: int) -> Sequence[Notification]:
        try:
            return self.engine.recorder.select_notifications(start=start, limit=limit)
        except PersistenceError as error:
            raise StorageError(f"could not read notifications from {start}: {error}") from error

    def _decode(self, notification: Notification, originator: UUID) -> dict[str, Any]:
        mapper = self.engine.mapper
        state = notification.state
        try:
            if mapper.cipher:
                state = mapper.cipher.decrypt(state)
            if mapper.compressor:
                state = mapper.compressor.decompress(state)
            data = json.loads(state)
        except ValueError as error:
            raise DecodeError(
                notification.topic, originator, notification.originator_version, str(error)
            ) from error
        if not isinstance(data, dict):
            raise DecodeError(
                notification.topic,
                originator,
                notification.originator_version,
                f"expected a JSON object, got {type(data).__name__}",
            )
        return data

    # ------------------------------------------------------------- queries

    def position(self) -> int:
        """The id of the last notification folded (0 before any)."""
        with self._lock:
            self._require_open()
            return self._readable(self._position)

    def _position(self) -> int:
        with self._storage_errors("read the listing position"):
            return self._backend.position()

    def rows(self, *, in_flight: bool = False, roots: bool = False) -> list[ListingRow]:
        """The listed instances in order of first appearance, only unfinished ones and/or roots if asked."""
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._select(in_flight=in_flight, roots=roots))

    def _select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        with self._storage_errors("read listing rows"):
            return self._backend.select(in_flight=in_flight, roots=roots)

    def get(self, instance_id: UUID) -> ListingRow | None:
        """The row of one instance; None when it is not listed (yet)."""
        with self._lock:
            self._require_open()
            return self._readable(lambda: self._get(instance_id))

    def _get(self, instance_id: UUID) -> ListingRow | None:
        with self._storage_errors("read a listing row"):
            return self._backend.load({instance_id}).get(instance_id)

    # ----------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Release the listing's connection (the engine stays open)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with self._storage_errors("close the listing"):
                self._backend.close()

    def __enter__(self) -> Listing:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_open(self) -> None:
        if self._closed:
            raise EngineError("this listing is closed; create a new Listing(engine)")

    @contextlib.contextmanager
    def _storage_errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except self._backend.errors as error:
            raise StorageError(
                f"could not {doing} in {self.engine.storage.describe()}: {type(error).__name__}: {error}"
            ) from error


def _originator(notification: Notification) -> UUID:
    originator = notification.originator_id
    return originator if isinstance(originator, UUID) else UUID(str(originator))


# -------------------------------------------------------------------- backends


class _Backend(abc.ABC):
    """Where one store keeps the listing's rows and position."""

    errors: tuple[type[Exception], ...] = ()
    """The database's errors, which the listing wraps in StorageError."""

    @abc.abstractmethod
    def position(self) -> int:
        """The stored position."""

    @abc.abstractmethod
    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The stored rows of ``ids`` (absent ones left out)."""

    @abc.abstractmethod
    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        """Move the position from ``expected`` to ``position`` and upsert ``changes``, atomically.

        False, writing nothing, when the position is no longer ``expected``.
        """

    @abc.abstractmethod
    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        """The stored rows in insertion order, filtered."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Delete every row and move the position back to 0, atomically (the listing is then rebuilt)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release resources."""


def _open_backend(engine: Engine) -> _Backend:
    kind = engine.storage.kind
    if kind == "popo":
        return _MemoryBackend(engine)
    if kind == "sqlite":
        return _SQLiteBackend(engine.storage.sqlite_path)
    if kind == "postgres":
        return _PostgresBackend(engine)
    raise EngineError(f"storage kind {kind!r} has no listing backend (use popo, sqlite or postgres)")


class _MemoryTable:
    """The listing of one in-memory store."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rows: dict[UUID, Change] = {}
        self.position = 0


_MEMORY_TABLES: weakref.WeakKeyDictionary[object, _MemoryTable] = weakref.WeakKeyDictionary()
_MEMORY_TABLES_LOCK = threading.Lock()


class _MemoryBackend(_Backend):
    """POPO: a table per in-memory store.

    It is keyed by the store's recorder, which engines over one named store
    share, so they share the listing too; it goes when the store does.
    """

    def __init__(self, engine: Engine) -> None:
        with _MEMORY_TABLES_LOCK:
            table = _MEMORY_TABLES.get(engine.recorder)
            if table is None:
                table = _MEMORY_TABLES[engine.recorder] = _MemoryTable()
        self._table = table

    def position(self) -> int:
        with self._table.lock:
            return self._table.position

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        with self._table.lock:
            found = (self._table.rows.get(row_id) for row_id in ids)
            return {entry[1].id: entry[1] for entry in found if entry is not None}

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        table = self._table
        with table.lock:
            if table.position != expected:
                return False
            entries = self._upsert(table.rows, changes)
            # Nothing is changed until both parts are known, as a transaction would.
            table.rows.update(entries)
            table.position = position
            return True

    @staticmethod
    def _upsert(rows: dict[UUID, Change], changes: Sequence[Change]) -> dict[UUID, Change]:
        entries: dict[UUID, Change] = {}
        for seq, row in changes:
            existing = rows.get(row.id)
            entries[row.id] = (seq if existing is None else existing[0], row)
        return entries

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        with self._table.lock:
            ordered = sorted(self._table.rows.values(), key=lambda entry: entry[0])
        return select_rows((row for _, row in ordered), in_flight=in_flight, roots=roots)

    def reset(self) -> None:
        with self._table.lock:
            self._table.rows.clear()
            self._table.position = 0

    def close(self) -> None:
        pass


def _read_row(read: Callable[[Sequence[Any]], ListingRow], values: Sequence[Any]) -> ListingRow:
    """A stored row as a ListingRow; :class:`_UnreadableRow` when it does not read back."""
    try:
        return read(values)
    except (ValueError, TypeError, AttributeError) as error:
        raise _UnreadableRow(values[0] if values else "?", error) from error


def _position(value: object) -> int:
    try:
        return int(str(value))
    except (ValueError, TypeError) as error:
        raise _UnreadableRow("position", error) from error


def _sql_filter(*, in_flight: bool, roots: bool) -> str:
    conditions = [_IN_FLIGHT_SQL] if in_flight else []
    if roots:
        conditions.append("parent IS NULL")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


class _SQLiteBackend(_Backend):
    """SQLite: two tables in the engine's file, written through a connection of our own.

    Writes take the file's write lock at ``BEGIN IMMEDIATE``: in WAL mode a
    deferred transaction that upgrades to writing can fail at once with
    "database is locked" whatever the busy timeout, while an immediate one
    waits its turn behind the engine's commits. Readers never block.
    """

    errors = (sqlite3.Error,)

    def __init__(self, path: str) -> None:
        try:
            self._connection = sqlite3.connect(
                path,
                timeout=SQLITE_BUSY_TIMEOUT,
                isolation_level=None,  # transactions are begun explicitly
                check_same_thread=False,  # the listing's lock serialises use
                uri=path.startswith("file:"),
            )
            self._connection.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT * 1000)}")
            with self._transaction():
                self._create_tables()
        except sqlite3.Error as error:
            raise StorageError(f"could not open the listing in SQLite file {path}: {error}") from error

    def _create_tables(self) -> None:
        execute = self._connection.execute
        execute(
            f"CREATE TABLE IF NOT EXISTS {ROWS_TABLE} ("
            "id TEXT PRIMARY KEY, seq INTEGER NOT NULL, root TEXT NOT NULL, parent TEXT, "
            "kind TEXT NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, owner TEXT NOT NULL, "
            "version INTEGER NOT NULL, has_snapshot INTEGER NOT NULL)"
        )
        execute(f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_seq ON {ROWS_TABLE} (seq)")
        execute(
            f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_in_flight ON {ROWS_TABLE} (seq) WHERE {_IN_FLIGHT_SQL}"
        )
        execute(
            f"CREATE TABLE IF NOT EXISTS {TRACKING_TABLE} (name TEXT PRIMARY KEY, position INTEGER NOT NULL)"
        )
        execute(
            f"INSERT INTO {TRACKING_TABLE} (name, position) VALUES (?, 0) ON CONFLICT (name) DO NOTHING",
            (TRACKING_NAME,),
        )

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        connection = self._connection
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    def position(self) -> int:
        found = self._connection.execute(
            f"SELECT position FROM {TRACKING_TABLE} WHERE name = ?", (TRACKING_NAME,)
        ).fetchone()
        return 0 if found is None else _position(found[0])

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        keys = [str(row_id) for row_id in ids]
        found: dict[UUID, ListingRow] = {}
        for start in range(0, len(keys), BATCH_SIZE):
            chunk = keys[start : start + BATCH_SIZE]
            marks = ", ".join("?" * len(chunk))
            cursor = self._connection.execute(
                f"SELECT {_READ_COLUMNS} FROM {ROWS_TABLE} WHERE id IN ({marks})", chunk
            )
            for values in cursor.fetchall():  # read whole: a bad row must not leave a statement open
                row = _read_row(self._row, values)
                found[row.id] = row
        return found

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        with self._transaction():
            if not self._advance(expected, position):
                return False  # nothing was written; committing the empty transaction is harmless
            self._upsert(changes)
        return True

    def _advance(self, expected: int, position: int) -> bool:
        cursor = self._connection.execute(
            f"UPDATE {TRACKING_TABLE} SET position = ? WHERE name = ? AND position = ?",
            (position, TRACKING_NAME, expected),
        )
        return cursor.rowcount == 1

    def _upsert(self, changes: Sequence[Change]) -> None:
        self._connection.executemany(
            f"INSERT INTO {ROWS_TABLE} ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
            "ON CONFLICT (id) DO UPDATE SET root = excluded.root, parent = excluded.parent, "
            "kind = excluded.kind, name = excluded.name, status = excluded.status, "
            "owner = excluded.owner, version = excluded.version, has_snapshot = excluded.has_snapshot",
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
                )
                for seq, row in changes
            ],
        )

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        cursor = self._connection.execute(
            f"SELECT {_READ_COLUMNS} FROM {ROWS_TABLE}{_sql_filter(in_flight=in_flight, roots=roots)} "
            "ORDER BY seq"
        )
        return [_read_row(self._row, values) for values in cursor.fetchall()]

    def reset(self) -> None:
        with self._transaction():
            self._connection.execute(f"DELETE FROM {ROWS_TABLE}")
            self._connection.execute(
                f"UPDATE {TRACKING_TABLE} SET position = 0 WHERE name = ?", (TRACKING_NAME,)
            )

    @staticmethod
    def _row(values: Sequence[Any]) -> ListingRow:
        row_id, root, parent, kind, name, status, owner, version, has_snapshot = values
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
        )

    def close(self) -> None:
        self._connection.close()


class _PostgresBackend(_Backend):
    """PostgreSQL: two tables in the engine's schema, written through a dedicated connection.

    Several processes may start at once: table creation holds a transaction
    advisory lock, since concurrent ``CREATE TABLE IF NOT EXISTS`` can still
    collide in the catalogue. Concurrent writers serialise on the tracking
    row, which each batch updates first.
    """

    def __init__(self, engine: Engine) -> None:
        import psycopg
        from psycopg import sql

        self.errors = (psycopg.Error,)
        self._psycopg = psycopg
        storage = engine.storage
        self._settings: dict[str, Any] = {
            "host": storage.postgres_host,
            "port": storage.postgres_port,
            "dbname": storage.postgres_dbname,
            "user": storage.postgres_user,
            "password": storage.postgres_password,
            "connect_timeout": 10,
        }
        schema = storage.postgres_schema
        self._rows = sql.Identifier(schema, ROWS_TABLE) if schema else sql.Identifier(ROWS_TABLE)
        self._tracking = sql.Identifier(schema, TRACKING_TABLE) if schema else sql.Identifier(TRACKING_TABLE)
        self._lock_key = int.from_bytes(
            hashlib.sha256(f"{schema}.{ROWS_TABLE}".encode()).digest()[:8], "big", signed=True
        )
        self._connection: psycopg.Connection[Any] | None = None
        try:
            self._create_tables()
        except psycopg.Error as error:
            raise StorageError(f"could not open the listing in {storage.describe()}: {error}") from error

    def _connect(self) -> psycopg.Connection[Any]:
        """The connection, opened again if the server dropped it."""
        connection = self._connection
        if connection is None or connection.closed or connection.broken:
            connection = self._connection = self._psycopg.connect(autocommit=True, **self._settings)
        return connection

    def _create_tables(self) -> None:
        from psycopg import sql

        connection = self._connect()
        with connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} ("
                    "id uuid PRIMARY KEY, seq bigint NOT NULL, root uuid NOT NULL, parent uuid, "
                    "kind text NOT NULL, name text NOT NULL, status text NOT NULL, owner text NOT NULL, "
                    "version bigint NOT NULL, has_snapshot boolean NOT NULL)"
                ).format(self._rows)
            )
            connection.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (seq)").format(
                    sql.Identifier(f"{ROWS_TABLE}_seq"), self._rows
                )
            )
            connection.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (seq) WHERE " + _IN_FLIGHT_SQL).format(
                    sql.Identifier(f"{ROWS_TABLE}_in_flight"), self._rows
                )
            )
            connection.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, position bigint NOT NULL)"
                ).format(self._tracking)
            )
            connection.execute(
                sql.SQL(
                    "INSERT INTO {} (name, position) VALUES (%s, 0) ON CONFLICT (name) DO NOTHING"
                ).format(self._tracking),
                (TRACKING_NAME,),
            )

    def position(self) -> int:
        from psycopg import sql

        found = (
            self._connect()
            .execute(
                sql.SQL("SELECT position FROM {} WHERE name = %s").format(self._tracking), (TRACKING_NAME,)
            )
            .fetchone()
        )
        return 0 if found is None else _position(found[0])

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        from psycopg import sql

        cursor = self._connect().execute(
            sql.SQL("SELECT " + _READ_COLUMNS + " FROM {} WHERE id = ANY(%s)").format(self._rows),
            (list(ids),),
        )
        rows = [_read_row(self._row, values) for values in cursor.fetchall()]
        return {row.id: row for row in rows}

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        connection = self._connect()
        advanced = False
        with connection.transaction():
            # The tracking row is locked first, so concurrent writers queue here and the
            # later one finds the position moved.
            advanced = self._advance(connection, expected, position)
            if not advanced:
                raise self._psycopg.Rollback()
            self._upsert(connection, changes)
        return advanced

    def _advance(self, connection: psycopg.Connection[Any], expected: int, position: int) -> bool:
        from psycopg import sql

        cursor = connection.execute(
            sql.SQL("UPDATE {} SET position = %s WHERE name = %s AND position = %s").format(self._tracking),
            (position, TRACKING_NAME, expected),
        )
        return cursor.rowcount == 1

    def _upsert(self, connection: psycopg.Connection[Any], changes: Sequence[Change]) -> None:
        from psycopg import sql

        statement = sql.SQL(
            "INSERT INTO {} (" + ", ".join(_COLUMNS) + ") VALUES (" + ", ".join(["%s"] * len(_COLUMNS)) + ") "
            "ON CONFLICT (id) DO UPDATE SET root = excluded.root, parent = excluded.parent, "
            "kind = excluded.kind, name = excluded.name, status = excluded.status, "
            "owner = excluded.owner, version = excluded.version, has_snapshot = excluded.has_snapshot"
        ).format(self._rows)
        with connection.cursor() as cursor:
            cursor.executemany(
                statement,
                [
                    (
                        row.id,
                        seq,
                        row.root,
                        row.parent,
                        row.kind,
                        row.name,
                        row.status,
                        row.owner,
                        row.version,
                        row.has_snapshot,
                    )
                    for seq, row in changes
                ],
            )

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        from psycopg import sql

        query = "SELECT " + _READ_COLUMNS + " FROM {}" + _sql_filter(in_flight=in_flight, roots=roots)
        cursor = self._connect().execute(sql.SQL(query + " ORDER BY seq").format(self._rows))
        return [_read_row(self._row, values) for values in cursor.fetchall()]

    def reset(self) -> None:
        from psycopg import sql

        connection = self._connect()
        with connection.transaction():
            connection.execute(sql.SQL("DELETE FROM {}").format(self._rows))
            connection.execute(
                sql.SQL("UPDATE {} SET position = 0 WHERE name = %s").format(self._tracking), (TRACKING_NAME,)
            )

    @staticmethod
    def _row(values: Sequence[Any]) -> ListingRow:
        row_id, root, parent, kind, name, status, owner, version, has_snapshot = values
        return ListingRow(
            id=row_id,
            root=root,
            parent=parent,
            kind=kind,
            name=name,
            status=status,
            owner=owner,
            version=int(version),
            has_snapshot=bool(has_snapshot),
        )

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
