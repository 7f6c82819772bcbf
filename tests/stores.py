"""The stores scenario tests run against: POPO, a SQLite file, and PostgreSQL.

PostgreSQL tests skip with a reason when no server answers at
127.0.0.1:5432, except when ``INCARNATE_REQUIRE_POSTGRES`` is set (CI),
where an unreachable server fails them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from incarnate import Engine, Storage, VirtualClock

STORES = ("popo", "sqlite", "postgres")
PG_HOST = os.environ.get("INCARNATE_TEST_PGHOST", "127.0.0.1")
PG_PORT = int(os.environ.get("INCARNATE_TEST_PGPORT", "5432"))
PG_DBNAME = os.environ.get("INCARNATE_TEST_PGDATABASE", "test")


@functools.cache
def postgres_user() -> str | None:
    """A user that can connect to the test database, or None when no server answers."""
    try:
        import psycopg
    except ImportError:
        return None
    for user in ("postgres", "root"):
        try:
            with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, connect_timeout=3):
                return user
        except psycopg.Error:
            continue
    return None


def require_postgres() -> str:
    """The PostgreSQL user to test with; skips (or fails under CI) when unreachable."""
    user = postgres_user()
    if user is None:
        reason = f"no PostgreSQL server reachable at {PG_HOST}:{PG_PORT}/{PG_DBNAME}"
        if os.environ.get("INCARNATE_REQUIRE_POSTGRES"):
            pytest.fail(f"{reason}, and INCARNATE_REQUIRE_POSTGRES is set")
        pytest.skip(reason)
    return user


def _execute(user: str, statement: str) -> None:
    import psycopg

    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user, autocommit=True) as conn:
        conn.execute(statement)


@contextlib.contextmanager
def storage_for(kind: str, tmp_path: Path) -> Iterator[Storage]:
    """A fresh, empty store of ``kind``, removed afterwards."""
    if kind == "popo":
        storage = Storage.popo(f"test-{uuid.uuid4().hex}")
        try:
            yield storage
        finally:
            storage.forget()
    elif kind == "sqlite":
        yield Storage.sqlite(str(tmp_path / "incarnate.db"))
    elif kind == "postgres":
        user = require_postgres()
        schema = f"t_{uuid.uuid4().hex[:16]}"
        _execute(user, f"CREATE SCHEMA {schema}")
        try:
            yield Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=user, schema=schema)
        finally:
            _execute(user, f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    else:
        raise ValueError(f"unknown store {kind!r}")


# ---------------------------------------------------------------- fixtures
# conftest.py files of the test folders that run on every store import these.

EngineFactory = Callable[..., Engine]


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """An empty store of each kind in turn."""
    with storage_for(request.param, tmp_path) as store:
        yield store


@pytest.fixture
def clock() -> VirtualClock:
    """A virtual clock starting at a fixed epoch time."""
    return VirtualClock(1_700_000_000.0)


@pytest.fixture
def make_engine(storage: Storage, clock: VirtualClock) -> Iterator[EngineFactory]:
    """Build engines over the test's store; every engine is closed at the end."""
    engines: list[Engine] = []

    def build(*args: Any, **kwargs: Any) -> Engine:
        kwargs.setdefault("storage", storage)
        kwargs.setdefault("clock", clock)
        engine = Engine(*args, **kwargs)
        engines.append(engine)
        return engine

    yield build
    for engine in engines:
        engine.close()
