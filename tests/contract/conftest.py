"""Fixtures: each contract test runs once per store adapter.

Memory, a SQLite file in the test's directory, PostgreSQL in a fresh schema.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from incarnate import Storage
from incarnate.store import Coordination, ListingTables, Store
from tests.stores import STORES, storage_for


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """An empty store of each kind in turn."""
    with storage_for(request.param, tmp_path) as storage:
        yield storage


@pytest.fixture
def store(storage: Storage) -> Store:
    """The adapter of the test's store."""
    return storage.open()


@pytest.fixture
def open_tables(store: Store) -> Iterator[Callable[[], ListingTables]]:
    """Open listing tables over the test's store; all are closed at the end."""
    opened: list[ListingTables] = []

    def build() -> ListingTables:
        tables = store.listing_tables()
        opened.append(tables)
        return tables

    yield build
    for tables in opened:
        tables.close()


@pytest.fixture
def open_coordination(store: Store) -> Iterator[Callable[[], Coordination]]:
    """Open coordinations over the test's store (as separate engines would); all are closed at the end."""
    opened: list[Coordination] = []

    def build() -> Coordination:
        coordination = store.coordination()
        opened.append(coordination)
        return coordination

    yield build
    for coordination in opened:
        coordination.close()
