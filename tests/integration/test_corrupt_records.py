"""Decode or park: a stored record that does not decode parks its call tree; every other tree recovers.

Each test builds a store with an engine (two ``gate`` roots, one of them with
an accepted but unprocessed ``answer``, and a ``parent`` with one ``kid``),
corrupts one stored record with raw SQL on the SQLite file or the PostgreSQL
schema, then recovers with fresh engines and drives the command line.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs
import pytest

from aggregates import InstanceStatus
from aggregates.errors import CorruptRecord
from incarnate import Engine, PostgresStorage, SQLiteStorage, Storage, VirtualClock
from incarnate._snapshots import TolerantZlib
from incarnate.cli import main
from tests.scenarios import charts
from tests.stores import storage_for
from tests.unit.incarnate.sample_charts import TASKS

STORES = ("sqlite", "postgres")
CHARTS = "tests.scenarios.charts:ALL"
TASKS_PATH = "tests.unit.incarnate.sample_charts:TASKS"


@attrs.frozen
class Built:
    """The store as the first engine left it."""

    storage: Storage
    healthy: UUID
    """A gate whose ``answer`` was accepted and not yet processed."""
    other: UUID
    """A second gate (the one most corruptions hit)."""
    parent: UUID
    kid: UUID


def engine_over(storage: Storage, **kwargs: Any) -> Engine:
    """A fresh engine over ``storage`` with the scenario charts."""
    return Engine(charts.ALL, TASKS, storage=storage, clock=VirtualClock(1_700_000_000.0), **kwargs)


def build(storage: Storage, *, listed: bool = False, **kwargs: Any) -> Built:
    """Start the trees, accept one event without processing it, and close the engine.

    With ``listed`` the listing has caught up first; otherwise a fresh engine folds every
    record into it after the corruption.
    """
    engine = engine_over(storage, **kwargs)
    try:
        healthy = engine.start("gate")
        other = engine.start("gate")
        parent = engine.start("parent", {"members": ["a"]})
        engine.run_until_idle()
        kid = engine.children(parent)[0].id
        engine.send(healthy, "answer", "yes")
        if listed:
            engine.listing.catch_up()
    finally:
        engine.close()
    return Built(storage, healthy, other, parent, kid)


# ------------------------------------------------------------ raw access


class Raw:
    """Raw SQL on the store's own tables (events, snapshots, listing), without the engine."""

    def __init__(self, storage: Storage) -> None:
        assert isinstance(storage, SQLiteStorage | PostgresStorage)
        self.storage = storage
        self.sqlite = isinstance(storage, SQLiteStorage)
        if isinstance(storage, SQLiteStorage):
            self.events, self.snapshots = "stored_events", "stored_snapshots"
        else:
            tables = [
                row[0]
                for row in self.query(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (storage.schema,)
                )
            ]
            self.events = next(t for t in tables if t.endswith("_events"))
            self.snapshots = next((t for t in tables if t.endswith("_snapshots")), "")

    @contextlib.contextmanager
    def _connection(self) -> Iterator[Any]:
        storage = self.storage
        if isinstance(storage, SQLiteStorage):
            lite = sqlite3.connect(storage.path)
            try:
                with lite:
                    yield lite
            finally:
                lite.close()
        else:
            import psycopg

            with psycopg.connect(
                host=storage.host,
                port=storage.port,
                dbname=storage.dbname,
                user=storage.user,
                options=f"-c search_path={storage.schema}",
                autocommit=True,
            ) as connection:
                yield connection

    def _sql(self, statement: str) -> str:
        return statement.replace("%s", "?") if self.sqlite else statement

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._connection() as connection:
            return list(connection.execute(self._sql(statement), params).fetchall())

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> int:
        with self._connection() as connection:
            cursor = connection.execute(self._sql(statement), params)
            count: int = cursor.rowcount
            return count

    def key(self, instance_id: UUID) -> object:
        return instance_id.hex if self.sqlite else instance_id

    def state(self, table: str, instance_id: UUID, version: int) -> bytes:
        [(state,)] = self.query(
            f"SELECT state FROM {table} WHERE originator_id = %s AND originator_version = %s",
            (self.key(instance_id), version),
        )
        return bytes(state)

    def set(self, table: str, instance_id: UUID, version: int, column: str, value: object) -> None:
        changed = self.execute(
            f"UPDATE {table} SET {column} = %s WHERE originator_id = %s AND originator_version = %s",
            (value, self.key(instance_id), version),
        )
        assert changed == 1

    def edit_json(self, instance_id: UUID, version: int, change: Any) -> None:
        data = json.loads(self.state(self.events, instance_id, version))
        change(data)
        self.set(self.events, instance_id, version, "state", json.dumps(data).encode())

    def flip_bytes(self, table: str, instance_id: UUID, version: int) -> None:
        state = bytearray(self.state(table, instance_id, version))
        for i in range(0, min(len(state), 40), 3):
            state[i] ^= 0xA5
        self.set(table, instance_id, version, "state", bytes(state))


def corrupt(raw: Raw, built: Built, kind: str) -> tuple[UUID, UUID, int]:
    """Corrupt one record; returns (the instance whose record broke, the root to park, its version)."""
    other, kid, parent = built.other, built.kid, built.parent
    if kind == "state-bytes":
        raw.flip_bytes(raw.events, other, 2)
        return other, other, 2
    if kind == "dropped-field":
        # ``effects`` is required in every Stepped event, whole-snapshot or delta alike.
        raw.edit_json(other, 2, lambda data: data.pop("effects"))
        return other, other, 2
    if kind == "field-type":
        raw.edit_json(other, 2, lambda data: data.update(now="soon"))
        return other, other, 2
    if kind == "topic":
        raw.set(raw.events, other, 2, "topic", "aggregates._instance:Instance.Vanished")
        return other, other, 2
    if kind == "later-format":
        # Written by a later version of incarnate: a stored format this version does not know.
        raw.set(raw.events, other, 2, "topic", "aggregates._instance:Instance.Stepped@99")
        return other, other, 2
    if kind == "started":
        raw.flip_bytes(raw.events, other, 1)
        return other, other, 1
    if kind == "child":
        raw.flip_bytes(raw.events, kid, 2)
        return kid, parent, 2
    raise AssertionError(kind)


@pytest.fixture(params=STORES)
def store_kind(request: pytest.FixtureRequest) -> str:
    """Each store with SQL tables in turn."""
    kind: str = request.param
    return kind


@pytest.fixture
def storage(store_kind: str, tmp_path: Path) -> Iterator[Storage]:
    """A fresh, empty store."""
    with storage_for(store_kind, tmp_path) as store:
        yield store


# ------------------------------------------------------------ checks


def run_cli(
    capsys: pytest.CaptureFixture[str], storage: Storage, monkeypatch: pytest.MonkeyPatch, *argv: str
) -> tuple[int, str, str]:
    """Run ``incarnate`` in-process against ``storage``; the exit status, stdout and stderr."""
    if isinstance(storage, SQLiteStorage):
        args = [*argv, "--db", storage.path]
    else:
        assert isinstance(storage, PostgresStorage)
        args = list(argv)
        monkeypatch.setenv("PERSISTENCE_MODULE", "postgres")
        monkeypatch.setenv("POSTGRES_DBNAME", storage.dbname)
        monkeypatch.setenv("POSTGRES_HOST", storage.host)
        monkeypatch.setenv("POSTGRES_PORT", str(storage.port))
        monkeypatch.setenv("POSTGRES_USER", storage.user)
        monkeypatch.setenv("POSTGRES_SCHEMA", storage.schema)
    status = main(args)
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def finish_healthy_trees(engine: Engine, built: Built, skip: set[UUID]) -> None:
    """Drive every tree not in ``skip`` to its end, checking the accepted answer was processed."""
    assert engine.instance(built.healthy).record.status is InstanceStatus.DONE
    assert engine.instance(built.healthy).record.output == "yes"
    if built.other not in skip:
        engine.send(built.other, "answer", "later")
        engine.run_until_idle()
        assert engine.instance(built.other).record.status is InstanceStatus.DONE
    if built.parent not in skip:
        engine.send(built.kid, "finish")
        engine.run_until_idle()
        engine.send(built.parent, "approve")
        engine.run_until_idle()
        assert engine.instance(built.parent).record.status is InstanceStatus.DONE


def corrupt_incidents(engine: Engine, root: UUID) -> list[str]:
    """The corrupt-record incidents of a parked root, as listed by ``engine.parked()``."""
    held = {p.root: p for p in engine.parked()}
    assert root in held, f"{root} is not parked: {held}"
    return [i.detail for i in held[root].incidents if i.kind == "corrupt-record"]


# ------------------------------------------------------------ tests

EVENT_KINDS = ("state-bytes", "dropped-field", "field-type", "topic", "later-format", "started", "child")


@pytest.mark.parametrize("kind", EVENT_KINDS)
def test_a_corrupted_event_parks_its_tree_and_every_other_tree_recovers(
    storage: Storage, kind: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored event that does not decode parks its root with an incident naming the instance and version,
    durably and once, while every other tree recovers and finishes; the operator terminates the tree."""
    built = build(storage)
    broken, root, version = corrupt(Raw(storage), built, kind)

    engine = engine_over(storage)
    try:
        engine.resume_all()
        engine.run_until_idle()
        [detail] = corrupt_incidents(engine, root)
        assert str(broken) in detail and f"version {version}" in detail
        if kind == "later-format":  # refused, never read as a format this version knows
            assert "stored format 99 of Instance.Stepped" in detail and "upgrade incarnate" in detail
        finish_healthy_trees(engine, built, skip={root})
        with pytest.raises(CorruptRecord) as raised:
            engine.instance(broken)
        message = str(raised.value)
        assert (raised.value.instance_id, raised.value.version) == (broken, version)
        assert str(broken) in message and f"version {version}" in message and "incarnate parked" in message
        with pytest.raises(CorruptRecord):
            engine.events_of(broken)
        with pytest.raises(CorruptRecord):
            engine.plan(broken)
    finally:
        engine.close()

    again = engine_over(storage)  # a later engine sees it parked, and parks it no second time
    try:
        assert again.resume_all() == 0
        again.run_until_idle()
        assert len(corrupt_incidents(again, root)) == 1
    finally:
        again.close()

    target = str(broken)
    for argv in (
        ("list", "--all"),
        ("parked",),
        ("recover", "--charts", CHARTS, "--tasks", TASKS_PATH, "--timeout", "5"),
        ("tree", target),
        ("timeline", target),
        ("plan", target, "--charts", CHARTS),
        ("send", target, "answer"),
        ("cancel", target),
        ("resolve", str(root), "--charts", CHARTS),
    ):
        status, out, err = run_cli(capsys, storage, monkeypatch, *argv)
        assert "Traceback" not in out + err, argv
        if argv[0] in ("tree", "timeline", "plan", "send", "cancel", "resolve"):
            assert status != 0, argv
            [line] = err.strip().splitlines()
            assert target in line and f"version {version}" in line, (argv, line)
        elif argv[0] == "recover":
            assert status == 4, (argv, err)  # the parked tree remains for an operator
        else:
            assert status == 0, (argv, err)
        if argv[0] == "parked":
            assert str(root) in out and target in out and f"version {version}" in out

    status, out, err = run_cli(capsys, storage, monkeypatch, "terminate", str(root))
    assert status == 0 and "Traceback" not in err, err
    last = engine_over(storage)
    try:
        assert last.parked() == []
        last.listing.catch_up()
        for instance_id in (root, broken):
            row = last.listing.get(instance_id)
            assert row is not None and row.status == "cancelled"
        assert last.resume_all() == 0
    finally:
        last.close()


def latest_snapshot(raw: Raw, instance_id: UUID) -> int:
    """The version of the latest stored snapshot of ``instance_id``."""
    [(version,)] = raw.query(
        f"SELECT MAX(originator_version) FROM {raw.snapshots} WHERE originator_id = %s",
        (raw.key(instance_id),),
    )
    return int(version)


def recovers_from_its_events(
    storage: Storage, built: Built, caplog: pytest.LogCaptureFixture, said: str
) -> None:
    """A fresh engine parks nothing, finishes every tree, and logged ``said`` about the snapshot."""
    engine = engine_over(storage, snapshot_interval=1)
    try:
        with caplog.at_level(logging.WARNING, logger="incarnate.engine"):
            engine.resume_all()
            engine.run_until_idle()
        assert engine.parked() == []
        finish_healthy_trees(engine, built, skip=set())
        assert any(said in r.getMessage() for r in caplog.records)
        assert engine.plan(built.healthy).status is InstanceStatus.DONE
    finally:
        engine.close()


def test_a_corrupted_snapshot_only_costs_a_replay(storage: Storage, caplog: pytest.LogCaptureFixture) -> None:
    """A snapshot that does not decode is skipped with a warning; the instance is replayed from its events."""
    built = build(storage, snapshot_interval=1)
    raw = Raw(storage)
    raw.flip_bytes(raw.snapshots, built.healthy, latest_snapshot(raw, built.healthy))
    recovers_from_its_events(storage, built, caplog, "skipping a snapshot")


def test_a_snapshot_naming_an_unknown_state_only_costs_a_replay(
    storage: Storage, caplog: pytest.LogCaptureFixture
) -> None:
    """A snapshot that decodes but names a state the chart lacks is refused; the events rebuild it."""
    built = build(storage, snapshot_interval=1)
    raw = Raw(storage)
    version = latest_snapshot(raw, built.healthy)
    text = TolerantZlib().decompress(raw.state(raw.snapshots, built.healthy, version)).decode()
    assert '"awaiting_answer"' in text
    wrong = text.replace('"awaiting_answer"', '"nowhere"').encode()
    raw.set(raw.snapshots, built.healthy, version, "state", wrong)
    recovers_from_its_events(storage, built, caplog, "refusing the stored snapshot")


def test_a_corrupted_listing_row_is_rebuilt(storage: Storage, caplog: pytest.LogCaptureFixture) -> None:
    """A listing row that does not read back makes the listing rebuild itself from the log, with a warning."""
    built = build(storage, listed=True)
    raw = Raw(storage)
    sqlite = isinstance(storage, SQLiteStorage)
    column, value = ("root", "not-a-uuid") if sqlite else ("kind", "garbage")
    key = str(built.healthy) if sqlite else built.healthy
    assert raw.execute(f"UPDATE incarnate_listing SET {column} = %s WHERE id = %s", (value, key)) == 1
    engine = engine_over(storage)
    try:
        with caplog.at_level(logging.WARNING, logger="incarnate.listing"):
            engine.resume_all()
            engine.run_until_idle()
        assert engine.parked() == []
        finish_healthy_trees(engine, built, skip=set())
        assert any("rebuilding the listing" in r.getMessage() for r in caplog.records)
        row = engine.listing.get(built.healthy)
        assert row is not None and row.root == built.healthy
    finally:
        engine.close()
