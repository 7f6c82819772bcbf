"""Storage configuration: the eventsourcing persistence modules, as settings or env vars.

The engine stores everything through ``eventsourcing``: POPO (in memory,
for tests), SQLite (a file; the embedded default) or PostgreSQL (engine
groups). The same environment variables the library reads
(``PERSISTENCE_MODULE``, ``SQLITE_DBNAME``, ``POSTGRES_*``) configure it;
:class:`Storage` is the programmatic equivalent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import attrs

from engine.errors import ConfigurationError

DEFAULT_SQLITE_PATH = "incarnate.db"

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

    @classmethod
    def popo(cls, name: str = "") -> Storage:
        """In memory: nothing survives the process (tests).

        Engines given the same non-empty ``name`` share one in-memory store,
        so a test can stop an engine and start a fresh one over the same data.
        """
        return cls("popo", memory_name=name)

    @classmethod
    def sqlite(cls, path: str = DEFAULT_SQLITE_PATH) -> Storage:
        """A SQLite file (WAL mode)."""
        return cls("sqlite", sqlite_path=path)

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
    ) -> Storage:
        """A PostgreSQL database."""
        return cls(
            "postgres",
            postgres_dbname=dbname,
            postgres_host=host,
            postgres_port=port,
            postgres_user=user,
            postgres_password=password,
            postgres_schema=schema,
            create_tables=create_tables,
        )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Storage:
        """Read the eventsourcing variables; SQLite at ``./incarnate.db`` when none are set."""
        env = os.environ if environ is None else environ
        module = env.get("PERSISTENCE_MODULE", "")
        kind = next((k for k, m in _MODULES.items() if m == module or k == module), None)
        if module and kind is None:
            raise ConfigurationError(
                f"PERSISTENCE_MODULE={module!r} is not supported; use one of {sorted(_MODULES.values())}"
            )
        if kind is None or kind == "sqlite":
            return cls.sqlite(env.get("SQLITE_DBNAME", DEFAULT_SQLITE_PATH))
        if kind == "popo":
            return cls.popo()
        return cls.postgres(
            env.get("POSTGRES_DBNAME", "test"),
            host=env.get("POSTGRES_HOST", "127.0.0.1"),
            port=int(env.get("POSTGRES_PORT", "5432")),
            user=env.get("POSTGRES_USER", "postgres"),
            password=env.get("POSTGRES_PASSWORD", ""),
            schema=env.get("POSTGRES_SCHEMA", ""),
            create_tables=env.get("CREATE_TABLE", "y").lower() in ("y", "yes", "true", "1", "on"),
        )

    def env(self) -> dict[str, str]:
        """The eventsourcing environment for this storage."""
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
            env["SQLITE_LOCK_TIMEOUT"] = "30"
        elif self.kind == "postgres":
            env.update(
                POSTGRES_DBNAME=self.postgres_dbname,
                POSTGRES_HOST=self.postgres_host,
                POSTGRES_PORT=str(self.postgres_port),
                POSTGRES_USER=self.postgres_user,
                POSTGRES_PASSWORD=self.postgres_password,
                CREATE_TABLE="y" if self.create_tables else "n",
            )
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
