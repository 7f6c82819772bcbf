"""The console as an operator uses it: transitions on the diagram, per-state links, the state filter."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from incarnate.console import create_app
from tests.console.charts import CHARTS, Store, make_store

ORIGIN = "http://127.0.0.1:8080"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """A console with actions over ``store``, the charts registered."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as client:
        yield client


def test_the_diagram_draws_each_transition_with_its_event_and_target(client: TestClient) -> None:
    """The gate's diagram has an arrow per transition, labelled with its event; the page lists them too."""
    page = client.get("/charts/gate").text
    labels = re.findall(r'<g class="transition"><title>([^<]*)</title>', page)
    assert sorted(labels) == ["approve", "reject"]
    assert 'marker-end="url(#arrow)"' in page
    table = page.split('<table class="transitions">', 1)[1].split("</table>", 1)[0]
    assert "<code>approve</code>" in table and "approved" in table and "rejected" in table


def test_a_guarded_transition_shows_its_guard(client: TestClient) -> None:
    """A guarded transition of a registered chart reads ``event [guard name]`` on the diagram."""
    page = client.get("/charts/order").text
    guarded = list(re.findall(r"<title>([^<]*\[[^<]*\])</title>", page))
    assert guarded, "the order chart's diagram shows no guarded transition"
    assert all("[guard]" not in label for label in guarded)


def test_the_counts_link_to_the_instances_in_that_state(client: TestClient, store: Store) -> None:
    """Each per-state count links to the list filtered by chart and current state, which shows them."""
    page = client.get("/charts/gate").text
    assert 'href="/?chart=gate&amp;in_state=waiting&amp;state=in_flight"' in page
    listed = client.get("/?chart=gate&in_state=waiting&state=in_flight&format=json").json()
    assert [row["id"] for row in listed["rows"]] == [str(store.gate)]
    finished = client.get("/?chart=gate&in_state=approved&format=json").json()["rows"]
    assert [row["id"] for row in finished] == [str(store.approved)]  # a finished one rests in its final state


def test_the_state_filter_needs_a_chart(client: TestClient) -> None:
    """``in_state`` without ``chart`` is a 400 that says to add the chart."""
    answer = client.get("/?in_state=waiting&format=json")
    assert answer.status_code == 400 and "chart" in answer.json()["error"]["message"]
