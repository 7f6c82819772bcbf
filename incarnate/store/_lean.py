"""The recorder's hot statements sent through libpq itself: prepared once per connection, binary both ways.

psycopg's cursor spends most of a short statement's client time in Python:
adapting each parameter, looking up its prepared-statement cache, building
the result's loaders and rows. The two statements a durable step sends most
(an instance's events past a version, and the insert of a commit's events)
have fixed parameter types and result columns, so they are sent with
``PGconn.send_query_prepared`` on the pooled connection, with parameters
encoded and results decoded here, in PostgreSQL's binary formats. The
result is awaited as a cursor awaits it (``Connection.wait`` on psycopg's
``execute`` generator): the GIL is free while the server works, and
Ctrl-C — or any exception a signal handler raises — ends the wait at once
and cancels the query on the server. Measured on a loopback connection:
about half the client CPU of a cursor's ``execute``.

Errors come back as psycopg's own exception classes (built from the
result, as a cursor would raise them), so the library's connection context
maps them exactly as before (a unique violation is an ``IntegrityError``).
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections.abc import Sequence
from typing import Any
from uuid import UUID

import psycopg
from eventsourcing.persistence import StoredEvent
from psycopg import errors, generators, pq

UUID_OID = 2950
INT8_OID = 20
TEXT_OID = 25
BYTEA_OID = 17
ARRAY_OIDS = {UUID_OID: 2951, INT8_OID: 1016, TEXT_OID: 1009, BYTEA_OID: 1001}
"""Each element type's one-dimensional array type."""

_INT4 = struct.Struct("!i")
_INT8 = struct.Struct("!q")
_ARRAY_HEADER = struct.Struct("!iiiii")
"""A one-dimensional array without nulls: dimensions, has-null flag, element type, length, lower bound."""

_OK = (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK)


_prepared: weakref.WeakKeyDictionary[Any, dict[bytes, bytes]] = weakref.WeakKeyDictionary()
"""Per connection (its ``PGconn``), the statements prepared there: name → text.

Kept for the whole module, not per :class:`Statement`, so that two
statements of one name (two recorders of one table sharing a pool) never
take each other's preparation for their own.
"""
_prepared_lock = threading.Lock()


class Statement:
    """One statement, prepared on each connection the first time it is sent there.

    ``text`` uses ``$1``… placeholders; ``types`` are the parameters' type
    OIDs. Parameters are sent as binary values and results come back binary.
    """

    def __init__(self, name: str, text: bytes, types: Sequence[int]) -> None:
        self.name = name.encode()
        self.text = text
        self.types = list(types)
        self.formats = [1] * len(types)

    def run(self, connection: psycopg.Connection[Any], params: Sequence[bytes]) -> pq.abc.PGresult:
        """Send the statement on ``connection`` (preparing it there first if needed); its result.

        A connection that lost its prepared statement (a ``DEALLOCATE`` or
        ``DISCARD ALL`` on it) prepares it again, once.
        """
        pgconn = connection.pgconn
        for attempt in (1, 2):
            known = _prepared.get(pgconn)
            if known is None or known.get(self.name) != self.text:
                self._prepare(connection, known is not None and self.name in known)
            pgconn.send_query_prepared(self.name, params, self.formats, 1)
            result = self._wait(connection)
            if result.status in _OK:
                return result
            error = self._error(connection, result)
            if attempt == 1 and isinstance(error, errors.InvalidSqlStatementName):
                self._forget(pgconn)
                continue
            raise error
        raise AssertionError("unreachable")  # pragma: no cover

    def _prepare(self, connection: psycopg.Connection[Any], replace: bool) -> None:
        """Prepare on ``connection``, first dropping a statement of the same name (another text)."""
        pgconn = connection.pgconn
        if replace:
            self._deallocate(connection)
        pgconn.send_prepare(self.name, self.text, self.types)
        result = self._wait(connection)
        if result.status not in _OK:
            error = self._error(connection, result)
            if not isinstance(error, errors.DuplicatePreparedStatement):
                raise error
            # Prepared there by someone this module does not know of: ours replaces it.
            self._deallocate(connection)
            pgconn.send_prepare(self.name, self.text, self.types)
            self._check(connection, self._wait(connection))
        with _prepared_lock:
            _prepared.setdefault(pgconn, {})[self.name] = self.text

    def _deallocate(self, connection: psycopg.Connection[Any]) -> None:
        """Drop the connection's statement of this name, if it still has one."""
        connection.pgconn.send_query(b'DEALLOCATE "' + self.name + b'"')
        result = self._wait(connection)
        if result.status not in _OK:
            error = self._error(connection, result)
            if not isinstance(error, errors.InvalidSqlStatementName):
                raise error

    @staticmethod
    def _wait(connection: psycopg.Connection[Any]) -> pq.abc.PGresult:
        """The sent statement's result, waited for as a cursor waits: Ctrl-C cancels it on the server."""
        results: list[pq.abc.PGresult] = connection.wait(generators.execute(connection.pgconn))
        return results[-1]

    def _forget(self, pgconn: Any) -> None:
        with _prepared_lock:
            known = _prepared.get(pgconn)
            if known is not None:
                known.pop(self.name, None)

    @classmethod
    def _check(cls, connection: psycopg.Connection[Any], result: pq.abc.PGresult) -> None:
        if result.status not in _OK:
            raise cls._error(connection, result)

    @staticmethod
    def _error(connection: psycopg.Connection[Any], result: pq.abc.PGresult) -> errors.Error:
        """The exception a cursor would raise for ``result``.

        A connection lost mid-statement (the server gone, the backend
        terminated) leaves libpq's own message without an SQLSTATE; a
        cursor reports that as an ``OperationalError``, so it is one here
        too — the recorder's retry and the pool's discard depend on it.
        """
        if connection.pgconn.status != pq.ConnStatus.OK:
            message = result.get_error_message(connection.info.encoding) or "the connection was lost"
            return errors.OperationalError(message.strip())
        return errors.error_from_result(result, encoding=connection.info.encoding)


def numbered(query: bytes) -> bytes:
    """A statement rendered with psycopg's binary placeholders (``%b``) in libpq's numbered ones (``$1``…)."""
    parts = query.split(b"%b")
    numbered_parts = [parts[0]]
    for n, part in enumerate(parts[1:], start=1):
        numbered_parts.append(f"${n}".encode() + part)
    return b"".join(numbered_parts)


def int8(value: int) -> bytes:
    """A ``bigint`` parameter."""
    return _INT8.pack(value)


def array(oid: int, items: Sequence[bytes]) -> bytes:
    """A one-dimensional array of non-null binary values of type ``oid``."""
    if not items:
        return struct.pack("!iii", 0, 0, oid)
    parts = [_ARRAY_HEADER.pack(1, 0, oid, len(items), 1)]
    pack = _INT4.pack
    for item in items:
        parts.append(pack(len(item)))
        parts.append(item)
    return b"".join(parts)


def identifier(value: UUID | str, oid: int) -> bytes:
    """An originator id as a binary ``uuid`` (16 bytes) or ``text`` (UTF-8)."""
    if oid == UUID_OID:
        return (value if isinstance(value, UUID) else UUID(str(value))).bytes
    return str(value).encode()


def int8_column(result: pq.abc.PGresult, column: int = 0) -> list[int]:
    """Every row's ``bigint`` in ``column``."""
    value = result.get_value
    return [_INT8.unpack(value(row, column) or b"")[0] for row in range(result.ntuples)]


def stored_events(result: pq.abc.PGresult, oid: int) -> list[StoredEvent]:
    """Rows of (originator_id, originator_version, topic, state) as stored events."""
    value = result.get_value
    rows = []
    for row in range(result.ntuples):
        raw_id = value(row, 0) or b""
        originator: UUID | str = UUID(bytes=raw_id) if oid == UUID_OID else raw_id.decode()
        rows.append(
            StoredEvent(
                originator_id=originator,
                originator_version=_INT8.unpack(value(row, 1) or b"")[0],
                topic=(value(row, 2) or b"").decode(),
                state=value(row, 3) or b"",
            )
        )
    return rows
