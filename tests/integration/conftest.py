"""Fixtures: every integration test runs once per store (POPO, SQLite file, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Engine, Storage, VirtualClock
from tests.stores import STORES, storage_for


@pytest.fixture(params=STORES)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """An empty store of each kind in turn."""
    with storage_for(request.param, tmp_path) as store:
        yield store


@pytest.fixture
def clock() -> VirtualClock:
    """A virtual clock starting at a fixed epoch time."""
    return VirtualClock(1_700_000_000.0)


EngineFactory = Callable[..., Engine]


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
