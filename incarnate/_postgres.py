"""The PostgreSQL store: the library's factory with timeouts on every wait, and a recorder that never hangs.

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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from eventsourcing.utils import Environment, EnvType, retry

from incarnate.errors import StoreUnreachable

if TYPE_CHECKING:
    from incarnate._storage import Storage

STATEMENT_TIMEOUT_VARIABLE = "POSTGRES_STATEMENT_TIMEOUT"
KEEPALIVES_IDLE = 30
"""Seconds of silence before TCP keepalives probe the server (then 3 probes 10 s apart)."""


class NonPipelinedRecorder(PostgresApplicationRecorder):
    """The library's application recorder, inserting without pipeline mode (see the module's docstring)."""

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """Lock the table, notify, insert and read the notification ids, in one transaction."""
        if self.datastore.enable_db_functions:
            ids: Sequence[int] | None = super().insert_events(stored_events, **kwargs)
            return ids
        with self.datastore.get_connection() as conn, conn.transaction(), conn.cursor() as curs:
            self._insert_events(curs, stored_events, **kwargs)
            if not stored_events:
                return None
            self._insert_stored_events(curs, stored_events, **kwargs)
            return self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)


class Factory(PostgresFactory):
    """The library's PostgreSQL factory, with a connect timeout, a statement timeout and keepalives.

    The library reads ``POSTGRES_CONNECT_TIMEOUT`` as the pool's wait for a
    connection; it is also given to libpq, so connecting to a silent host
    stops too. ``POSTGRES_STATEMENT_TIMEOUT`` (seconds) bounds every
    statement on the server.
    """

    application_recorder_class = NonPipelinedRecorder

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


def check_connection(storage: Storage, connect_timeout: int) -> None:
    """Connect once, directly; raise a :class:`StoreUnreachable` that says why and what to check."""
    try:
        with psycopg.connect(
            host=storage.postgres_host,
            port=storage.postgres_port,
            dbname=storage.postgres_dbname,
            user=storage.postgres_user,
            password=storage.postgres_password,
            connect_timeout=max(2, connect_timeout),
        ):
            return
    except psycopg.Error as error:
        raise unreachable(storage, error) from error


def unreachable(storage: Storage, error: BaseException) -> StoreUnreachable:
    """The connection failure ``error`` as a message naming the server, the database and the fix."""
    host, port = storage.postgres_host, storage.postgres_port
    dbname, user = storage.postgres_dbname, storage.postgres_user
    reason = " ".join(str(error).split())
    if storage.postgres_password:
        reason = reason.replace(storage.postgres_password, "***")
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
