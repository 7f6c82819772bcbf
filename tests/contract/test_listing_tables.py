"""The contract of ListingTables: every store adapter keeps the listing's rows and position alike."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from collections.abc import Callable
from uuid import UUID

import attrs
import pytest

from incarnate import PostgresStorage, SQLiteStorage, Storage
from incarnate.store import ListingTables, Store
from projections import ListingRow

OpenTables = Callable[[], ListingTables]


def row(
    row_id: UUID | None = None,
    *,
    parent: UUID | None = None,
    status: str = "born",
    version: int = 1,
    changed_at: float = 1_800_000_000.25,
) -> ListingRow:
    """A listing row with plausible defaults."""
    row_id = row_id or uuid.uuid4()
    return ListingRow(
        id=row_id,
        root=parent or row_id,
        parent=parent,
        kind="chart",
        name="order",
        status=status,
        owner="host:1:abc",
        version=version,
        has_snapshot=False,
        changed_at=changed_at,
    )


def test_position_moves_only_from_the_expected_value(open_tables: OpenTables) -> None:
    """A write with a stale expected position writes nothing and returns False (a compare-and-swap)."""
    tables = open_tables()
    first = row()
    assert tables.position() == 0
    assert tables.write([(1, first)], expected=0, position=3) is True
    assert tables.write([(4, row())], expected=0, position=7) is False
    assert tables.position() == 3
    assert [r.id for r in tables.select(in_flight=False, roots=False)] == [first.id]


def test_upsert_keeps_the_first_sequence_and_overwrites_every_field(open_tables: OpenTables) -> None:
    """Rewriting a row replaces its fields, changed_at included, but keeps its place in insertion order."""
    tables = open_tables()
    a, b = row(), row()
    assert tables.write([(1, a), (2, b)], expected=0, position=2)
    newer = attrs.evolve(
        a, status="running", version=2, has_snapshot=True, owner="other", changed_at=1_800_000_009.5
    )
    assert tables.write([(9, newer)], expected=2, position=3)
    assert tables.select(in_flight=False, roots=False) == [newer, b]
    assert tables.load({a.id, b.id, uuid.uuid4()}) == {a.id: newer, b.id: b}


def test_select_filters_in_flight_and_roots(open_tables: OpenTables) -> None:
    """In-flight drops finished rows (orphans too), roots drops children, and both combine."""
    tables = open_tables()
    root = row()
    child = row(parent=root.id, status="running")
    done = row(status="done")
    orphan = row(parent=root.id, status="orphan")
    parked = row(status="parked")
    assert tables.write([(1, root), (2, child), (3, done), (4, orphan), (5, parked)], expected=0, position=5)

    def ids(*, in_flight: bool, roots: bool) -> list[UUID]:
        return [r.id for r in tables.select(in_flight=in_flight, roots=roots)]

    assert ids(in_flight=False, roots=False) == [root.id, child.id, done.id, orphan.id, parked.id]
    assert ids(in_flight=True, roots=False) == [root.id, child.id, parked.id]
    assert ids(in_flight=False, roots=True) == [root.id, done.id, parked.id]
    assert ids(in_flight=True, roots=True) == [root.id, parked.id]


def test_reset_forgets_rows_and_position(open_tables: OpenTables) -> None:
    """After a reset the tables are empty at position 0 and take writes from 0 again."""
    tables = open_tables()
    assert tables.write([(1, row())], expected=0, position=4)
    tables.reset()
    assert (tables.position(), tables.select(in_flight=False, roots=False)) == (0, [])
    assert tables.write([(1, row())], expected=0, position=1)


def test_two_openings_share_one_listing(open_tables: OpenTables) -> None:
    """Tables opened twice over one store see each other's writes and compete on the position."""
    first, second = open_tables(), open_tables()
    written = row()
    assert first.write([(1, written)], expected=0, position=1)
    assert second.position() == 1
    assert second.load({written.id}) == {written.id: written}
    assert second.write([(2, row())], expected=0, position=2) is False


def test_an_empty_load_and_unknown_ids_find_nothing(open_tables: OpenTables) -> None:
    """Loading no ids, or ids never written, returns an empty mapping."""
    tables = open_tables()
    assert tables.load(set()) == {}
    assert tables.load({uuid.uuid4()}) == {}


@pytest.mark.parametrize("changed_at", [0.0, 1_800_000_000.123456])
def test_changed_at_round_trips(open_tables: OpenTables, changed_at: float) -> None:
    """A row's change time reads back exactly as written."""
    tables = open_tables()
    written = row(changed_at=changed_at)
    assert tables.write([(1, written)], expected=0, position=1)
    assert tables.load({written.id})[written.id].changed_at == changed_at


_OLD_LISTING = (
    "CREATE TABLE incarnate_listing ("
    "id {uuid} PRIMARY KEY, seq bigint NOT NULL, root {uuid} NOT NULL, parent {uuid}, "
    "kind text NOT NULL, name text NOT NULL, status text NOT NULL, owner text NOT NULL, "
    "version bigint NOT NULL, has_snapshot boolean NOT NULL)"
)
_OLD_ROW = (
    "INSERT INTO incarnate_listing VALUES "
    "('{id}', 1, '{id}', NULL, 'chart', 'order', 'running', 'e', 3, {true})"
)


def test_a_listing_written_before_change_times_is_migrated(storage: Storage, store: Store) -> None:
    """Opening a listing table without the changed_at column adds it (idempotently); old rows read 0.0."""
    row_id = uuid.uuid4()
    if isinstance(storage, SQLiteStorage):
        with contextlib.closing(sqlite3.connect(storage.path)) as connection:
            connection.execute(_OLD_LISTING.format(uuid="TEXT"))
            connection.execute(_OLD_ROW.format(id=row_id, true=1))
            connection.commit()
    elif isinstance(storage, PostgresStorage):
        import psycopg

        with psycopg.connect(
            host=storage.host,
            port=storage.port,
            dbname=storage.dbname,
            user=storage.user,
            autocommit=True,
            options=f"-c search_path={storage.schema}",
        ) as connection:
            connection.execute(_OLD_LISTING.format(uuid="uuid").encode())
            connection.execute(_OLD_ROW.format(id=row_id, true="true").encode())
    else:
        pytest.skip("an in-memory listing has no stored layout to migrate")
    for _ in range(2):  # the second opening finds the column already there
        tables = store.listing_tables()
        try:
            assert tables.load({row_id})[row_id].changed_at == 0.0
        finally:
            tables.close()
