"""The console's ``/workers`` page over a SQLite store, through Starlette's TestClient."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from incarnate import Engine, Storage
from incarnate.console import create_app
from tests.console.charts import CHARTS, Store, make_store
from tests.fleet_samples import LOAD

ORIGIN = "http://127.0.0.1:8080"
ENGINE = "web-1:4242:7e67c578"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """The console tests' store, with a live worker reporting its load, one without a load, one retired."""
    made = make_store(tmp_path / "console.db")
    with Engine(CHARTS, storage=Storage.sqlite(str(made.path))) as engine:
        coordination = engine.parts.coordination
        coordination.beat(ENGINE, "default", 60.0, LOAD.to_json())
        coordination.beat("plain", "batch", 60.0)
        coordination.beat("gone", "default", 60.0)
        coordination.retire("gone")
    return made


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """A client of a console over ``store``."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as client:
        yield client


def cells(page: str, engine_id: str) -> list[str]:
    """The text of each cell of the engine's row (tags stripped, spaces collapsed)."""
    row = re.search(
        rf"<tr class=\"engine-\w+\">\s*<td class=\"id\">{re.escape(engine_id)}</td>(.*?)</tr>", page, re.S
    )
    assert row is not None, f"no row for {engine_id}"
    return [
        " ".join(re.sub(r"<[^>]+>", " ", cell).split())
        for cell in re.findall(r"<td[^>]*>(.*?)</td>", row[1], re.S)
    ]


def test_every_engine_has_a_row_with_its_state_leader_and_load(client: TestClient) -> None:
    """The page lists each engine: group, state, leader, last beat, trees, running, queued, lag, host."""
    page = client.get("/workers")
    assert page.status_code == 200
    assert cells(page.text, ENGINE)[:3] == ["default", "live", "leader"]
    assert re.fullmatch(r"\d+\.\d s ago", cells(page.text, ENGINE)[3])
    assert cells(page.text, ENGINE)[4:] == ["0", "2", "3", "0.3 s (7 behind)", "web-1 (4242)"]
    assert cells(page.text, "plain")[:3] == ["batch", "live", "?"]  # no load reported: unknown
    assert cells(page.text, "plain")[5:] == ["?", "?", "?", "?"]
    assert cells(page.text, "gone")[:3] == ["default", "retired", "-"]
    own = re.findall(r'<td class="id">([^<]+) <span class="muted">\(this console\)</span></td>', page.text)
    assert own == []  # the console's engine runs nothing, so it beats no heartbeat: no row


def test_trees_link_to_the_instances_the_engine_owns(client: TestClient, store: Store) -> None:
    """The trees count links to the instance list filtered to the engine's in-flight roots."""
    page = client.get("/workers").text
    link = f'href="/?owner={ENGINE.replace(":", "%3A")}&amp;roots=1&amp;state=in_flight"'
    assert link in page
    # The store's instances are owned by the engine that ran them, which never beat: an absent engine.
    absent = re.search(r'<tr class="engine-absent">\s*<td class="id">([^<]+)</td>', page)
    assert absent is not None
    trees = cells(page, absent[1])[4]
    listed = client.get(f"/?owner={absent[1]}&roots=1&state=in_flight&format=json").json()
    assert int(trees) == listed["total"] > 0


def test_the_page_is_in_the_nav_refreshes_itself_and_filters_by_group(client: TestClient) -> None:
    """Every page links to /workers; the table re-reads the page while live; a group narrows it."""
    assert '<a href="/workers">Workers</a>' in client.get("/charts").text
    page = client.get("/workers?group=batch").text
    assert 'id="workers" data-refresh="3" data-src="/workers?group=batch"' in page
    assert '<input type="checkbox" id="live" checked>' in page
    assert '<option value="batch" selected>batch</option>' in page
    assert "plain" in page and ENGINE not in page


def test_json_is_the_fleet_document(client: TestClient) -> None:
    """``?format=json`` answers the document ``incarnate workers --json`` prints."""
    document = client.get("/workers?format=json").json()
    assert set(document) == {"now", "now_epoch", "group", "leaders_from", "left_off", "engines"}
    rows = {row["engine_id"]: row for row in document["engines"]}
    assert (rows[ENGINE]["leader"], rows[ENGINE]["in_flight"], rows[ENGINE]["lag"]) == (True, 5, 0.31)
    assert (rows["plain"]["state"], rows["plain"]["running"]) == ("live", None)
    assert rows["gone"]["state"] == "retired"
    batch = client.get("/workers?group=batch&format=json").json()
    assert [row["engine_id"] for row in batch["engines"]] == ["plain"]
