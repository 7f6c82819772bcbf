"""The PostgreSQL store: the events, the listing and the coordination tables in one database.

Imported only when PostgreSQL is used (``psycopg`` is an optional dependency).

The library's application recorder inserts in psycopg's pipeline mode. With
psycopg 3.3's pure-Python implementation, an event larger than what the
kernel's socket buffers absorb (about 4 MiB on a loopback connection, less
on a slow link) hangs forever: ``pipeline_communicate`` stops after a
partial flush, leaving the rest of the INSERT in libpq's output buffer, and
then waits for results the server cannot send while it waits for the rest of
the message (client in ``poll()``, server in ``ClientRead``). The recorder
here sends the same statements in one ordinary transaction instead, where
every statement is flushed completely before its result is awaited.

Our own tables (``incarnate_listing``, ``incarnate_listing_tracking``,
``incarnate_heartbeats``, ``incarnate_leases``) live in the engine's schema
and are written through dedicated connections, never the library's pool: a
session advisory lock taken on a pooled connection would stay held after the
connection went back to the pool. Several processes may start at once, so
tables are created under a transaction advisory lock (concurrent ``CREATE
TABLE IF NOT EXISTS`` can still collide in the catalogue: "tuple concurrently
updated"). Coordination times come from the server's
``clock_timestamp()``, so hosts whose clocks disagree still agree on who is
live.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    DatabaseError,
    DataError,
    IntegrityError,
    InterfaceError,
    InternalError,
    NotSupportedError,
    OperationalError,
    PersistenceError,
    ProgrammingError,
    StoredEvent,
)
from eventsourcing.postgres import PostgresAggregateRecorder, PostgresApplicationRecorder, PostgresFactory
from eventsourcing.utils import Environment, EnvType, retry
from psycopg import sql
from psycopg.rows import DictRow

from incarnate.errors import StorageError, StoreUnreachable
from incarnate.store import _lean as lean
from incarnate.store._port import Heartbeat, Load
from incarnate.store._postgres_storage import POSTGRES_FACTORY, TIMEOUT_VARIABLES, PostgresStorage
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

STATEMENT_TIMEOUT_VARIABLE = "POSTGRES_STATEMENT_TIMEOUT"
KEEPALIVES_IDLE = 30
"""Seconds of silence before TCP keepalives probe the server (then 3 probes 10 s apart)."""


class CreatedUnderLock(PostgresAggregateRecorder):
    """A recorder whose types, tables and functions are created in one transaction under the creation lock.

    Processes opening one store at the same moment (a fleet starting)
    otherwise collide in the catalogue: the library creates each composite
    type in a transaction of its own, outside any lock, and two processes
    creating the same type at once fail with a unique violation on
    ``pg_type`` (the first start of a fleet on an empty schema); and two
    replacing one function at once fail with "tuple concurrently updated",
    even when everything exists. Here a type that exists already is skipped
    at a savepoint, and the rest is the library's own creation.
    """

    def create_table(self) -> None:
        with self.datastore.transaction(commit=True) as curs:
            curs.execute("SELECT pg_advisory_xact_lock(%s)", (creation_lock(self.datastore.schema),))
            for statement in self.sql_create_statements:
                if "CREATE TYPE" in statement.as_string():
                    with contextlib.suppress(psycopg.errors.DuplicateObject), curs.connection.transaction():
                        curs.execute(statement, prepare=False)
            self._create_table(curs)  # everything but the types
        self.datastore.register_type_adapters()


class SnapshotRecorder(CreatedUnderLock):
    """The library's aggregate recorder (the snapshots' table), created under the creation lock."""


class NonPipelinedRecorder(CreatedUnderLock, PostgresApplicationRecorder):
    """The library's application recorder, inserting without pipeline mode and in one statement.

    An insert is one statement, sent on an autocommit connection, so it is
    its own transaction and one round trip: a function of the schema's
    (``incarnate_insert_events_<hash>``) takes the events table's
    ``EXCLUSIVE`` lock, notifies listeners and inserts the events,
    returning their notification ids — what the library does in six
    statements (begin, lock timeout, lock, notify, insert, commit), each a
    round trip to the server. The lock is still held until the statement's
    transaction commits, so notification ids stay gapless and in commit
    order for followers and projections.

    The insert and :meth:`select_events` are sent through libpq itself,
    prepared once per connection, with binary parameters and rows (see
    :mod:`incarnate.store._lean`): half the client CPU of a cursor.

    With :attr:`one_statement` false the same statement is sent between
    ``BEGIN`` and ``COMMIT`` (two more round trips), through a cursor.
    """

    one_statement = True
    """Send an insert as one autocommitted statement; false: inside ``BEGIN`` … ``COMMIT``."""

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        digest = hashlib.sha256(self.events_table_name.encode()).hexdigest()[:12]
        self.insert_function_name = f"incarnate_insert_events_{digest}"
        self._digest = hashlib.sha256(
            f"{self.datastore.schema}.{self.events_table_name}".encode()
        ).hexdigest()[:12]
        schema = sql.Identifier(self.datastore.schema)
        function = sql.Identifier(self.insert_function_name)
        table = sql.Identifier(self.events_table_name)
        id_type = sql.SQL(self.datastore.originator_id_type)
        self.insert_function_statement = sql.SQL(
            "CREATE OR REPLACE FUNCTION {schema}.{function}"
            "(ids {id_type}[], versions bigint[], topics text[], states bytea[]) "
            "RETURNS SETOF bigint LANGUAGE plpgsql AS $body$ "
            "BEGIN "
            "SET LOCAL lock_timeout = '{lock_timeout}s'; "
            "LOCK TABLE {schema}.{table} IN EXCLUSIVE MODE; "
            "NOTIFY {channel}; "
            "RETURN QUERY INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state) "
            "SELECT * FROM unnest(ids, versions, topics, states) "
            "RETURNING notification_id; "
            "END; $body$"
        ).format(
            schema=schema,
            function=function,
            id_type=id_type,
            lock_timeout=sql.SQL(str(self.datastore.lock_timeout)),
            table=table,
            channel=sql.Identifier(self.channel_name),
        )
        self.sql_create_statements.append(self.insert_function_statement)
        # Four arrays of plain values, sent in binary (%b): no quoting or escaping of each
        # element, where an array of the library's composite type is adapted value by value.
        self.call_insert_function = sql.SQL(
            "SELECT notification_id FROM {schema}.{function}"
            "(%b::{id_type}[], %b::bigint[], %b::text[], %b::bytea[]) AS notification_id"
        ).format(schema=schema, function=function, id_type=id_type)
        self._insert_query: bytes | None = None
        self.id_oid = lean.UUID_OID if self.datastore.originator_id_type == "uuid" else lean.TEXT_OID
        self._lean_insert: lean.Statement | None = None
        self._lean_selects: dict[tuple[bool, bool, bool, bool], lean.Statement] = {}

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Lock the table, notify, insert and read the notification ids: one transaction, one statement."""
        if self.datastore.enable_db_functions:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        if not stored_events:
            return None
        if self.one_statement:
            with _Pooled(self.datastore) as conn:
                return self._insert_lean(conn, stored_events)
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._insert_stored_events(curs, stored_events, **kwargs)
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)

    def _insert_lean(self, conn: psycopg.Connection[Any], stored_events: Sequence[StoredEvent]) -> list[int]:
        """The insert function's statement through libpq (see :mod:`incarnate.store._lean`)."""
        oid = self.id_oid
        statement = self._lean_insert
        if statement is None:
            with conn.cursor() as curs:
                text = lean.numbered(self.call_insert_function.as_bytes(curs))
            types = [lean.ARRAY_OIDS[t] for t in (oid, lean.INT8_OID, lean.TEXT_OID, lean.BYTEA_OID)]
            statement = self._lean_insert = lean.Statement(f"incarnate_insert_{self._digest}", text, types)
        result = statement.run(
            conn,
            [
                lean.array(oid, [lean.identifier(e.originator_id, oid) for e in stored_events]),
                lean.array(lean.INT8_OID, [lean.int8(e.originator_version) for e in stored_events]),
                lean.array(lean.TEXT_OID, [e.topic.encode() for e in stored_events]),
                lean.array(lean.BYTEA_OID, [bytes(e.state) for e in stored_events]),
            ],
        )
        return lean.int8_column(result)

    def _insert_stored_events(
        self, curs: psycopg.Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> None:
        """Lock, notify and insert through the schema's function."""
        columns = (
            [e.originator_id for e in stored_events],
            [e.originator_version for e in stored_events],
            [e.topic for e in stored_events],
            [e.state for e in stored_events],
        )
        query = self._insert_query
        if query is None:  # rendered once: a composed query is rendered again on every execute
            query = self._insert_query = self.call_insert_function.as_bytes(curs)
        curs.execute(query, columns, prepare=True)

    def _fetch_ids_after_insert_events(
        self, curs: psycopg.Cursor[DictRow], stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """The notification ids the function returned, one per event."""
        return [row["notification_id"] for row in curs.fetchall()]

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def select_events(
        self,
        originator_id: UUID | str,
        *,
        gt: int | None = None,
        lte: int | None = None,
        desc: bool = False,
        limit: int | None = None,
    ) -> Sequence[StoredEvent]:
        """An originator's events, as the library selects them, by a statement prepared once per form.

        The library composes and renders the statement again on every call
        and decodes rows as dicts; here each of the few forms is rendered
        once, prepared on each connection the first time it is sent there,
        and parameters and rows travel in binary (``bytea`` unescaped).
        """
        params: list[Any] = [originator_id]
        if gt is not None:
            params.append(gt)
        if lte is not None:
            params.append(lte)
        if limit is not None:
            params.append(limit)
        form = (gt is not None, lte is not None, desc, limit is not None)
        with _Pooled(self.datastore) as conn:
            statement = self._lean_selects.get(form)
            if statement is None:
                with conn.cursor() as curs:
                    text = lean.numbered(self._select_statement(*form).as_bytes(curs))
                name = f"incarnate_select_{self._digest}_{''.join('1' if f else '0' for f in form)}"
                types = [self.id_oid] + [lean.INT8_OID] * (len(params) - 1)
                statement = self._lean_selects[form] = lean.Statement(name, text, types)
            values = [lean.identifier(originator_id, self.id_oid)]
            values.extend(lean.int8(value) for value in params[1:])
            return lean.stored_events(statement.run(conn, values), self.id_oid)

    def _select_statement(self, gt: bool, lte: bool, desc: bool, limit: bool) -> sql.Composed:
        """The ``select_events`` statement of one form (which bounds are given, the order)."""
        return sql.SQL(
            "SELECT originator_id, originator_version, topic, state FROM {schema}.{table} "
            "WHERE originator_id = %b{gt}{lte} ORDER BY originator_version {order}{limit}"
        ).format(
            schema=sql.Identifier(self.datastore.schema),
            table=sql.Identifier(self.events_table_name),
            gt=sql.SQL(" AND originator_version > %b" if gt else ""),
            lte=sql.SQL(" AND originator_version <= %b" if lte else ""),
            order=sql.SQL("DESC" if desc else "ASC"),
            limit=sql.SQL(" LIMIT %b" if limit else ""),
        )


_ERRORS: tuple[tuple[type[psycopg.Error], type[PersistenceError]], ...] = (
    (psycopg.InterfaceError, InterfaceError),
    (psycopg.OperationalError, OperationalError),
    (psycopg.DataError, DataError),
    (psycopg.IntegrityError, IntegrityError),
    (psycopg.InternalError, InternalError),
    (psycopg.ProgrammingError, ProgrammingError),
    (psycopg.NotSupportedError, NotSupportedError),
    (psycopg.DatabaseError, DatabaseError),
)
"""psycopg's errors as the library's datastore translates them, most specific first."""


class _Pooled:
    """A pooled connection for one libpq statement: what ``datastore.get_connection()`` gives, for less.

    The library's context (two generator-based context managers, the
    connection's own ``with`` block, a composite-type check per use) costs
    about as much client time as the short statement it wraps. The hot
    statements need none of it: they run on the pool's autocommit
    connections and open no transaction. A connection that broke is
    discarded by ``putconn``, and errors are translated as the library
    translates them, so callers see the same classes (a conflict is an
    ``IntegrityError``, a lost connection an ``OperationalError``).
    """

    __slots__ = ("connection", "datastore")

    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore
        self.connection: psycopg.Connection[Any] | None = None

    def __enter__(self) -> psycopg.Connection[Any]:
        datastore = self.datastore
        pool = datastore.pool
        try:
            if pool.closed:
                pool.open(datastore.pool_open_timeout is not None, datastore.pool_open_timeout or 30.0)
            self.connection = pool.getconn()
        except psycopg.Error as error:
            raise _translated(error) from error
        return self.connection

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        connection, self.connection = self.connection, None
        if connection is not None:
            self.datastore.pool.putconn(connection)
        if isinstance(error, psycopg.Error):
            raise _translated(error) from error


def _translated(error: psycopg.Error) -> PersistenceError:
    """The library's error for a psycopg error (``datastore.get_connection()``'s translation)."""
    for theirs, ours in _ERRORS:
        if isinstance(error, theirs):
            return ours(str(error))
    return PersistenceError(str(error))


def creation_lock(schema: str) -> int:
    """The transaction advisory lock that serialises creating a schema's tables."""
    digest = hashlib.sha256(f"incarnate-tables:{schema}".encode()).digest()[:8]
    return int.from_bytes(digest, "big", signed=True)


class Factory(PostgresFactory):
    """The library's PostgreSQL factory, with a connect timeout, a statement timeout and keepalives.

    The library reads ``POSTGRES_CONNECT_TIMEOUT`` as the pool's wait for a
    connection; it is also given to libpq, so connecting to a silent host
    stops too. ``POSTGRES_STATEMENT_TIMEOUT`` (seconds) bounds every
    statement on the server.
    """

    application_recorder_class = NonPipelinedRecorder
    aggregate_recorder_class = SnapshotRecorder

    def __init__(self, env: Environment | EnvType | None) -> None:
        super().__init__(env)
        connect_timeout = int(self.env.get(self.POSTGRES_CONNECT_TIMEOUT) or "0")
        statement_timeout = int(self.env.get(STATEMENT_TIMEOUT_VARIABLE) or "0")
        settings = self.datastore.pool.kwargs
        assert isinstance(settings, dict)  # the library passes a dict of connection settings
        if connect_timeout > 0:
            settings["connect_timeout"] = max(2, connect_timeout)
        if statement_timeout > 0:
            settings["options"] = f"-c statement_timeout={statement_timeout * 1000}"
        settings.update(
            keepalives=1, keepalives_idle=KEEPALIVES_IDLE, keepalives_interval=10, keepalives_count=3
        )


def check_connection(storage: PostgresStorage, connect_timeout: int) -> None:
    """Connect once, directly; raise a :class:`StoreUnreachable` that says why and what to check."""
    try:
        with psycopg.connect(
            host=storage.host,
            port=storage.port,
            dbname=storage.dbname,
            user=storage.user,
            password=storage.password,
            connect_timeout=max(2, connect_timeout),
        ) as connection:
            schema = storage.schema.strip()  # as the library reads it
            if (
                schema
                and not connection.execute(
                    "SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)
                ).fetchone()
            ):
                raise missing_schema(storage)
    except psycopg.Error as error:
        raise unreachable(storage, error) from error


def missing_schema(storage: PostgresStorage) -> StorageError:
    """The configured schema is not in the database: name it and the statement that creates it."""
    host, port = storage.host, storage.port
    dbname, user, schema = storage.dbname, storage.user, storage.schema
    quoted = '"' + schema.replace('"', '""') + '"'
    return StorageError(
        f"schema {schema!r} does not exist in database {dbname!r} on {host}:{port}; create it with "
        f"`psql -h {host} -p {port} -U {user} -d {dbname} -c 'CREATE SCHEMA {quoted}'`, or name an "
        "existing schema (?schema=NAME in the store URL, Storage.postgres(schema=...) or POSTGRES_SCHEMA)"
    )


def unreachable(storage: PostgresStorage, error: BaseException) -> StoreUnreachable:
    """The connection failure ``error`` as a message naming the server, the database and the fix."""
    host, port = storage.host, storage.port
    dbname, user = storage.dbname, storage.user
    reason = " ".join(str(error).split())
    for secret in storage.secrets():
        reason = reason.replace(secret, "***")
    lowered = reason.lower()
    if f'database "{dbname.lower()}" does not exist' in lowered:
        message = (
            f"database {dbname!r} does not exist on {host}:{port}; create it with "
            f"`createdb -h {host} -p {port} -U {user} {dbname}`, or name an existing database "
            "(Storage.postgres(dbname=...) or POSTGRES_DBNAME)"
        )
    elif "authentication failed" in lowered or "role" in lowered or "password" in lowered:
        message = (
            f"PostgreSQL at {host}:{port} refused user {user!r} for database {dbname!r}: {reason}; "
            "check the user and its password (Storage.postgres(user=..., password=...) or "
            "POSTGRES_USER and POSTGRES_PASSWORD) and the server's pg_hba.conf"
        )
    else:
        message = (
            f"cannot connect to PostgreSQL at {host}:{port} (database {dbname!r}, user {user!r}): "
            f"{reason}; check that the server is running and accepts TCP connections there "
            f"(`pg_isready -h {host} -p {port}`), and the host and port settings "
            "(Storage.postgres(host=..., port=...) or POSTGRES_HOST and POSTGRES_PORT)"
        )
    return StoreUnreachable(message, host=host, port=port, dbname=dbname, user=user)


CHANNEL = "incarnate_events"
"""The channel the recorder NOTIFYs on every insert: the library names it after the events
table, ``<application name>_events``, and the engine's application is named ``incarnate``."""
_NOW = "extract(epoch from clock_timestamp())::float8"


class PostgresStore:
    """A PostgreSQL database: :class:`Factory` for the events, our tables next to them."""

    kind = "postgres"

    def __init__(self, storage: PostgresStorage) -> None:
        self.storage = storage

    def describe(self) -> str:
        """``PostgreSQL USER@HOST:PORT/DBNAME`` (and the schema when set): never the password."""
        return self.storage.describe()

    def url(self) -> str:
        """``postgresql://USER@HOST:PORT/DBNAME[?schema=S]``, without the password."""
        return self.storage.url()

    def environment(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The library's PostgreSQL settings, through :class:`Factory`, with every timeout."""
        storage = self.storage
        env = {
            "PERSISTENCE_MODULE": POSTGRES_FACTORY,
            "POSTGRES_DBNAME": storage.dbname,
            "POSTGRES_HOST": storage.host,
            "POSTGRES_PORT": str(storage.port),
            "POSTGRES_USER": storage.user,
            "POSTGRES_PASSWORD": storage.password,
            "CREATE_TABLE": "y" if storage.create_tables else "n",
        }
        for name, (variable, _) in TIMEOUT_VARIABLES.items():
            env[variable] = str(storage.timeout(name, environ))
        if storage.schema:
            env["POSTGRES_SCHEMA"] = storage.schema
        return env

    def check(self) -> None:
        """Connect once, directly; :class:`StoreUnreachable` says why and what to check."""
        check_connection(self.storage, self.storage.timeout("connect_timeout"))

    def recorder(self, construct: Callable[[], ApplicationRecorder]) -> ApplicationRecorder:
        """The :class:`NonPipelinedRecorder` the factory constructs."""
        return construct()

    def connect(self) -> psycopg.Connection[Any]:
        """A dedicated autocommit connection with the storage's timeouts and keepalives."""
        storage = self.storage
        options = (
            f"-c statement_timeout={storage.timeout('statement_timeout') * 1000} "
            f"-c lock_timeout={storage.timeout('lock_timeout') * 1000} "
            f"-c idle_in_transaction_session_timeout={storage.timeout('idle_in_transaction_timeout') * 1000}"
        )
        if storage.schema:
            options += f" -c search_path={storage.schema}"
        try:
            return psycopg.connect(
                host=storage.host,
                port=storage.port,
                dbname=storage.dbname,
                user=storage.user,
                password=storage.password,
                connect_timeout=max(2, storage.timeout("connect_timeout")),
                options=options,
                autocommit=True,
                keepalives=1,
                keepalives_idle=KEEPALIVES_IDLE,
                keepalives_interval=10,
                keepalives_count=3,
            )
        except psycopg.OperationalError as error:
            raise unreachable(storage, error) from error

    def table(self, name: str) -> sql.Identifier:
        """One of our tables, in the storage's schema when it names one."""
        schema = self.storage.schema
        return sql.Identifier(schema, name) if schema else sql.Identifier(name)

    def create(self, connection: psycopg.Connection[Any], create: Callable[[Connection], None]) -> None:
        """Run ``create`` in one transaction holding this schema's creation lock.

        Concurrent ``CREATE ... IF NOT EXISTS`` in several processes can still
        collide in the catalogue; the transaction advisory lock serialises them.
        The statements are pipelined (sent without waiting for each reply):
        opening the listing's tables takes a third of the time it took.
        """
        with connection.transaction(), connection.pipeline():  # the statements go out together
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (creation_lock(self.storage.schema),))
            create(connection)

    def listing_tables(self) -> PostgresListingTables:
        """The listing's two tables, through a dedicated connection."""
        return PostgresListingTables(self)

    def coordination(self) -> PostgresCoordination:
        """Heartbeats, leases, the leader's advisory lock and LISTEN, each on its own connection."""
        return PostgresCoordination(self)

    def select_many(
        self, recorder: AggregateRecorder, originator_ids: Sequence[UUID], *, latest: bool = False
    ) -> dict[UUID, list[StoredEvent]] | None:
        """The events of many originators from the recorder's table, in one query (``= ANY``)."""
        table = getattr(recorder, "events_table_name", None)
        datastore = getattr(recorder, "datastore", None)
        if not isinstance(table, str) or datastore is None:
            return None
        statement = sql.SQL(
            "SELECT {distinct} originator_id, originator_version, topic, state FROM {schema}.{table} "
            "WHERE originator_id = ANY(%s) ORDER BY originator_id, {order}"
        ).format(
            distinct=sql.SQL("DISTINCT ON (originator_id)" if latest else ""),
            schema=sql.Identifier(datastore.schema),
            table=sql.Identifier(table),
            order=sql.SQL("originator_version DESC" if latest else "originator_version"),
        )
        ids: list[Any] = list(originator_ids)
        if datastore.originator_id_type != "uuid":
            ids = [str(i) for i in ids]
        found: dict[UUID, list[StoredEvent]] = {}
        with datastore.get_connection() as connection, connection.cursor() as cursor:
            cursor.execute(statement, (ids,), prepare=True)
            for row in cursor.fetchall():
                value = row["originator_id"]
                originator = value if isinstance(value, UUID) else UUID(str(value))
                found.setdefault(originator, []).append(
                    StoredEvent(originator, row["originator_version"], row["topic"], bytes(row["state"]))
                )
        return found


class _Connection:
    """A dedicated connection, opened again when the server dropped it; calls serialised by a lock."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._connection: psycopg.Connection[Any] | None = None
        self.lock = threading.RLock()

    def get(self) -> psycopg.Connection[Any]:
        connection = self._connection
        if connection is None or connection.closed or connection.broken:
            connection = self._connection = self._store.connect()
        return connection

    def close(self) -> None:
        with self.lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


class _Postgres(Dialect):
    """PostgreSQL's spelling: ``%(name)s`` parameters, our tables in the store's schema, native uuids."""

    types = Types(
        uuid="uuid",
        text="text",
        bigint="bigint",
        integer="integer",
        boolean="boolean",
        double="double precision",
    )
    _schema = ""

    def mark(self, name: str) -> str:
        """``%(name)s``."""
        return f"%({name})s"

    def table(self, name: str) -> str:
        """The table, quoted, in the store's schema when it names one."""
        parts = (self._schema, name) if self._schema else (name,)
        return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


class PostgresListingTables(_Postgres, SQLListingTables):
    """The listing's rows and tracking position, through a dedicated connection."""

    errors: tuple[type[Exception], ...] = (psycopg.Error,)

    def __init__(self, store: PostgresStore) -> None:
        self._schema = store.storage.schema
        super().__init__()
        self._connection = _Connection(store)
        try:
            store.create(self._connection.get(), self.create)
        except psycopg.Error as error:
            raise StorageError(f"could not open the listing in {store.describe()}: {error}") from error

    def connection(self) -> psycopg.Connection[Any]:
        """The dedicated connection (opened again when the server dropped it)."""
        return self._connection.get()

    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """A transaction on the dedicated connection."""
        return self._connection.get().transaction()

    def insert_many(self, statement: str, rows: Sequence[Parameters]) -> None:
        """``executemany`` on a cursor."""
        with self._connection.get().cursor() as cursor:
            cursor.executemany(statement, rows)

    def where_ids(self, ids: Sequence[UUID], column: str = "id") -> Iterator[tuple[str, Parameters]]:
        """``column = ANY(…)``: one statement for every id."""
        yield f"{column} = ANY({self.mark('ids')})", {"ids": list(ids)}

    def add_changed_at(self, connection: Connection) -> None:
        """``ADD COLUMN IF NOT EXISTS``."""
        connection.execute(
            f"ALTER TABLE {self.table(ROWS_TABLE)} "
            "ADD COLUMN IF NOT EXISTS changed_at double precision NOT NULL DEFAULT 0",
            {},
        )

    def close(self) -> None:
        """Close the connection."""
        self._connection.close()


class PostgresCoordination(_Postgres, SQLCoordination):
    """Heartbeats and leases in tables, leadership by advisory lock, wake-ups by LISTEN.

    Four dedicated connections, each opened on first use: one for the
    tables, one for this engine's own heartbeat (a beat never queues behind
    the sweeps, claims and liveness checks of a busy engine: a heartbeat
    that waits lets the lease lapse, and a live engine's trees be taken
    over), one holding the leader's session advisory locks (so a lock lives
    exactly as long as that connection), and one listening on the channel
    the recorder notifies on every insert.
    """

    errors: tuple[type[Exception], ...] = (psycopg.Error,)

    def __init__(self, store: PostgresStore) -> None:
        self._schema = store.storage.schema
        super().__init__(store.describe())
        self._store = store
        self._heartbeat_table = store.table(HEARTBEATS_TABLE)
        self._lease_table = store.table(LEASES_TABLE)
        self._tables = _Connection(store)
        self._beats = _Connection(store)
        self._leader = _Connection(store)
        self._listener = _Connection(store)
        self._listening = False
        self._held: set[int] = set()
        with self._errors("create the coordination tables"):
            store.create(self._tables.get(), self.create)

    def add_load(self, connection: Connection) -> None:
        """``ADD COLUMN IF NOT EXISTS``."""
        connection.execute(
            f"ALTER TABLE {self.table(HEARTBEATS_TABLE)} ADD COLUMN IF NOT EXISTS {LOAD_COLUMN} text", {}
        )

    def clock(self) -> str:
        """The server's ``clock_timestamp()``, in seconds since the epoch."""
        return _NOW

    def clock_parameters(self) -> Parameters:
        """None: the clock is the server's."""
        return {}

    @contextlib.contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """The tables' connection, under its lock."""
        with self._tables.lock:
            yield self._tables.get()

    @contextlib.contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as error:
            raise StorageError(
                f"could not {doing} in {self._store.describe()}: {type(error).__name__}: {error}"
            ) from error

    def now(self) -> float:
        """The server's ``clock_timestamp()``."""
        with self._tables.lock, self._errors("read the clock"):
            found = self._tables.get().execute("SELECT " + _NOW).fetchone()
        assert found is not None
        return float(found[0])

    def beat(self, engine_id: str, group: str, lease: float, load: Load | None = None) -> Heartbeat:
        """Upsert ``engine_id``'s heartbeat and its load, timed by the server."""
        text = encode_load(engine_id, load)
        statement = sql.SQL(
            f"INSERT INTO {{}} ({HEARTBEAT_COLUMNS}, {LOAD_COLUMN}) SELECT %s, %s, t.now, t.now + %s, %s "
            "FROM (SELECT " + _NOW + " AS now) AS t " + HEARTBEAT_UPSERT + " RETURNING beat_at, expires_at"
        ).format(self._heartbeat_table)
        with self._beats.lock, self._errors("record a heartbeat"):
            found = self._beats.get().execute(statement, (engine_id, group, float(lease), text)).fetchone()
        assert found is not None
        return Heartbeat(
            engine_id=engine_id, group=group, beat_at=float(found[0]), expires_at=float(found[1])
        )

    def retire(self, engine_id: str) -> None:
        """Mark ``engine_id``'s heartbeat retired: no lease left from now (the server's clock)."""
        statement = sql.SQL(
            "UPDATE {} SET beat_at = t.now, expires_at = t.now FROM (SELECT " + _NOW + " AS now) AS t "
            "WHERE engine_id = %s"
        ).format(self._heartbeat_table)
        with self._beats.lock, self._errors("retire a heartbeat"):
            self._beats.get().execute(statement, (engine_id,))

    def release_rows(self, connection: Connection, statement: str, rows: Sequence[Parameters]) -> int:
        """One transaction, the rows sent in one pipeline (``executemany``)."""
        assert isinstance(connection, psycopg.Connection)
        with connection.transaction(), connection.cursor() as cursor:
            cursor.executemany(statement, rows)
            return cursor.rowcount

    def claim(self, roots: Sequence[UUID], holder: str, lease: float, limit: int) -> list[UUID]:
        """Lease up to ``limit`` free roots to ``holder`` in one transaction.

        Existing rows are locked ``FOR UPDATE SKIP LOCKED``: a row another
        claimer has locked is skipped, never waited for. A root without a row
        is inserted ``ON CONFLICT DO NOTHING``, so of two claimers inserting
        it at once only one gets it.
        """
        ordered = list(dict.fromkeys(roots))
        if not ordered or limit < 1:
            return []
        won: list[UUID] = []
        with self._tables.lock, self._errors("claim recovery leases"):
            connection = self._tables.get()
            with connection.transaction():
                now_row = connection.execute("SELECT " + _NOW).fetchone()
                assert now_row is not None
                now = float(now_row[0])
                lockable = {
                    row[0]: row
                    for row in connection.execute(
                        sql.SQL(
                            "SELECT root, expires_at, outcome FROM {} WHERE root = ANY(%s) "
                            "FOR UPDATE SKIP LOCKED"
                        ).format(self._lease_table),
                        (ordered,),
                    ).fetchall()
                }
                existing = {
                    row[0]
                    for row in connection.execute(
                        sql.SQL("SELECT root FROM {} WHERE root = ANY(%s)").format(self._lease_table),
                        (ordered,),
                    ).fetchall()
                }
                for root in ordered:
                    if len(won) >= limit:
                        break
                    if root in lockable:
                        _, expires_at, outcome = lockable[root]
                        if outcome == "" and float(expires_at) >= now:
                            continue  # still held
                        connection.execute(
                            sql.SQL(
                                "UPDATE {} SET holder = %s, expires_at = %s, attempts = attempts + 1, "
                                "outcome = '', message = '' WHERE root = %s"
                            ).format(self._lease_table),
                            (holder, now + lease, root),
                        )
                        won.append(root)
                    elif root not in existing:
                        inserted = connection.execute(
                            sql.SQL(
                                "INSERT INTO {} (" + LEASE_COLUMNS + ") VALUES (%s, %s, %s, 1, '', '') "
                                "ON CONFLICT (root) DO NOTHING RETURNING root"
                            ).format(self._lease_table),
                            (root, holder, now + lease),
                        ).fetchone()
                        if inserted is not None:
                            won.append(root)
                    # else: another claimer holds the row's lock right now
        return won

    def lead(self, lock_id: int, holder: str) -> bool:
        """Hold the session advisory lock ``lock_id`` on the leader connection (never blocks).

        Leading already, the connection is checked: when it died, the lock
        went with it, and the lock is tried again on a new connection.
        """
        with self._leader.lock, self._errors(f"try the leader lock {lock_id} for {holder}"):
            if lock_id in self._held:
                try:
                    self._leader.get().execute("SELECT 1")
                    return True
                except psycopg.OperationalError:
                    self._held.clear()  # the connection died, and every lock with it
                    self._leader.close()
            connection = self._leader.get()
            for _ in range(2):
                found = connection.execute("SELECT pg_try_advisory_lock(%s)", (lock_id,)).fetchone()
                if found is not None and found[0]:
                    # Name the session after its leader, so a candidate can tell whether it still lives.
                    connection.execute("SELECT set_config('application_name', %s, false)", (holder[:63],))
                    self._held.add(lock_id)
                    return True
                if not self._end_lapsed_leader(connection, lock_id):
                    return False
            return False

    def _end_lapsed_leader(self, connection: psycopg.Connection[Any], lock_id: int) -> bool:
        """End the session holding ``lock_id`` when its leader's heartbeat has lapsed; True when one was.

        A leader frozen (SIGSTOP, a paused VM) past its lease keeps its session,
        so its advisory lock, for as long as it stays frozen: without this, no
        other engine of its group would sweep again, not even the frozen one's
        own trees. An engine that never beats (no heartbeat row) is left alone.
        """
        found = connection.execute(
            sql.SQL(
                "SELECT pg_terminate_backend(l.pid) FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid "
                "JOIN {} h ON h.engine_id = a.application_name "
                "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
                "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                "AND l.classid = %s::bigint::oid AND l.objid = %s::bigint::oid "
                "AND h.expires_at < " + _NOW
            ).format(self._heartbeat_table),
            (lock_id >> 32, lock_id & 0xFFFFFFFF),
        ).fetchall()
        if not any(row[0] for row in found):
            return False
        time.sleep(0.05)  # the ended session lets go of its locks as it exits
        return True

    def leaders(self) -> dict[str, frozenset[int]]:
        """The advisory locks held by sessions named after an engine with a heartbeat row here.

        The leader connection takes the engine's id as its ``application_name``
        (see :meth:`lead`); PostgreSQL keeps at most 63 bytes of it, so an
        engine whose id is longer is never found leading. A key of
        ``pg_try_advisory_lock(bigint)`` is listed as its high and low halves.
        """
        statement = sql.SQL(
            "SELECT a.application_name, (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid "
            "JOIN {} h ON h.engine_id = a.application_name "
            "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
            "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).format(self._heartbeat_table)
        with self._tables.lock, self._errors("read who leads"):
            rows = self._tables.get().execute(statement).fetchall()
        held: dict[str, set[int]] = {}
        for engine_id, lock_id in rows:
            held.setdefault(engine_id, set()).add(int(lock_id))
        return {engine_id: frozenset(locks) for engine_id, locks in held.items()}

    def resign(self, lock_id: int, holder: str) -> None:
        """Release ``lock_id`` when held."""
        with self._leader.lock, self._errors(f"release the leader lock {lock_id} of {holder}"):
            if lock_id in self._held:
                self._held.discard(lock_id)
                self._leader.get().execute("SELECT pg_advisory_unlock(%s)", (lock_id,))

    def wait(self, timeout: float) -> bool:
        """LISTEN on the recorder's channel; True once an insert was notified, False after ``timeout``.

        The listening connection queues notifications between calls, so an
        insert committed while the caller was busy wakes the next call at once.
        """
        with self._listener.lock, self._errors("wait for new events"):
            connection = self._listener.get()
            if not self._listening or connection is not self._listener_connection:
                connection.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
                self._listening = True
                self._listener_connection = connection
            # Exhausted, so the generator lets go of the connection before the backlog is drained.
            woken = bool(list(connection.notifies(timeout=max(0.0, timeout), stop_after=1)))
            if woken:
                for _ in connection.notifies(timeout=0.001):
                    pass  # drain the backlog: one wake-up covers every insert so far
            return woken

    _listener_connection: psycopg.Connection[Any] | None = None

    def close(self) -> None:
        """Close every connection, releasing the leader locks first (the server would, a moment later)."""
        with self._leader.lock:
            if self._held:
                with contextlib.suppress(psycopg.Error, StoreUnreachable):
                    self._leader.get().execute("SELECT pg_advisory_unlock_all()")
            self._held.clear()
        for connection in (self._tables, self._beats, self._leader, self._listener):
            with contextlib.suppress(psycopg.Error):
                connection.close()
