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
from collections.abc import Mapping

import attrs

from incarnate._limits import DEFAULT_MAX_PAYLOAD_BYTES, MAX_PAYLOAD_VARIABLE, setting
from incarnate.errors import ConfigurationError

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

_POSTGRES_FACTORY = "incarnate._postgres:Factory"
_TIMEOUT_VARIABLES = {
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


@attrs.frozen
class Storage:
    """Where an engine keeps its events."""

    kind: str = "sqlite"
    sqlite_path: str = DEFAULT_SQLITE_PATH
    postgres_dbname: str = "test"
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
        dbname: str = "test",
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
        """A PostgreSQL database; the timeouts are in whole seconds."""
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
        if module == _POSTGRES_FACTORY:
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
        timeouts = {name: _optional(env, variable) for name, (variable, _) in _TIMEOUT_VARIABLES.items()}
        return cls.postgres(
            env.get("POSTGRES_DBNAME", "test"),
            host=env.get("POSTGRES_HOST", "127.0.0.1"),
            port=int(env.get("POSTGRES_PORT", "5432")),
            user=env.get("POSTGRES_USER", "postgres"),
            password=env.get("POSTGRES_PASSWORD", ""),
            schema=env.get("POSTGRES_SCHEMA", ""),
            create_tables=env.get("CREATE_TABLE", "y").lower() in ("y", "yes", "true", "1", "on"),
            max_payload_bytes=limit,
            **timeouts,
        )

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
        variable, default = _TIMEOUT_VARIABLES[name]
        value: int | None = getattr(self, name)
        return setting(value, variable, default, env)

    def env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """The eventsourcing environment for this storage (``environ`` fills unset timeouts)."""
        if self.kind not in _MODULES:
            raise ConfigurationError(f"storage kind {self.kind!r} is not one of {sorted(_MODULES)}")
        env = {"PERSISTENCE_MODULE": _MODULES[self.kind]}
        if self.kind == "sqlite":
            if self.sqlite_path in (":memory:", ""):
                raise ConfigurationError(
                    "a plain ':memory:' SQLite database is empty for every pooled connection; use "
                    "Storage.popo() for memory, or 'file:NAME?mode=memory&cache=shared'"
                )
            env["SQLITE_DBNAME"] = self.sqlite_path
            env["SQLITE_LOCK_TIMEOUT"] = str(self.timeout("lock_timeout", environ))
        elif self.kind == "postgres":
            env.update(
                POSTGRES_DBNAME=self.postgres_dbname,
                POSTGRES_HOST=self.postgres_host,
                POSTGRES_PORT=str(self.postgres_port),
                POSTGRES_USER=self.postgres_user,
                POSTGRES_PASSWORD=self.postgres_password,
                CREATE_TABLE="y" if self.create_tables else "n",
            )
            env["PERSISTENCE_MODULE"] = _POSTGRES_FACTORY
            for name, (variable, _) in _TIMEOUT_VARIABLES.items():
                env[variable] = str(self.timeout(name, environ))
            if self.postgres_schema:
                env["POSTGRES_SCHEMA"] = self.postgres_schema
        env.update(dict(self.extra))
        return env

    def describe(self) -> str:
        """A one-line description for logs and the CLI."""
        if self.kind == "sqlite":
            return f"SQLite file {self.sqlite_path}"
        if self.kind == "postgres":
            where = f"{self.postgres_host}:{self.postgres_port}/{self.postgres_dbname}"
            return f"PostgreSQL {self.postgres_user}@{where}"
        return "in-memory (POPO)"


def _optional(env: Mapping[str, str], variable: str) -> int | None:
    """An optional whole-number setting from the environment (None when unset or empty)."""
    raw = env.get(variable, "").strip()
    return setting(None, variable, 0, {variable: raw}) if raw else None
