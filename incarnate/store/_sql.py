"""What the SQL adapters share: the table layout, and the statements of the listing and the coordination.

:class:`SQLListingTables` and :class:`SQLCoordination` send every statement
that SQLite and PostgreSQL send alike, written once with named parameters;
a dialect subclass supplies its placeholders (:meth:`Dialect.mark`), its
table names, its column types, its connection and transactions, and the
statements only it has: migrating an old listing, claiming leases,
heartbeats timed by the store's clock, leadership and wake-ups.
"""

from __future__ import annotations

import abc
import contextlib
import json
import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol
from uuid import UUID

import attrs

from aggregates import uuid_of
from incarnate.errors import StorageError, UnreadableRow
from incarnate.store._port import Change, Heartbeat, Lease, Load
from projections import ListingRow
from statechart import JsonValue

ROWS_TABLE = "incarnate_listing"
TRACKING_TABLE = "incarnate_listing_tracking"
TRACKING_NAME = "listing"
"""The listing's key in the tracking table."""
HEARTBEATS_TABLE = "incarnate_heartbeats"
LEASES_TABLE = "incarnate_leases"

IN_FLIGHT_SQL = "status IN ('born', 'running', 'parked')"
TASKS_SQL = f"version = 0 AND {IN_FLIGHT_SQL}"
"""The rows of embedded tasks still in flight (an embedded task's row has version 0)."""
"""Written identically in the partial index and the queries, so both stores use the index."""
COLUMNS = (
    "id",
    "seq",
    "root",
    "parent",
    "kind",
    "name",
    "status",
    "owner",
    "version",
    "has_snapshot",
    "changed_at",
)
READ_COLUMNS = ", ".join(c for c in COLUMNS if c != "seq")
UPSERT_SET = ", ".join(f"{c} = excluded.{c}" for c in COLUMNS if c not in ("id", "seq"))
"""The columns an upsert of an existing row overwrites (its id and insertion sequence stay)."""
LEASE_COLUMNS = "root, holder, expires_at, attempts, outcome, message"
HEARTBEAT_COLUMNS = 'engine_id, "group", beat_at, expires_at'
LOAD_COLUMN = '"load"'
"""The heartbeat's load: JSON text, NULL when unknown (a column added after the table's first version)."""
HEARTBEAT_UPSERT = (
    'ON CONFLICT (engine_id) DO UPDATE SET "group" = excluded."group", '
    f"beat_at = excluded.beat_at, expires_at = excluded.expires_at, {LOAD_COLUMN} = excluded.{LOAD_COLUMN}"
)

RELEASED = ("succeeded", "transient", "failed", "orphan", "error")
"""The outcomes a lease may be released with."""

Parameters = Mapping[str, Any]


class Cursor(Protocol):
    """What a statement returns, in both drivers."""

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...


class Connection(Protocol):
    """A connection of either driver: it runs a statement with named parameters."""

    def execute(self, statement: str, parameters: Parameters, /) -> Cursor:
        """Run ``statement``."""
        ...


@attrs.frozen
class Types:
    """A dialect's column types for the layout's abstract ones."""

    uuid: str
    text: str
    bigint: str
    integer: str
    boolean: str
    double: str


class Dialect(abc.ABC):
    """How one SQL database spells what the shared statements need."""

    types: Types

    @abc.abstractmethod
    def mark(self, name: str) -> str:
        """The placeholder of the named parameter ``name``."""

    @abc.abstractmethod
    def table(self, name: str) -> str:
        """One of our tables, as a statement names it (in the store's schema, when it has one)."""

    def encode_id(self, value: UUID) -> object:
        """A UUID as a parameter (its text where the column is text)."""
        return value


def check_outcome(outcome: str) -> None:
    """Refuse an outcome that is not one of :data:`RELEASED` (an empty one would mean "still held")."""
    if outcome not in RELEASED:
        raise ValueError(f"lease outcome {outcome!r} is not one of {', '.join(RELEASED)}")


def read_position(value: object) -> int:
    """A stored tracking position; :class:`UnreadableRow` when it is not a whole number."""
    try:
        return int(str(value))
    except (ValueError, TypeError) as error:
        raise UnreadableRow("position", error) from error


def read_row(values: Sequence[Any]) -> ListingRow:
    """A stored row (its :data:`READ_COLUMNS`) as a ListingRow; else :class:`UnreadableRow`."""
    try:
        row_id, root, parent, kind, name, status, owner, version, has_snapshot, changed_at = values
        return ListingRow(
            id=_uuid(row_id),
            root=_uuid(root),
            parent=None if parent is None else _uuid(parent),
            kind=kind,
            name=name,
            status=status,
            owner=owner,
            version=int(version),
            has_snapshot=bool(has_snapshot),
            changed_at=float(changed_at),
        )
    except (ValueError, TypeError, AttributeError) as error:
        raise UnreadableRow(values[0] if values else "?", error) from error


def _uuid(value: object) -> UUID:
    return value if isinstance(value, UUID) else uuid_of(str(value))


def sql_filter(*, in_flight: bool, roots: bool) -> str:
    """The WHERE clause of a listing selection."""
    conditions = [IN_FLIGHT_SQL] if in_flight else []
    if roots:
        conditions.append("parent IS NULL")
    return f" WHERE {' AND '.join(conditions)}" if conditions else ""


# ------------------------------------------------------------------ the listing


def listing_creation(dialect: Dialect) -> list[str]:
    """The statements that create the listing's tables and indexes, and its tracking row, idempotently.

    A listing written before rows had a change time gains the column
    afterwards, by the dialect's own statement (:meth:`SQLListingTables.add_changed_at`).
    """
    types, rows, tracking = dialect.types, dialect.table(ROWS_TABLE), dialect.table(TRACKING_TABLE)
    return [
        f"CREATE TABLE IF NOT EXISTS {rows} ("
        f"id {types.uuid} PRIMARY KEY, seq {types.bigint} NOT NULL, root {types.uuid} NOT NULL, "
        f"parent {types.uuid}, kind {types.text} NOT NULL, name {types.text} NOT NULL, "
        f"status {types.text} NOT NULL, owner {types.text} NOT NULL, version {types.bigint} NOT NULL, "
        f"has_snapshot {types.boolean} NOT NULL, changed_at {types.double} NOT NULL DEFAULT 0)",
        f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_seq ON {rows} (seq)",
        f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_in_flight ON {rows} (seq) WHERE {IN_FLIGHT_SQL}",
        f"CREATE INDEX IF NOT EXISTS {ROWS_TABLE}_tasks ON {rows} (parent) WHERE {TASKS_SQL}",
        f"CREATE TABLE IF NOT EXISTS {tracking} "
        f"(name {types.text} PRIMARY KEY, position {types.bigint} NOT NULL)",
        f"INSERT INTO {tracking} (name, position) VALUES ('{TRACKING_NAME}', 0) "
        "ON CONFLICT (name) DO NOTHING",
    ]


class SQLListingTables(Dialect):
    """The listing's rows and tracking position, two tables; what every SQL dialect sends alike.

    Calls are serialised on one connection. A write moves the position by a
    compare-and-swap on the tracking row, which it updates first, so
    concurrent writers queue there and the later one finds the position moved.
    """

    errors: tuple[type[Exception], ...] = ()
    """The database's errors, which the listing wraps in StorageError."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        rows, tracking, mark = self.table(ROWS_TABLE), self.table(TRACKING_TABLE), self.mark
        self._position = f"SELECT position FROM {tracking} WHERE name = {mark('name')}"
        self._move = (
            f"UPDATE {tracking} SET position = {mark('position')} "
            f"WHERE name = {mark('name')} AND position = {mark('expected')}"
        )
        self._upsert = (
            f"INSERT INTO {rows} ({', '.join(COLUMNS)}) VALUES ({', '.join(mark(c) for c in COLUMNS)}) "
            f"ON CONFLICT (id) DO UPDATE SET {UPSERT_SET}"
        )
        self._rows = f"SELECT {READ_COLUMNS} FROM {rows}"
        self._delete = f"DELETE FROM {rows}"
        self._rewind = f"UPDATE {tracking} SET position = 0 WHERE name = {mark('name')}"

    # ------------------------------------------------------ the dialect's part

    @abc.abstractmethod
    def connection(self) -> Connection:
        """The tables' connection (called holding :attr:`lock`)."""

    @abc.abstractmethod
    def transaction(self) -> contextlib.AbstractContextManager[object]:
        """One write transaction on :meth:`connection` (called holding :attr:`lock`)."""

    @abc.abstractmethod
    def insert_many(self, statement: str, rows: Sequence[Parameters]) -> None:
        """Run ``statement`` once per row, in the current transaction."""

    @abc.abstractmethod
    def where_ids(self, ids: Sequence[UUID], column: str = "id") -> Iterator[tuple[str, Parameters]]:
        """Conditions selecting rows whose ``column`` is in ``ids``, with parameters: a statement each."""

    @abc.abstractmethod
    def add_changed_at(self, connection: Connection) -> None:
        """Give a listing written before rows had a change time its ``changed_at`` column (idempotently)."""

    @abc.abstractmethod
    def close(self) -> None:
        """Release the connection."""

    # ------------------------------------------------------ the statements

    def create(self, connection: Connection) -> None:
        """Create what is missing of the listing (inside the dialect's creation transaction)."""
        statements = listing_creation(self)
        connection.execute(statements[0], {})
        self.add_changed_at(connection)
        for statement in statements[1:]:
            connection.execute(statement, {})

    def position(self) -> int:
        """The stored position."""
        with self.lock:
            found = self.connection().execute(self._position, {"name": TRACKING_NAME}).fetchone()
        return 0 if found is None else read_position(found[0])

    def load(self, ids: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The stored rows of ``ids``."""
        return self._load(ids, "id", "")

    def load_tasks(self, parents: Collection[UUID]) -> dict[UUID, ListingRow]:
        """The in-flight rows of embedded tasks whose parent is in ``parents``."""
        return self._load(parents, "parent", f"{TASKS_SQL} AND ")

    def _load(self, ids: Collection[UUID], column: str, also: str) -> dict[UUID, ListingRow]:
        found: dict[UUID, ListingRow] = {}
        with self.lock:
            connection = self.connection()
            for where, parameters in self.where_ids(list(ids), column):
                cursor = connection.execute(f"{self._rows} WHERE {also}{where}", parameters)
                for values in cursor.fetchall():  # read whole: a bad row must not leave a statement open
                    row = read_row(values)
                    found[row.id] = row
        return found

    def write(self, changes: Sequence[Change], expected: int, position: int) -> bool:
        """Move the position and upsert the rows in one transaction, or nothing when the position moved."""
        moved = {"position": position, "name": TRACKING_NAME, "expected": expected}
        with self.lock, self.transaction():
            if self.connection().execute(self._move, moved).rowcount != 1:
                return False  # nothing was written; committing the empty transaction is harmless
            self.insert_many(self._upsert, [self._encode(seq, row) for seq, row in changes])
        return True

    def select(self, *, in_flight: bool, roots: bool) -> list[ListingRow]:
        """The rows in insertion order, filtered."""
        statement = f"{self._rows}{sql_filter(in_flight=in_flight, roots=roots)} ORDER BY seq"
        with self.lock:
            return [read_row(values) for values in self.connection().execute(statement, {}).fetchall()]

    def reset(self) -> None:
        """Delete every row and move the position back to 0, in one transaction."""
        with self.lock, self.transaction():
            connection = self.connection()
            connection.execute(self._delete, {})
            connection.execute(self._rewind, {"name": TRACKING_NAME})

    def _encode(self, seq: int, row: ListingRow) -> Parameters:
        encode = self.encode_id
        return {
            "id": encode(row.id),
            "seq": seq,
            "root": encode(row.root),
            "parent": None if row.parent is None else encode(row.parent),
            "kind": row.kind,
            "name": row.name,
            "status": row.status,
            "owner": row.owner,
            "version": row.version,
            "has_snapshot": row.has_snapshot,
            "changed_at": row.changed_at,
        }


# ------------------------------------------------------------------ the coordination


def encode_load(engine_id: str, load: Load | None) -> str | None:
    """A load as the JSON text the heartbeat row keeps (None stays NULL); ValueError when it is no JSON."""
    if load is None:
        return None
    try:
        return json.dumps(dict(load), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"the load engine {engine_id!r} reports with its heartbeat is not a JSON object: {error}"
        ) from error


def read_load(text: object) -> dict[str, JsonValue] | None:
    """A stored load; None when there is none or it does not read as a JSON object (unknown, not an error)."""
    if not isinstance(text, str | bytes):
        return None
    try:
        document = json.loads(text)
    except ValueError:
        return None
    return document if isinstance(document, dict) else None


def coordination_creation(dialect: Dialect) -> list[str]:
    """The statements that create the heartbeat and lease tables, idempotently.

    A heartbeat table written before heartbeats carried a load gains the
    column afterwards, by the dialect's own statement (:meth:`SQLCoordination.add_load`).
    """
    types = dialect.types
    return [
        f"CREATE TABLE IF NOT EXISTS {dialect.table(HEARTBEATS_TABLE)} ("
        f'engine_id {types.text} PRIMARY KEY, "group" {types.text} NOT NULL, '
        f"beat_at {types.double} NOT NULL, expires_at {types.double} NOT NULL, {LOAD_COLUMN} {types.text})",
        f"CREATE TABLE IF NOT EXISTS {dialect.table(LEASES_TABLE)} ("
        f"root {types.uuid} PRIMARY KEY, holder {types.text} NOT NULL, expires_at {types.double} NOT NULL, "
        f"attempts {types.integer} NOT NULL, outcome {types.text} NOT NULL, message {types.text} NOT NULL)",
    ]


class SQLCoordination(Dialect):
    """Heartbeats and leases in two tables; what every SQL dialect sends alike.

    The store's clock is :meth:`clock`: an SQL expression (PostgreSQL's
    ``clock_timestamp()``) or a parameter the dialect fills from the host's
    clock (SQLite).
    """

    errors: tuple[type[Exception], ...] = ()
    """The database's errors, which every call wraps in StorageError."""

    def __init__(self, where: str) -> None:
        self.where = where
        """The store, as messages name it."""
        heartbeats, leases, mark = self.table(HEARTBEATS_TABLE), self.table(LEASES_TABLE), self.mark
        self._heartbeats = f"SELECT {HEARTBEAT_COLUMNS} FROM {heartbeats}"
        self._group = f'{self._heartbeats} WHERE "group" = {mark("group")}'
        self._live = (
            f"SELECT expires_at > {self.clock()} FROM {heartbeats} WHERE engine_id = {mark('engine_id')}"
        )
        self._release = (
            f"UPDATE {leases} SET outcome = {mark('outcome')}, message = {mark('message')} "
            f"WHERE root = {mark('root')} AND holder = {mark('holder')} AND outcome = ''"
        )
        self._leases = f"SELECT {LEASE_COLUMNS} FROM {leases} ORDER BY root"
        self._loads = f"SELECT engine_id, {LOAD_COLUMN} FROM {heartbeats} WHERE {LOAD_COLUMN} IS NOT NULL"
        self._group_loads = f'{self._loads} AND "group" = {mark("group")}'

    # ------------------------------------------------------ the dialect's part

    @abc.abstractmethod
    def clock(self) -> str:
        """The store's clock in a statement: an expression, or the placeholder of the ``now`` parameter."""

    @abc.abstractmethod
    def clock_parameters(self) -> Parameters:
        """The parameters :meth:`clock` needs (``{"now": …}`` where it is a placeholder)."""

    @abc.abstractmethod
    def session(self) -> contextlib.AbstractContextManager[Connection]:
        """The tables' connection, held (serialised) for one call."""

    @abc.abstractmethod
    def add_load(self, connection: Connection) -> None:
        """Give a heartbeat table written before heartbeats carried a load its column (idempotently)."""

    @contextlib.contextmanager
    def query(self, doing: str) -> Iterator[Connection]:
        """The tables' connection for one call; the database's errors become StorageError naming ``doing``."""
        try:
            with self.session() as connection:
                yield connection
        except self.errors as error:
            raise StorageError(
                f"could not {doing} in {self.where}: {type(error).__name__}: {error}"
            ) from error

    # ------------------------------------------------------ the statements

    def create(self, connection: Connection) -> None:
        """Create what is missing of the tables (inside the dialect's creation transaction)."""
        statements = coordination_creation(self)
        connection.execute(statements[0], {})
        self.add_load(connection)
        for statement in statements[1:]:
            connection.execute(statement, {})

    def heartbeats(self, group: str | None = None) -> dict[str, Heartbeat]:
        """Every heartbeat row (of ``group``)."""
        with self.query("read heartbeats") as connection:
            if group is None:
                rows = connection.execute(self._heartbeats, {}).fetchall()
            else:
                rows = connection.execute(self._group, {"group": group}).fetchall()
        return {r[0]: Heartbeat(r[0], r[1], float(r[2]), float(r[3])) for r in rows}

    def loads(self, group: str | None = None) -> dict[str, dict[str, JsonValue]]:
        """The load each engine (of ``group``) reported with its latest beat; unknown ones left out."""
        with self.query("read the engines' loads") as connection:
            if group is None:
                rows = connection.execute(self._loads, {}).fetchall()
            else:
                rows = connection.execute(self._group_loads, {"group": group}).fetchall()
        found = {row[0]: read_load(row[1]) for row in rows}
        return {engine_id: load for engine_id, load in found.items() if load is not None}

    def is_live(self, engine_id: str) -> bool:
        """Whether ``engine_id``'s heartbeat has not expired by the store's clock."""
        with self.query("read a heartbeat") as connection:
            found = connection.execute(
                self._live, {"engine_id": engine_id, **self.clock_parameters()}
            ).fetchone()
        return found is not None and bool(found[0])

    def release(self, root: UUID, holder: str, *, outcome: str, message: str = "") -> bool:
        """End ``holder``'s lease on ``root``."""
        check_outcome(outcome)
        parameters = {"outcome": outcome, "message": message, "root": self.encode_id(root), "holder": holder}
        with self.query("release a recovery lease") as connection:
            return connection.execute(self._release, parameters).rowcount == 1

    def release_many(self, roots: Sequence[UUID], holder: str, *, outcome: str, message: str = "") -> int:
        """End ``holder``'s leases on ``roots`` in one transaction (:meth:`release_rows`)."""
        check_outcome(outcome)
        if not roots:
            return 0
        rows = [
            {"outcome": outcome, "message": message, "root": self.encode_id(root), "holder": holder}
            for root in roots
        ]
        with self.query("release recovery leases") as connection:
            return self.release_rows(connection, self._release, rows)

    @abc.abstractmethod
    def release_rows(self, connection: Connection, statement: str, rows: Sequence[Parameters]) -> int:
        """Run the release ``statement`` once per row in one transaction; the rows it changed."""

    def leases(self) -> list[Lease]:
        """Every lease row."""
        with self.query("read recovery leases") as connection:
            rows = connection.execute(self._leases, {}).fetchall()
        return [Lease(_uuid(r[0]), r[1], float(r[2]), int(r[3]), r[4], r[5]) for r in rows]
