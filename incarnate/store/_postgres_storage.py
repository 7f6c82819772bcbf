"""The PostgreSQL store's settings: read and written without ``psycopg``, which only :meth:`open` needs.

The adapter itself (:mod:`incarnate.store._postgres`) imports ``psycopg``, an
optional dependency, so the settings live here: a URL or the environment
names a PostgreSQL store on a machine without the driver, and only opening
it asks for ``pip install 'incarnate[postgres]'``.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import ClassVar
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
from eventsourcing.utils import resolve_topic

from incarnate._limits import MAX_PAYLOAD_VARIABLE
from incarnate._storage import Storage, accepted_forms, optional_setting, without_password
from incarnate.errors import ConfigurationError
from incarnate.store._port import Store

ADAPTER = "incarnate.store._postgres:PostgresStore"
"""The adapter, imported on first use: it imports ``psycopg`` (and this module)."""
POSTGRES_FACTORY = "incarnate.store._postgres:Factory"
"""The ``PERSISTENCE_MODULE`` topic of the PostgreSQL factory (importable without ``psycopg``)."""
FORMER_POSTGRES_FACTORY = "incarnate._postgres:Factory"
"""Where the factory lived before the store adapters; still accepted from the environment."""

DEFAULT_CONNECT_TIMEOUT = 5
"""Seconds to wait for a PostgreSQL connection (libpq's connect and the pool's wait)."""
DEFAULT_STATEMENT_TIMEOUT = 60
"""Seconds any one PostgreSQL statement may run; the engine's statements take milliseconds."""
DEFAULT_LOCK_TIMEOUT = 10
"""Seconds to wait for the events table's write lock, which each commit holds for milliseconds."""
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = 5
"""Seconds the server keeps a transaction whose client went quiet (the library's default)."""
TIMEOUT_VARIABLES: Mapping[str, tuple[str, int]] = {
    "connect_timeout": ("POSTGRES_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT),
    "statement_timeout": ("POSTGRES_STATEMENT_TIMEOUT", DEFAULT_STATEMENT_TIMEOUT),
    "lock_timeout": ("POSTGRES_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT),
    "idle_in_transaction_timeout": (
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT",
        DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    ),
}
_IMPORT_LOCK = threading.Lock()


def _hidden(password: str) -> str:
    return "'***'" if password else "''"


@attrs.frozen
class PostgresStorage(Storage):
    """A PostgreSQL database (engine groups): the events, the listing and the coordination, in one schema.

    There is no default database: ``dbname`` is required. The timeouts are
    whole seconds (see :attr:`~incarnate.Storage.timeouts`). The password is
    a secret: it is never in :meth:`describe`, :meth:`url` or the repr.
    """

    schemes: ClassVar[tuple[str, ...]] = ("postgresql", "postgres")
    modules: ClassVar[tuple[str, ...]] = (
        "eventsourcing.postgres",
        "postgres",
        POSTGRES_FACTORY,
        FORMER_POSTGRES_FACTORY,
    )
    url_form: ClassVar[str] = "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA]"
    timeouts: ClassVar[Mapping[str, tuple[str, int]]] = TIMEOUT_VARIABLES

    dbname: str
    host: str = attrs.field(default="127.0.0.1", kw_only=True)
    port: int = attrs.field(default=5432, kw_only=True)
    user: str = attrs.field(default="postgres", kw_only=True)
    password: str = attrs.field(default="", kw_only=True, repr=_hidden)
    schema: str = attrs.field(default="", kw_only=True)
    create_tables: bool = attrs.field(default=True, kw_only=True)
    connect_timeout: int | None = attrs.field(default=None, kw_only=True)
    statement_timeout: int | None = attrs.field(default=None, kw_only=True)
    lock_timeout: int | None = attrs.field(default=None, kw_only=True)
    idle_in_transaction_timeout: int | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if not self.dbname:
            raise ConfigurationError(
                "Storage.postgres needs the database name: Storage.postgres('orders', host=...) "
                "(there is no default database)"
            )

    @classmethod
    def parse_url(cls, text: str) -> PostgresStorage:
        """``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA]`` (``postgres://`` too)."""
        try:
            parts = urlsplit(text)
        except ValueError as error:  # an unclosed IPv6 bracket, say
            raise ConfigurationError(
                f"store URL is malformed ({error}); write an IPv6 host in brackets, "
                f"postgresql://user@[::1]:5432/db; give {accepted_forms()}"
            ) from error
        shown = without_password(text, parts.password)
        try:
            port = parts.port or 5432
        except ValueError as error:
            raise ConfigurationError(
                f"store URL {shown!r} has a bad port ({error}); give {accepted_forms()}"
            ) from error
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not dbname or "/" in dbname:
            raise ConfigurationError(
                f"store URL {shown!r} needs a host and a database name; give {accepted_forms()}"
            )
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - {"schema"})
        if unknown:
            raise ConfigurationError(
                f"store URL {shown!r} has unsupported parameters {unknown}; only ?schema=NAME is accepted"
            )
        return cls(
            dbname,
            host=parts.hostname,
            port=port,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password or ""),
            schema=query.get("schema", [""])[-1],
        )

    @classmethod
    def parse_env(cls, env: Mapping[str, str]) -> PostgresStorage:
        """``POSTGRES_DBNAME`` (required), ``POSTGRES_HOST``, ``…_PORT``, ``…_USER``, ``…_PASSWORD``,
        ``…_SCHEMA``, ``CREATE_TABLE`` and the timeouts."""
        dbname = env.get("POSTGRES_DBNAME", "").strip()
        if not dbname:
            module = env.get("PERSISTENCE_MODULE", "")
            raise ConfigurationError(
                f"PERSISTENCE_MODULE={module!r} needs POSTGRES_DBNAME, the database to use "
                "(there is no default database); set it, e.g. POSTGRES_DBNAME=orders"
            )
        timeout = {name: optional_setting(env, variable) for name, (variable, _) in TIMEOUT_VARIABLES.items()}
        return cls(
            dbname,
            host=env.get("POSTGRES_HOST", "127.0.0.1"),
            port=int(env.get("POSTGRES_PORT", "5432")),
            user=env.get("POSTGRES_USER", "postgres"),
            password=env.get("POSTGRES_PASSWORD", ""),
            schema=env.get("POSTGRES_SCHEMA", ""),
            create_tables=env.get("CREATE_TABLE", "y").lower() in ("y", "yes", "true", "1", "on"),
            max_payload_bytes=optional_setting(env, MAX_PAYLOAD_VARIABLE),
            connect_timeout=timeout["connect_timeout"],
            statement_timeout=timeout["statement_timeout"],
            lock_timeout=timeout["lock_timeout"],
            idle_in_transaction_timeout=timeout["idle_in_transaction_timeout"],
        )

    def open(self) -> Store:
        """The PostgreSQL adapter; a :class:`ConfigurationError` when ``psycopg`` is not installed."""
        try:
            with _IMPORT_LOCK:
                adapter = resolve_topic(ADAPTER)
        except ImportError as error:
            raise ConfigurationError(
                f"the PostgreSQL store needs a package that is not installed ({error}); "
                "install it with `pip install 'incarnate[postgres]'`"
            ) from error
        store: Store = adapter(self)
        return store

    def describe(self) -> str:
        """``PostgreSQL USER@HOST:PORT/DBNAME`` (and the schema when set): never the password."""
        schema = f" schema {self.schema}" if self.schema else ""
        return f"PostgreSQL {self.user}@{self.host}:{self.port}/{self.dbname}{schema}"

    def url(self) -> str:
        """``postgresql://USER@HOST:PORT/DBNAME[?schema=S]``, without the password."""
        query = f"?schema={self.schema}" if self.schema else ""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{self.dbname}{query}"

    def secrets(self) -> tuple[str, ...]:
        """The password, when there is one."""
        return (self.password,) if self.password else ()
