"""Bulk actions over the instance list's filter: a dry run with counts, then a typed confirmation."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from starlette.testclient import TestClient

from incarnate import Engine, Storage
from incarnate._demo import TASKS
from incarnate.console import create_app
from tests.console.charts import CHARTS, GATE, Store, make_store
from tests.console.test_console_app import ORIGIN, RENAMED_GATE, csrf, flash_of, post


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An order at its approval gate, a gate waiting, one approved and one cancelled; two more waiting."""
    made = make_store(tmp_path / "console.db")
    engine = Engine([GATE], {}, storage=Storage.sqlite(str(made.path)))
    try:
        for text in ("second", "third"):
            engine.start("gate", {"text": text})
        engine.run_until_idle()
    finally:
        engine.close()
    return made


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """A console with actions over ``store``."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as client:
        yield client


def dry_run(client: TestClient, **query: str) -> Any:
    """The dry run's JSON for ``query``."""
    answer = client.get(f"/bulk?{urlencode({**query, 'format': 'json'})}")
    assert answer.status_code == 200, answer.text
    return answer.json()


def confirm_form(page: str) -> dict[str, str]:
    """The hidden fields of the dry run's confirmation form."""
    form = page.split('id="bulk-confirm"', 1)[1].split("</form>", 1)[0]
    return {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    }


def statuses(client: TestClient, chart: str) -> list[str]:
    """The statuses of a chart's instances, as the list shows them."""
    rows = client.get(f"/?chart={chart}&limit=500&format=json").json()["rows"]
    return sorted(row["status"] for row in rows)


def test_the_dry_run_counts_what_is_selected_and_what_is_acted_on(client: TestClient) -> None:
    """Every page counts; finished instances, tasks and instances with no such transition are left out."""
    gates = dry_run(client, chart="gate", action="cancel")
    assert gates["selected"] == 5  # every gate, on every page of the list
    assert len(gates["targets"]) == 3  # the three waiting: the approved and the cancelled are finished
    assert gates["reasons"] == {"finished (done)": 1, "finished (cancelled)": 1}
    assert gates["confirmation"] == "cancel 3"
    paged = dry_run(client, chart="gate", action="cancel", limit="1", offset="1")
    assert paged["selected"] == 5  # paging is not a filter
    everything = dry_run(client, action="terminate", state="in_flight")
    assert everything["selected"] == 4 and everything["reasons"] == {}  # the order and three gates, all roots
    sent = dry_run(client, chart="gate", action="send", event="approve")
    assert len(sent["targets"]) == 3
    refused = dry_run(client, action="send", event="ship")
    assert refused["targets"] == []
    assert refused["reasons"]["no transition on 'ship' from its configuration"] == 4
    assert refused["reasons"]["a task: it takes no events"] == 2 and "Dry run" in client.get("/").text


def test_nothing_is_done_without_the_typed_confirmation_and_the_dry_runs_proof(client: TestClient) -> None:
    """A wrong confirmation or a forged form changes nothing; the right one cancels every waiting gate."""
    page = client.get("/bulk?chart=gate&action=cancel&reason=release+freeze").text
    assert "type <code>cancel 3</code> to confirm" in page
    fields = confirm_form(page)
    assert fields["chart"] == "gate" and fields["reason"] == "release freeze"
    token = csrf(page)
    wrong = flash_of(client, post(client, "/bulk", {**fields, "confirm": "cancel 2"}))
    assert wrong.startswith("error: nothing was done") and "cancel 3" in wrong
    forged = flash_of(client, post(client, "/bulk", {**fields, "proof": "0" * 64, "confirm": "cancel 3"}))
    assert forged.startswith("error: nothing was done") and "dry run" in forged
    widened = {**fields, "chart": "order", "confirm": "cancel 3"}  # a filter the dry run did not show
    assert flash_of(client, post(client, "/bulk", widened)).startswith("error: nothing was done")
    assert statuses(client, "gate") == ["cancelled", "done", "running", "running", "running"]
    done = flash_of(client, post(client, "/bulk", {**fields, "confirm": "cancel 3", "csrf_token": token}))
    assert done == "ok: bulk cancel: asked to cancel 3 of 3 instance(s)"
    waiting = client.get("/?chart=gate&state=in_flight&format=json").json()["rows"]
    for row in waiting:
        detail = client.get(f"/instances/{row['id']}?format=json").json()["instance"]
        assert detail["cancel_reason"] == "release freeze"


def test_a_selection_that_changed_since_the_dry_run_is_not_acted_on(client: TestClient, store: Store) -> None:
    """A gate started after the dry run makes the confirmation stale: nothing is sent, the count is new."""
    fields = confirm_form(client.get("/bulk?chart=gate&action=send&event=approve").text)
    engine = Engine([GATE], {}, storage=Storage.sqlite(str(store.path)))
    try:
        engine.start("gate", {"text": "late"})
    finally:
        engine.close()
    stale = flash_of(client, post(client, "/bulk", {**fields, "confirm": "send 3"}))
    assert stale.startswith("error: nothing was done") and "4 would be acted on now" in stale
    assert statuses(client, "gate") == ["cancelled", "done", "running", "running", "running", "running"]
    fresh = confirm_form(client.get("/bulk?chart=gate&action=send&event=approve").text)
    sent = flash_of(client, post(client, "/bulk", {**fresh, "confirm": "send 4"}))
    assert html.unescape(sent) == "ok: bulk send: sent 'approve' to 4 of 4 instance(s)"


def test_terminate_acts_on_roots_and_migrate_on_one_chart(client: TestClient, store: Store) -> None:
    """Bulk terminate ends the selected call trees; bulk migrate needs the list filtered by one chart."""
    fields = confirm_form(client.get("/bulk?action=terminate&roots=1&state=in_flight").text)
    ended = flash_of(client, post(client, "/bulk", {**fields, "confirm": "terminate 4"}))
    assert ended == "ok: bulk terminate: terminated 4 of 4 instance(s)"
    assert client.get(f"/instances/{store.order}?format=json").json()["instance"]["status"] == "cancelled"
    unnamed = dry_run(client, action="migrate", mapping="waiting=pending")
    assert unnamed["error"] == "a migration maps the states of one chart: filter the list by chart first"
    assert "Nothing can be done" in client.get("/bulk?action=migrate&mapping=waiting%3Dpending").text


def test_bulk_migrate_moves_the_selected_instances(tmp_path: Path) -> None:
    """After a release renamed a state, a bulk migrate over the chart's filter maps the waiting gates."""
    store = make_store(tmp_path / "console.db")
    charts = [chart for chart in CHARTS if chart.name != "gate"] + [RENAMED_GATE]
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=charts)) as client:
        plan = dry_run(client, chart="gate", action="migrate", mapping="waiting=pending")
        assert plan["targets"] == [str(store.gate)] and plan["confirmation"] == "migrate 1"
        fields = confirm_form(client.get("/bulk?chart=gate&action=migrate&mapping=waiting%3Dpending").text)
        moved = flash_of(client, post(client, "/bulk", {**fields, "confirm": "migrate 1"}))
        assert html.unescape(moved).startswith("ok: bulk migrate of chart 'gate'")
        assert "1 of 1 instance(s) migrated" in moved
        detail = client.get(f"/instances/{store.gate}?format=json").json()["instance"]
        assert detail["configuration"] == ["pending"]
    assert TASKS  # the demo's tasks are registered by the console from the charts, never run here


def test_a_read_only_console_offers_no_bulk_action(store: Store) -> None:
    """Read-only: no bulk form on the list, the dry run shows no confirmation, a POST is refused."""
    app = create_app(str(store.path), charts=CHARTS, read_only=True)
    with TestClient(base_url=ORIGIN, app=app) as client:
        assert 'id="bulk"' not in client.get("/").text
        page = client.get("/bulk?chart=gate&action=cancel").text
        assert 'id="bulk-confirm"' not in page and "read-only" in page
        assert post(client, "/bulk", {"action": "cancel"}).status_code == 403


def test_terminate_leaves_out_children(tmp_path: Path) -> None:
    """A child in flight is left out of a bulk terminate with why: terminate ends whole call trees."""
    store = make_store(tmp_path / "console.db")
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(store.path)))
    try:
        order = engine.start("order").id
        engine.process(order)  # its first macrostep: the packers are born, not yet run
    finally:
        engine.close()
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as client:
        plan = dry_run(client, action="terminate", state="in_flight")
        children = [s for s in plan["skipped"] if s["reason"].startswith("a child")]
        assert children and str(order) in plan["targets"]
        tree = client.get(f"/instances/{order}?format=json").json()["tree"]
        assert {c["id"] for c in tree["children"]} == {c["id"] for c in children}


def test_an_unknown_action_is_a_400(client: TestClient) -> None:
    """An action the console does not know is refused with the ones it does."""
    answer = client.get("/bulk?action=explode&format=json")
    assert answer.status_code == 400
    assert "send, cancel, terminate, migrate" in answer.json()["error"]["message"]
    assert 'id="bulk"' in client.get("/").text
