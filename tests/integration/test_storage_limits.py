"""The maximum payload size, the store timeouts, and clear errors for an unreachable PostgreSQL."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import ConfigurationError, Engine, PostgresStorage, Storage
from incarnate._limits import DEFAULT_MAX_PAYLOAD_BYTES
from incarnate.errors import PayloadTooLarge, StorageError, StoreUnreachable
from statechart import Chart, Event, assign, state, transition
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT, EngineFactory, require_postgres, storage_for

LIMIT = 64 * 1024


@attrs.frozen
class Notes:
    """Context of the notes chart: every note it was sent."""

    notes: tuple[str, ...] = ()


def _add(notes: Notes, event: Event) -> Notes:
    return attrs.evolve(notes, notes=(*notes.notes, str(event.data)))


NOTES = Chart("notes", state("open", on=[transition("note", actions=[assign(_add)])]), context=Notes)
"""Keeps every note in its context, so the context grows with each one."""


def _notification_count(engine: Engine) -> int:
    return len(engine.parts.journal.recorder.select_notifications(start=1, limit=1_000_000))


def test_oversized_send_is_refused_before_anything_is_written(make_engine: EngineFactory) -> None:
    """An event over the limit is refused by send(), nothing is stored, and the instance still works."""
    engine = make_engine([NOTES], max_payload_bytes=LIMIT)
    notes = engine.start("notes")
    engine.run_until_idle()
    before = _notification_count(engine)
    with pytest.raises(PayloadTooLarge) as caught:
        engine.send(notes, "note", "x" * (LIMIT + 1))
    message = str(caught.value)
    assert f"{caught.value.size:,} bytes" in message
    assert f"{LIMIT:,} bytes" in message
    assert "INCARNATE_MAX_PAYLOAD_BYTES" in message and "max_payload_bytes" in message
    assert str(notes) in message
    assert _notification_count(engine) == before
    engine.send(notes, "note", "small")
    engine.run_until_idle()
    assert engine.snapshot(notes).context == Notes(("small",))


def test_oversized_start_input_is_refused(make_engine: EngineFactory) -> None:
    """start() with an input over the limit raises and creates no instance."""
    engine = make_engine([NOTES], max_payload_bytes=LIMIT)
    with pytest.raises(PayloadTooLarge):
        engine.start("notes", {"notes": ["y" * (LIMIT + 1)]})
    assert list(engine.parts.journal.instance_ids()) == []
    assert engine.start("notes", {"notes": ["small"]}) in set(engine.parts.journal.instance_ids())


def test_macrostep_growing_past_the_limit_fails_its_instance(make_engine: EngineFactory) -> None:
    """A macrostep whose stored event would exceed the limit fails the instance with an incident instead."""
    engine = make_engine([NOTES], max_payload_bytes=LIMIT)
    notes = engine.start("notes")
    for _ in range(4):
        engine.send(notes, "note", "z" * (LIMIT // 3))
    engine.run_until_idle()
    record = engine.instance(notes).record
    assert record.status is InstanceStatus.FAILED
    assert [incident.kind for incident in record.incidents] == ["payload-too-large"]
    assert "over the maximum payload size" in record.incidents[0].detail
    for event in engine.events_of(notes):
        assert len(engine.parts.journal.mapper.to_stored_event(event).state) <= LIMIT


def test_limit_from_storage_environment_and_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is the Engine argument, else the Storage's, else INCARNATE_MAX_PAYLOAD_BYTES, else 4 MiB."""
    monkeypatch.delenv("INCARNATE_MAX_PAYLOAD_BYTES", raising=False)
    assert Storage.popo().payload_limit() == DEFAULT_MAX_PAYLOAD_BYTES == 4 * 1024 * 1024
    monkeypatch.setenv("INCARNATE_MAX_PAYLOAD_BYTES", "1000")
    assert Storage.popo().payload_limit() == 1000
    assert Storage.popo(max_payload_bytes=2000).payload_limit() == 2000
    assert Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.popo"}).payload_limit() == 1000
    engine = Engine([NOTES], storage=Storage.popo(), max_payload_bytes=3000)
    try:
        assert engine.parts.journal.max_payload_bytes == 3000
    finally:
        engine.close()
    monkeypatch.setenv("INCARNATE_MAX_PAYLOAD_BYTES", "lots")
    with pytest.raises(ConfigurationError, match="INCARNATE_MAX_PAYLOAD_BYTES"):
        Storage.popo().payload_limit()


# ------------------------------------------------------------- PostgreSQL


@pytest.fixture
def postgres(tmp_path: Path) -> Iterator[PostgresStorage]:
    """A fresh schema in the test PostgreSQL database."""
    with storage_for("postgres", tmp_path) as store:
        assert isinstance(store, PostgresStorage)
        yield store


def test_postgres_payload_under_the_default_limit_commits(postgres: Storage) -> None:
    """A 3 MiB payload commits on PostgreSQL under the default limit."""
    engine = Engine([NOTES], storage=postgres)
    try:
        notes = engine.start("notes")
        engine.send(notes, "note", "p" * (3 * 1024 * 1024))
        assert len(engine.instance(notes).record.inbox) == 1
    finally:
        engine.close()


def test_postgres_large_payload_commits_without_hanging(postgres: PostgresStorage) -> None:
    """A 12 MB event commits on PostgreSQL with a raised limit, within a bounded time (it used to hang)."""
    script = textwrap.dedent(
        f"""
        import time
        from incarnate import Engine, Storage
        from tests.integration.test_storage_limits import NOTES
        storage = Storage.postgres(
            {postgres.dbname!r}, host={postgres.host!r}, port={postgres.port},
            user={postgres.user!r}, schema={postgres.schema!r},
            max_payload_bytes=64 * 1024 * 1024,
        )
        engine = Engine([NOTES], storage=storage)
        notes = engine.start("notes")
        engine.send(notes, "note", "q" * 12_000_000)
        assert len(engine.instance(notes).record.inbox) == 1
        engine.close()
        print("committed")
        """
    )
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], check=False, cwd=root, capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a 12 MB event did not commit on PostgreSQL within 60 s")
    assert done.returncode == 0, done.stderr
    assert "committed" in done.stdout


def test_postgres_timeouts_are_set(postgres: PostgresStorage) -> None:
    """PostgreSQL connections have statement, lock, idle-in-transaction and connect timeouts."""
    engine = Engine([NOTES], storage=attrs.evolve(postgres, statement_timeout=7))
    try:
        datastore = engine.parts.journal.factory.datastore  # type: ignore[attr-defined]
        assert datastore.lock_timeout == 10
        assert datastore.idle_in_transaction_session_timeout == 5
        assert datastore.pool.timeout == 5
        assert datastore.pool.kwargs["connect_timeout"] == 5
        with datastore.get_connection() as connection:
            assert connection.execute("SHOW statement_timeout").fetchone()["statement_timeout"] == "7s"
    finally:
        engine.close()


def test_sqlite_lock_timeout_is_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite writers wait 30 s for the lock by default, or the configured time."""
    monkeypatch.delenv("SQLITE_LOCK_TIMEOUT", raising=False)
    assert Storage.sqlite(str(tmp_path / "a.db")).env()["SQLITE_LOCK_TIMEOUT"] == "30"
    assert Storage.sqlite(str(tmp_path / "a.db"), lock_timeout=3).env()["SQLITE_LOCK_TIMEOUT"] == "3"


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _chain(error: BaseException) -> str:
    texts = []
    current: BaseException | None = error
    while current is not None:
        texts.append(str(current))
        current = current.__cause__ or current.__context__
    return "\n".join(texts)


def test_unreachable_postgres_fails_fast_naming_the_server() -> None:
    """An unreachable server fails Engine() in seconds, naming host, port and database, not the password."""
    port = _closed_port()
    storage = Storage.postgres("orders", host="127.0.0.1", port=port, password="s3cret-Pa55")
    started = time.monotonic()
    with pytest.raises(StoreUnreachable) as caught:
        Engine([NOTES], storage=storage)
    assert time.monotonic() - started < 10
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "'orders'" in message
    assert f"pg_isready -h 127.0.0.1 -p {port}" in message
    assert "s3cret-Pa55" not in _chain(caught.value)


def test_missing_database_is_named_as_missing() -> None:
    """A database that does not exist is reported as missing, with the createdb command."""
    user = require_postgres()
    dbname = f"incarnate_missing_{uuid.uuid4().hex[:8]}"
    storage = Storage.postgres(dbname, host=PG_HOST, port=PG_PORT, user=user, password="s3cret-Pa55")
    with pytest.raises(StoreUnreachable) as caught:
        Engine([NOTES], storage=storage)
    message = str(caught.value)
    assert f"database {dbname!r} does not exist on {PG_HOST}:{PG_PORT}" in message
    assert f"createdb -h {PG_HOST} -p {PG_PORT} -U {user} {dbname}" in message
    assert "s3cret-Pa55" not in _chain(caught.value)


def test_missing_schema_is_named_with_the_statement_that_creates_it() -> None:
    """A schema the database lacks is named, with its CREATE SCHEMA; nothing is created elsewhere."""
    import psycopg

    user = require_postgres()
    schema = f"incarnate_missing_{uuid.uuid4().hex[:8]}"
    storage = Storage.from_url(f"postgresql://{user}@{PG_HOST}:{PG_PORT}/{PG_DBNAME}?schema={schema}")
    with pytest.raises(StorageError) as caught:
        Engine([NOTES], storage=storage)
    message = str(caught.value)
    assert f"schema {schema!r} does not exist in database {PG_DBNAME!r} on {PG_HOST}:{PG_PORT}" in message
    assert f'CREATE SCHEMA "{schema}"' in message and "?schema=NAME" in message
    with psycopg.connect(host=PG_HOST, port=PG_PORT, dbname=PG_DBNAME, user=user) as connection:
        assert (
            connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone() is None
        )


def test_refused_user_is_named() -> None:
    """A user the server refuses is named in the error, with what to check."""
    require_postgres()
    user = f"nobody_{uuid.uuid4().hex[:8]}"
    storage = Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=user, password="s3cret-Pa55")
    with pytest.raises(StoreUnreachable) as caught:
        Engine([NOTES], storage=storage)
    message = str(caught.value)
    assert f"refused user {user!r}" in message and "POSTGRES_USER" in message
    assert "s3cret-Pa55" not in _chain(caught.value)
