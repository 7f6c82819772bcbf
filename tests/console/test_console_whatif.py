"""The console's migration dry run shows the what-if replay of each instance beside its verdict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from incarnate.console import create_app
from statechart import Chart, final, state, transition
from tests.console.charts import CHARTS, Note, Store, make_store

ORIGIN = "http://127.0.0.1:8080"

LATE_GATE = Chart(
    "gate",
    state("screening", on=[transition("screen", "waiting")]),
    state("waiting", on=[transition("approve", "approved"), transition("reject", "rejected")]),
    final("approved"),
    final("rejected"),
    context=Note,
)
"""A release whose gates start in a new ``screening`` state: a recorded gate diverges at its start."""

STUCK_GATE = Chart(
    "gate",
    state("waiting"),
    final("approved"),
    final("rejected"),
    context=Note,
    allow_unreachable=["approved", "rejected"],
)
"""A release whose ``waiting`` lost its transitions: a waiting gate strands."""


def swapped(gate: Chart[Any]) -> list[Chart[Any]]:
    """The console tests' charts with ``gate`` replaced."""
    return [chart for chart in CHARTS if chart.name != "gate"] + [gate]


LATE_CHARTS = swapped(LATE_GATE)
"""The release with :data:`LATE_GATE`, for ``--charts`` (the browser test)."""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


def client_for(store: Store, charts: list[Chart[Any]]) -> Iterator[TestClient]:
    """A console over ``store`` with ``charts``."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=charts)) as client:
        yield client


def test_the_dry_run_shows_where_a_gate_diverges(store: Store) -> None:
    """A gate that now starts elsewhere diverges at its first event, both configurations shown."""
    for client in client_for(store, swapped(LATE_GATE)):
        document = client.get("/charts/gate/migrate?format=json").json()
        [replay] = document["replays"]
        assert (replay["instance_id"], replay["replay"]) == (str(store.gate), "diverges")
        assert (replay["recorded"], replay["replayed"]) == (["waiting"], ["screening"])
        assert replay["verdict"] == "resumes"
        assert document["replay"]["diverges"] == 1
        page = client.get("/charts/gate/migrate").text
        assert "What-if replay" in page and "diverges" in page
        assert f"at event {replay['at']}" in page and "<code>screening</code>" in page


def test_the_dry_run_shows_a_gate_that_strands(store: Store) -> None:
    """A gate whose waiting state lost its transitions strands, and the page says why."""
    for client in client_for(store, swapped(STUCK_GATE)):
        document = client.get("/charts/gate/migrate?format=json").json()
        assert [r["replay"] for r in document["replays"]] == ["strands"]
        page = client.get("/charts/gate/migrate").text
        assert "strands" in page and "no transition can ever fire" in page


def test_the_dry_run_writes_nothing(store: Store) -> None:
    """Showing the dry run with its replay leaves every instance's version as it was."""
    for client in client_for(store, CHARTS):
        before = client.get("/?format=json&state=").json()
        client.get("/charts/gate/migrate")
        client.get("/charts/order/migrate")
        assert client.get("/?format=json&state=").json() == before
