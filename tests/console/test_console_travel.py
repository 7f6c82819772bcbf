# ruff: noqa: F401, F811  (pytest fixtures imported from the module that defines them)
"""The console's time travel, fork and redrive, through Starlette's TestClient over a real SQLite store."""

from __future__ import annotations

import re
import time
from uuid import UUID

from starlette.testclient import TestClient

from incarnate import Engine, Storage, ThreadedRunner, Worker
from incarnate._demo import TASKS
from tests.console.charts import CHARTS, Store
from tests.console.test_console_app import client, csrf, flash_of, post, store


def test_the_instance_page_links_to_time_travel(client: TestClient, store: Store) -> None:
    """The instance page offers time travel through the instance and through its call tree."""
    page = client.get(f"/instances/{store.order}").text
    assert re.search(rf'id="time-travel" href="/instances/{store.order}/at/\d+"', page)
    assert f'href="/instances/{store.order}/at/1?tree=1"' in page


def test_stepping_through_the_versions_shows_each_configuration(
    client: TestClient,
    store: Store,
) -> None:
    """Version 1 has no configuration and no previous link; version 2 is the first macrostep's states."""
    first = client.get(f"/instances/{store.order}/at/1")
    assert first.status_code == 200
    assert 'id="previous"' not in first.text and 'id="next"' in first.text
    assert '<dd class="configuration" id="configuration">-</dd>' in first.text
    second = client.get(f"/instances/{store.order}/at/2").text
    assert "<svg" in second and re.search(r'<g class="state [a-z]+ active"', second)
    document = client.get(f"/instances/{store.order}/at/2?format=json").json()
    assert document["position"] == 2 and document["instances"][0]["configuration"]


def test_tree_positions_show_every_instance_then(client: TestClient, store: Store) -> None:
    """With ``?tree=1`` the page lists the call tree's instances at that position."""
    document = client.get(f"/instances/{store.order}/at/1?tree=1&format=json").json()
    last = document["positions"]
    page = client.get(f"/instances/{store.order}/at/{last}?tree=1").text
    assert "The call tree then (6)" in page


def test_a_position_out_of_range_is_refused_with_its_code(
    client: TestClient,
    store: Store,
) -> None:
    """A position past the end is a 404 naming the range; one that is not a number is a 400."""
    answer = client.get(f"/instances/{store.order}/at/9999", headers={"accept": "application/json"})
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "position-out-of-range"
    assert client.get(f"/instances/{store.order}/at/two").status_code == 400


def test_fork_from_the_time_travel_page_goes_to_the_new_root(
    client: TestClient,
    store: Store,
) -> None:
    """The page's Fork button (a POST with the CSRF token) starts a new root and redirects to it."""
    page = client.get(f"/instances/{store.gate}/at/2").text
    assert 'id="fork"' in page
    answer = post(client, f"/instances/{store.gate}/fork", {"csrf_token": csrf(page), "version": "2"})
    assert answer.status_code == 303
    assert (
        answer.headers["location"].startswith("/instances/")
        and str(store.gate) not in answer.headers["location"]
    )
    assert "forked" in flash_of(client, answer)


def test_redrive_needs_the_confirmation(client: TestClient, store: Store) -> None:
    """Without the ticked confirmation nothing is written; a running gate is refused with its code."""
    page = client.get(f"/instances/{store.gate}").text
    answer = post(client, f"/instances/{store.gate}/redrive", {"csrf_token": csrf(page), "confirm": "yes"})
    assert "redrive-refused" in flash_of(client, answer)
    answer = post(client, f"/instances/{store.gate}/fork", {"version": "2"})
    assert answer.status_code == 403  # no CSRF token


def test_a_root_the_console_forks_is_taken_over_by_a_worker_while_the_console_runs(
    client: TestClient, store: Store
) -> None:
    """The console's engine runs nothing and beats no heartbeat, so a worker takes its fork at once."""
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(store.path)), runner=ThreadedRunner(2))
    with engine, Worker(engine, recovery=None, poll_interval=0.05):
        page = client.get(f"/instances/{store.gate}/at/2").text
        answer = post(client, f"/instances/{store.gate}/fork", {"csrf_token": csrf(page), "version": "2"})
        forked = UUID(answer.headers["location"].split("/instances/", 1)[1].split("?", 1)[0])
        deadline = time.monotonic() + 10.0
        while engine.instance(forked).record.owner != engine.engine_id and time.monotonic() < deadline:
            time.sleep(0.05)
        assert engine.instance(forked).record.owner == engine.engine_id
