"""Storage configuration: the eventsourcing persistence modules, as settings or env vars.

The engine stores everything through ``eventsourcing``: POPO (in memory,
for tests), SQLite (a file; the embedded default) or PostgreSQL (engine
groups). The same environment variables the library reads
(``PERSISTENCE_MODULE``, ``SQLITE_DBNAME``, ``POSTGRES_*``) configure it;
:class:`Storage` is the programmatic equivalent.

Nothing waits on the store without a bound: each timeout and the maximum
payload size is the value given to :class:`Storage`, else its environment
variable, else a documented default (``docs/reference/configuration.md``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, unquote, urlsplit

import attrs
from eventsourcing.utils import resolve_topic

from incarnate._limits import DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_VARIABLE, setting
from incarnate.errors import ConfigurationError
from incarnate.store._sql import POSTGRES_FACTORY

if TYPE_CHECKING:
    from incarnate.store._port import Store

DEFAULT_SQLITE_PATH = "incarnate.db"

DEFAULT_CONNECT_TIMEOUT = 5
"""Seconds to wait for a PostgreSQL connection (libpq's connect and the pool's wait)."""
DEFAULT_STATEMENT_TIMEOUT = 60
"""Seconds any one PostgreSQL statement may run; the engine's statements take milliseconds."""
DEFAULT_POSTGRES_LOCK_TIMEOUT = 10
"""Seconds to wait for the events table's write lock, which each commit holds for milliseconds."""
DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT = 5
"""Seconds the server keeps a transaction whose client went quiet (the library's default)."""
DEFAULT_SQLITE_LOCK_TIMEOUT = 30
"""Seconds a SQLite writer waits for the database lock."""

_FORMER_POSTGRES_FACTORY = "incarnate._postgres:Factory"
"""Where the factory lived before the store adapters; still accepted from the environment."""

_ADAPTERS = {
    "popo": "incarnate.store._memory:MemoryStore",
    "sqlite": "incarnate.store._sqlite:SQLiteStore",
    "postgres": "incarnate.store._postgres:PostgresStore",
}
"""The one place a store kind is decided: each kind's adapter class (imported on first use, so
``psycopg`` stays optional)."""
_ADAPTERS_LOCK = threading.Lock()
URL_FORMS = (
    "a SQLite file path (or sqlite:///PATH), or "
    "postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA]"
)
TIMEOUT_VARIABLES = {
    "connect_timeout": ("POSTGRES_CONNECT_TIMEOUT", DEFAULT_CONNECT_TIMEOUT),
    "statement_timeout": ("POSTGRES_STATEMENT_TIMEOUT", DEFAULT_STATEMENT_TIMEOUT),
    "lock_timeout": ("POSTGRES_LOCK_TIMEOUT", DEFAULT_POSTGRES_LOCK_TIMEOUT),
    "idle_in_transaction_timeout": (
        "POSTGRES_IDLE_IN_TRANSACTION_SESSION_TIMEOUT",
        DEFAULT_IDLE_IN_TRANSACTION_TIMEOUT,
    ),
}

_MODULES = {
    "popo": "eventsourcing.popo",
    "sqlite": "eventsourcing.sqlite",
    "postgres": "eventsourcing.postgres",
}
"""The ``PERSISTENCE_MODULE`` values :meth:`Storage.from_env` accepts, by kind."""


@attrs.frozen
class Storage:
    """Where an engine keeps its events."""

    kind: str = "sqlite"
    sqlite_path: str = DEFAULT_SQLITE_PATH
    postgres_dbname: str = ""
    postgres_host: str = "127.0.0.1"
    postgres_port: int = 5432
    postgres_user: str = "postgres"
    postgres_password: str = ""
    postgres_schema: str = ""
    create_tables: bool = True
    memory_name: str = ""
    extra: tuple[tuple[str, str], ...] = ()
    max_payload_bytes: int | None = None
    connect_timeout: int | None = None
    statement_timeout: int | None = None
    lock_timeout: int | None = None
    idle_in_transaction_timeout: int | None = None

    @classmethod
    def popo(cls, name: str = "", *, max_payload_bytes: int | None = None) -> Storage:
        """In memory: nothing survives the process (tests).

        Engines given the same non-empty ``name`` share one in-memory store,
        so a test can stop an engine and start a fresh one over the same data.
        """
        return cls("popo", memory_name=name, max_payload_bytes=max_payload_bytes)

    @classmethod
    def sqlite(
        cls,
        path: str = DEFAULT_SQLITE_PATH,
        *,
        max_payload_bytes: int | None = None,
        lock_timeout: int | None = None,
    ) -> Storage:
        """A SQLite file (WAL mode)."""
        return cls("sqlite", sqlite_path=path, max_payload_bytes=max_payload_bytes, lock_timeout=lock_timeout)

    @classmethod
    def postgres(
        cls,
        dbname: str,
        *,
        host: str = "127.0.0.1",
        port: int = 5432,
        user: str = "postgres",
        password: str = "",
        schema: str = "",
        create_tables: bool = True,
        max_payload_bytes: int | None = None,
        connect_timeout: int | None = None,
        statement_timeout: int | None = None,
        lock_timeout: int | None = None,
        idle_in_transaction_timeout: int | None = None,
    ) -> Storage:
        """A PostgreSQL database named ``dbname``; the timeouts are in whole seconds."""
        if not dbname:
            raise ConfigurationError(
                "Storage.postgres needs the database name: Storage.postgres('orders', host=...) "
                "(there is no default database)"
            )
        return cls(
            "postgres",
            postgres_dbname=dbname,
            postgres_host=host,
            postgres_port=port,
            postgres_user=user,
            postgres_password=password,
            postgres_schema=schema,
            create_tables=create_tables,
            max_payload_bytes=max_payload_bytes,
            connect_timeout=connect_timeout,
            statement_timeout=statement_timeout,
            lock_timeout=lock_timeout,
            idle_in_transaction_timeout=idle_in_transaction_timeout,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Storage:
        """Read the eventsourcing variables; SQLite at ``./incarnate.db`` when none are set."""
        env = os.environ if environ is None else environ
        module = env.get("PERSISTENCE_MODULE", "")
        kind = next((k for k, m in _MODULES.items() if module in (m, k)), None)
        if module in (POSTGRES_FACTORY, _FORMER_POSTGRES_FACTORY):
            kind = "postgres"
        if module and kind is None:
            raise ConfigurationError(
                f"PERSISTENCE_MODULE={module!r} is not supported; use one of {sorted(_MODULES.values())}"
            )
        limit = _optional(env, MAX_PAYLOAD_VARIABLE)
        if kind is None or kind == "sqlite":
            return cls.sqlite(
                env.get("SQLITE_DBNAME", DEFAULT_SQLITE_PATH),
                max_payload_bytes=limit,
                lock_timeout=_optional(env, "SQLITE_LOCK_TIMEOUT"),
            )
        if kind == "popo":
            return cls.popo(max_payload_bytes=limit)
        timeouts = {name: _optional(env, variable) for name, (variable, _) in TIMEOUT_VARIABLES.items()}
        dbname = env.get("POSTGRES_DBNAME", "").strip()
        if not dbname:
            raise ConfigurationError(
                f"PERSISTENCE_MODULE={module!r} needs POSTGRES_DBNAME, the database to use "
                "(there is no default database); set it, e.g. POSTGRES_DBNAME=orders"
            )
        return cls.postgres(
            dbname,
            host=env.get("POSTGRES_HOST", "127.0.0.1"),
            port=int(env.get("POSTGRES_PORT", "5432")),
            user=env.get("POSTGRES_USER", "postgres"),
            password=env.get("POSTGRES_PASSWORD", ""),
            schema=env.get("POSTGRES_SCHEMA", ""),
            create_tables=env.get("CREATE_TABLE", "y").lower() in ("y", "yes", "true", "1", "on"),
            max_payload_bytes=limit,
            **timeouts,
        )

    @classmethod
    def from_url(cls, text: str) -> Storage:
        """A store named the way ``--db`` takes it.

        A SQLite file path (``work/incarnate.db``) or ``sqlite:///PATH``
        (``sqlite:////abs/path.db`` for an absolute path), or
        ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME[?schema=SCHEMA]``
        (``postgres://`` too). Anything else raises a
        :class:`ConfigurationError` naming the accepted forms; a password is
        never repeated in it.
        """
        text = text.strip()
        scheme, separator, _ = text.partition("://")
        if not separator:
            if not text:
                raise ConfigurationError(f"an empty store name; give {URL_FORMS}")
            return cls.sqlite(text)
        scheme = scheme.lower()
        if scheme == "sqlite":
            path = text[len("sqlite:///") :] if text.lower().startswith("sqlite:///") else ""
            if not path:
                raise ConfigurationError(
                    f"store URL {text!r} names no file: write sqlite:///relative.db or "
                    f"sqlite:////absolute/path.db; accepted: {URL_FORMS}"
                )
            return cls.sqlite(path)
        if scheme in ("postgresql", "postgres"):
            return cls._from_postgres_url(text)
        raise ConfigurationError(f"store URL scheme {scheme!r} is not supported; give {URL_FORMS}")

    @classmethod
    def _from_postgres_url(cls, text: str) -> Storage:
        try:
            parts = urlsplit(text)
        except ValueError as error:  # an unclosed IPv6 bracket, say
            raise ConfigurationError(
                f"store URL is malformed ({error}); write an IPv6 host in brackets, "
                f"postgresql://user@[::1]:5432/db; give {URL_FORMS}"
            ) from error
        shown = _without_password(text, parts.password)
        try:
            port = parts.port or 5432
        except ValueError as error:
            raise ConfigurationError(
                f"store URL {shown!r} has a bad port ({error}); give {URL_FORMS}"
            ) from error
        dbname = unquote(parts.path.lstrip("/"))
        if not parts.hostname or not dbname or "/" in dbname:
            raise ConfigurationError(
                f"store URL {shown!r} needs a host and a database name; give {URL_FORMS}"
            )
        query = parse_qs(parts.query, keep_blank_values=True)
        unknown = sorted(set(query) - {"schema"})
        if unknown:
            raise ConfigurationError(
                f"store URL {shown!r} has unsupported parameters {unknown}; only ?schema=NAME is accepted"
            )
        return cls.postgres(
            dbname,
            host=parts.hostname,
            port=port,
            user=unquote(parts.username or "postgres"),
            password=unquote(parts.password or ""),
            schema=query.get("schema", [""])[-1],
        )

    def url(self) -> str:
        """This storage as a ``--db`` value (:meth:`from_url` reads it back), its password left out."""
        return self.open().url()

    def open(self) -> Store:
        """The adapter of this storage's kind: the one place the kind is decided."""
        topic = _ADAPTERS.get(self.kind)
        if topic is None:
            raise ConfigurationError(f"storage kind {self.kind!r} is not one of {sorted(_ADAPTERS)}")
        try:
            with _ADAPTERS_LOCK:
                adapter = resolve_topic(topic)
        except ImportError as error:
            raise ConfigurationError(
                f"the {self.kind} store needs a package that is not installed ({error}); "
                "install it with `pip install 'incarnate[postgres]'`"
            ) from error
        store: Store = adapter(self)
        return store

    def payload_limit(self, environ: Mapping[str, str] | None = None) -> int:
        """The maximum encoded size of one stored event, in bytes.

        ``max_payload_bytes`` when set, else ``INCARNATE_MAX_PAYLOAD_BYTES``,
        else 4 MiB.
        """
        env = os.environ if environ is None else environ
        return setting(self.max_payload_bytes, MAX_PAYLOAD_VARIABLE, DEFAULT_MAX_PAYLOAD_BYTES, env)

    def timeout(self, name: str, environ: Mapping[str, str] | None = None) -> int:
        """A timeout in seconds (``connect_timeout``, ``statement_timeout``, ``lock_timeout``, ...).

        The value given to this Storage when set, else its environment
        variable, else the default.
        """
        env = os.environ if environ is None else environ
        if self.kind == "sqlite" and name == "lock_timeout":
            return setting(self.lock_timeout, "SQLITE_LOCK_TIMEOUT", DEFAULT_SQLITE_LOCK_TIMEOUT, env)
        variable, default = TIMEOUT_VARIABLES[name]
        value: int | None = getattr(self, name)
        return setting(value, variable, default, env)

    def env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The eventsourcing environment for this storage (``environ`` fills unset timeouts)."""
        env = self.open().environment(environ)
        env.update(dict(self.extra))
        return env

    def describe(self) -> str:
        """A one-line description for logs and the CLI (never a password)."""
        return self.open().describe()


def _without_password(text: str, password: str | None) -> str:
    """``text`` with its password (when it has one) shown as ``***``."""
    if not password:
        return text
    return text.replace(f":{password}@", ":***@", 1).replace(password, "***")


def _optional(env: Mapping[str, str], variable: str) -> int | None:
    """An optional whole-number setting from the environment (None when unset or empty)."""
    raw = env.get(variable, "").strip()
    return setting(None, variable, 0, {variable: raw}) if raw else None
