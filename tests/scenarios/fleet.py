"""Several engines over one store, as a fleet of workers would share it (SQLite file, PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from incarnate import Engine, Storage, VirtualClock
from statechart import JsonValue
from tests.scenarios import charts
from tests.stores import storage_for

FLEET_STORES = ("sqlite", "postgres")
LEASE = 30.0
"""Seconds a heartbeat keeps an engine live: far longer than any of these tests."""

Fleet = Callable[..., Engine]


@pytest.fixture(params=FLEET_STORES)
def fleet_storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    """One empty store per test, shared by every engine the test builds."""
    with storage_for(request.param, tmp_path) as store:
        yield store


@pytest.fixture
def fleet(fleet_storage: Storage) -> Iterator[Fleet]:
    """Build named engines over the test's store; each is closed at the end."""
    engines: list[Engine] = []
    clock = VirtualClock(1_700_000_000.0)

    def build(
        engine_id: str, *, tasks: dict[str, Callable[..., JsonValue]] | None = None, **kwargs: Any
    ) -> Engine:
        engine = Engine(
            charts.ALL,
            tasks if tasks is not None else {"charge": lambda call: "ok"},
            storage=fleet_storage,
            clock=clock,
            engine_id=engine_id,
            **kwargs,
        )
        engines.append(engine)
        return engine

    yield build
    for engine in engines:
        engine.close()


def live(engine: Engine) -> Engine:
    """Make ``engine`` live: a heartbeat row that has not expired, as a worker keeps one."""
    engine.parts.coordination.beat(engine.engine_id, "default", LEASE)
    assert engine.parts.coordination.is_live(engine.engine_id)
    return engine


def event_names(engine: Engine, instance_id: UUID) -> list[str]:
    """The class names of an instance's stored events, oldest first."""
    return [type(event).__name__ for event in engine.events_of(instance_id)]


def only_child(engine: Engine, parent: UUID) -> UUID:
    """The id of the one incarnation ``parent`` retains."""
    (activation,) = engine.instance(parent).record.activations
    return activation.child_id
