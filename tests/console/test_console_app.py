"""The console application over a real SQLite store made by running charts, through Starlette's TestClient."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from incarnate import Engine, PostgresStorage, Storage
from incarnate._demo import TASKS
from incarnate.cli import main, root
from incarnate.console import command, create_app
from incarnate.console._diagram import diagram_svg
from incarnate.console._security import TOKEN_COOKIE, binding_problem
from statechart import Chart, final, state, transition
from tests.console.charts import CHARTS, GATE, XSS, Note, Store, make_store
from tests.stores import storage_for

ORIGIN = "http://127.0.0.1:8080"
"""Where the tests open the console (its Host is the loopback, as a console without a token requires)."""


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """A client of a console with actions, over ``store``, with the charts registered."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as client:
        yield client


def csrf(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def post(client: TestClient, url: str, data: dict[str, str], **headers: str) -> Any:
    """POST a form as the console's own page would, without following the redirect."""
    return client.post(url, data=data, headers={"origin": ORIGIN, **headers}, follow_redirects=False)


def flash_of(client: TestClient, response: Any) -> str:
    """The flash message the page a POST redirected to shows."""
    assert response.status_code == 303, response.text
    page = client.get(response.headers["location"]).text
    found = re.search(r'<p class="flash (ok|error)" role="status">(.*?)</p>', page, re.S)
    assert found is not None, "the page shows no flash message"
    return f"{found.group(1)}: {found.group(2)}"


def inbox(path: Path, instance_id: uuid.UUID) -> list[str]:
    """The names of the events waiting in an instance's inbox, read by a separate engine."""
    engine = Engine([GATE], {}, storage=Storage.sqlite(str(path)))
    try:
        return [message.event.name for message in engine.instance(instance_id).record.inbox]
    finally:
        engine.close()


# ------------------------------------------------------------------ pages


def test_public_names() -> None:
    """``incarnate.console`` exports exactly the application factory and the command."""
    import incarnate.console

    assert incarnate.console.__all__ == ["create_app", "command"]
    assert command.name == "console"


def test_instances_page_lists_every_instance(client: TestClient, store: Store) -> None:
    """The instances page shows each instance with its chart, status and time of change."""
    page = client.get("/")
    assert page.status_code == 200
    for instance_id in (store.order, store.gate, store.approved, store.cancelled):
        assert f'href="/instances/{instance_id}"' in page.text
    assert "packer" in page.text and "charge_card" in page.text
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}", page.text), "no changed_at time shown"


def test_instance_page_shows_tree_timeline_plan_and_highlighted_diagram(
    client: TestClient, store: Store
) -> None:
    """An instance's page shows its call tree, the tree's timeline, its ResumePlan and its active states."""
    page = client.get(f"/instances/{store.order}").text
    assert 'class="state atomic active" data-state="awaiting_approval"' in page
    assert 'class="state final" data-state="shipped"' in page
    assert page.count('href="/instances/') > 6, "the call tree lists the packers and the charges"
    assert "Birth pack[teapot] gen 1 attempt 1" in page
    assert "ChildRetry charge[] gen 4 -&gt; attempt 2" in page
    assert "ResumePlan" in page and "awaiting_approval" in page
    assert '<option value="approve">approve</option>' in page
    assert '<option value="reject">reject</option>' in page


def test_instance_page_refreshes_itself_but_not_its_actions(client: TestClient, store: Store) -> None:
    """The instance page re-reads itself (pausable with ``live``); the action forms are left as typed."""
    page = client.get(f"/instances/{store.order}").text
    src = f'data-src="/instances/{store.order}"'
    assert page.count(src) == 2 and page.count("data-refresh=") == 2
    head = page.index('id="live-head"')
    detail = page.index('id="live-detail"')
    actions = page.index('<section class="actions">')
    assert head < page.index('class="facts"') < page.index("</div>", head) < actions < detail
    assert page.index("Call tree") > detail and page.index("ResumePlan") > detail
    assert '<input type="checkbox" id="live" checked>' in page


def test_instance_json_has_detail_tree_timeline_and_enabled_events(client: TestClient, store: Store) -> None:
    """``?format=json`` on an instance gives its detail, call tree, timeline, plan and enabled events."""
    document = client.get(f"/instances/{store.order}?format=json").json()
    assert document["instance"]["configuration"] == ["awaiting_approval"]
    assert [child["name"] for child in document["tree"]["children"]].count("packer") == 3
    assert document["enabled_events"] == ["approve", "reject"]
    assert document["plan"]["status"] == "running"
    assert any(entry["event"] == "ChildRetry" for entry in document["timeline"])


def test_chart_page_counts_instances_per_state(client: TestClient, store: Store) -> None:
    """A chart's page draws its states with how many unfinished instances are in each."""
    page = client.get("/charts/gate")
    assert page.status_code == 200
    assert 'class="state atomic active" data-state="waiting"' in page.text
    assert client.get("/charts/gate?format=json").json()["counts"] == {
        "waiting": 1,
        "approved": 0,
        "rejected": 0,
    }
    fragment = client.get("/charts/gate/diagram").text
    assert fragment.startswith('<div id="diagram"><svg') and 'data-state="waiting"' in fragment
    assert client.get("/charts/nothing").status_code == 404


def test_charts_page_lists_every_chart(client: TestClient) -> None:
    """The charts page lists each registered or stored chart with its instances in flight."""
    charts = {c["chart"]: c for c in client.get("/charts?format=json").json()["charts"]}
    assert sorted(charts) == ["gate", "order", "packer"]
    assert (charts["gate"]["instances"], charts["gate"]["in_flight"]) == (3, 1)
    assert 'href="/charts/order"' in client.get("/charts").text


def test_unknown_instance_is_404(client: TestClient) -> None:
    """An id no instance has, or no id at all, answers 404 with a message."""
    assert client.get(f"/instances/{uuid.uuid4()}").status_code == 404
    assert client.get("/instances/not-an-id").status_code == 404


def test_error_answers_carry_a_stable_code(client: TestClient) -> None:
    """A ``?format=json`` error is ``{"error": {code, message, status}}``; an error page shows the code."""
    unknown = uuid.uuid4()
    answer = client.get(f"/instances/{unknown}?format=json")
    assert (answer.status_code, answer.headers["content-type"]) == (404, "application/json")
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == ("unknown-instance", 404)
    assert error["message"].startswith(f"no instance {unknown} in this store")
    page = client.get(f"/instances/{unknown}")
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/plain")
    assert f"no instance {unknown}" in page.text and "code: unknown-instance" in page.text
    by_accept = client.get(f"/instances/{unknown}", headers={"accept": "application/json"})
    assert by_accept.json()["error"]["code"] == "unknown-instance"
    cases = {
        "/charts/nothing?format=json": (404, "unknown-chart"),
        "/instances/not-an-id?format=json": (404, "not-found"),
        "/no/such/page?format=json": (404, "not-found"),
        f"/instances/{unknown}/send?format=json": (405, "method-not-allowed"),
        "/?limit=0&format=json": (400, "bad-request"),
    }
    for url, expected in cases.items():
        answer = client.get(url)
        assert (answer.status_code, answer.json()["error"]["code"]) == expected, url


def test_guard_refusals_carry_a_code(store: Store) -> None:
    """The guard's refusals (no token, a wrong one, a foreign Host) carry their code, as JSON if asked."""
    app = create_app(str(store.path), charts=CHARTS, token="open-sesame-0123456789")
    with TestClient(app, base_url=ORIGIN) as client:
        missing = client.get("/?format=json")
        assert (missing.status_code, missing.json()["error"]["code"]) == (401, "token-required")
        wrong = client.get("/", headers={"authorization": "Bearer wrong"})
        assert wrong.status_code == 403 and "code: forbidden" in wrong.text
    with TestClient(create_app(str(store.path)), base_url="http://evil.example") as client:
        foreign = client.get("/?format=json")
        assert (foreign.status_code, foreign.json()["error"]["code"]) == (421, "host-refused")


def test_an_action_s_engine_error_is_flashed_with_its_code(client: TestClient, store: Store) -> None:
    """An action the engine refuses comes back with the message and the engine error's code."""
    token = csrf(client.get(f"/instances/{store.gate}").text)
    url = f"/instances/{store.gate}/send"
    bad = flash_of(client, post(client, url, {"csrf_token": token, "event": "approve", "data": "NaN"}))
    assert bad.startswith("error:") and "NaN is not a JSON value" in bad and "(code: invalid-json)" in bad


def test_pages_without_charts_draw_the_recorded_shapes(store: Store) -> None:
    """Without ``charts`` the console still draws a chart from the shape the store recorded."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path))) as client:
        page = client.get(f"/instances/{store.gate}").text
        assert 'class="state atomic active" data-state="waiting"' in page
        assert '<option value="approve">approve</option>' in page


# ---------------------------------------------------------------- filters


def ids(client: TestClient, query: str) -> set[str]:
    """The ids of the listing rows a query selects, from the JSON view."""
    document = client.get(f"/?{query}&format=json").json()
    return {row["id"] for row in document["rows"]}


def test_filters_select_by_status_chart_root_owner_and_prefix(client: TestClient, store: Store) -> None:
    """Each filter of the instances page keeps exactly the rows that pass it."""
    everything = client.get("/?format=json").json()
    assert everything["total"] == 9
    assert ids(client, "status=cancelled") == {str(store.cancelled)}
    assert ids(client, "chart=gate") == {str(store.gate), str(store.approved), str(store.cancelled)}
    assert ids(client, "roots=1") == {
        str(store.order),
        str(store.gate),
        str(store.approved),
        str(store.cancelled),
    }
    assert ids(client, "state=in_flight") == {str(store.order), str(store.gate)}
    assert ids(client, f"q={str(store.gate)[:8]}") == {str(store.gate)}
    owner = everything["rows"][0]["owner"]
    assert len(ids(client, f"owner={owner}")) == 9
    assert ids(client, "owner=nobody") == set()
    assert ids(client, "status=parked") == set()
    assert ids(client, "status=orphan") == set()
    assert client.get("/?status=sleeping").status_code == 400


def test_paging_splits_the_rows(client: TestClient) -> None:
    """``limit`` and ``offset`` page through the rows without losing or repeating one."""
    first = client.get("/?limit=4&format=json").json()
    second = client.get("/?limit=4&offset=4&format=json").json()
    third = client.get("/?limit=4&offset=8&format=json").json()
    seen = [row["id"] for page in (first, second, third) for row in page["rows"]]
    assert len(seen) == len(set(seen)) == 9
    assert first["left_off"] == 5
    assert "older →" in client.get("/?limit=4").text
    assert client.get("/?limit=0").status_code == 400


def test_table_fragment_is_the_filtered_table(client: TestClient, store: Store) -> None:
    """The fragment the live refresh fetches is the filtered table alone, without the page around it."""
    fragment = client.get("/instances/table?chart=gate").text
    assert fragment.startswith('<div id="table">')
    assert str(store.gate) in fragment and str(store.order) not in fragment
    assert "<script" not in fragment


# ------------------------------------------------------------------ safety


def test_a_public_host_needs_a_token_or_read_only(store: Store) -> None:
    """Binding any host but the loopback without a token or read-only refuses to start, naming both fixes."""
    problem = binding_problem("0.0.0.0", token=None, read_only=False)
    assert problem is not None and "--token" in problem and "--read-only" in problem
    assert binding_problem("127.0.0.1", token=None, read_only=False) is None
    assert binding_problem("::1", token=None, read_only=False) is None
    assert binding_problem("0.0.0.0", token="t", read_only=False) is None
    assert binding_problem("0.0.0.0", token=None, read_only=True) is None


def test_the_command_refuses_to_start_unsafely_or_without_a_store(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``incarnate console`` on a public host without a token, or over no store, exits 2 saying why."""
    monkeypatch.delenv("INCARNATE_CONSOLE_TOKEN", raising=False)
    assert main(["console", "--db", str(store.path), "--host", "0.0.0.0"]) == 2
    error = capsys.readouterr().err
    assert "incarnate console: error:" in error and "--token" in error and "--read-only" in error
    assert main(["console", "--db", str(tmp_path / "nothing.db")]) == 2
    assert "no store at" in capsys.readouterr().err
    assert main(["console", "--db", str(store.path), "--charts", "tests.console.charts:NOTHING"]) == 2
    assert "NOTHING" in capsys.readouterr().err
    assert root.commands["console"] is command


def test_with_a_token_every_request_needs_it(store: Store) -> None:
    """With a token, a request without it is refused; the header, or ``?token=`` once (a cookie), opens it."""
    app = create_app(str(store.path), charts=CHARTS, token="open-sesame-0123456789")
    with TestClient(app, base_url=ORIGIN) as client:
        refused = client.get("/")
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
        assert client.get(f"/instances/{store.gate}?format=json").status_code == 401
        assert client.get("/static/console.css").status_code == 401
        assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 403
        assert client.get("/?token=wrong").status_code == 403
        assert client.get("/", headers={"authorization": "Bearer open-sesame-0123456789"}).status_code == 200
        opened = client.get("/?token=open-sesame-0123456789&chart=gate", follow_redirects=False)
        assert opened.status_code == 303
        assert opened.headers["location"] == "/?chart=gate"
        cookie = opened.headers["set-cookie"]
        assert f"{TOKEN_COOKIE}=open-sesame-0123456789" in cookie
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert client.get("/").status_code == 200  # the cookie now carries it


def test_read_only_refuses_every_post(store: Store) -> None:
    """A read-only console offers no forms and refuses every POST, even one with a valid CSRF token."""
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS)) as writable:
        token = csrf(writable.get(f"/instances/{store.gate}").text)
    with TestClient(
        base_url=ORIGIN, app=create_app(str(store.path), charts=CHARTS, read_only=True)
    ) as client:
        page = client.get(f"/instances/{store.gate}").text
        assert '<form method="post"' not in page and "read-only" in page
        for action in ("send", "cancel", "terminate", "resolve"):
            answer = post(
                client, f"/instances/{store.gate}/{action}", {"csrf_token": token, "event": "approve"}
            )
            assert answer.status_code == 403, action
            assert "read-only" in answer.text
        assert post(client, "/charts/gate/migrate", {"csrf_token": token}).status_code == 403
    assert inbox(store.path, store.gate) == []


def test_csrf_token_and_origin_are_checked(client: TestClient, store: Store) -> None:
    """A POST without the form's CSRF token, with a wrong one, or from another origin is refused (403)."""
    url = f"/instances/{store.gate}/send"
    token = csrf(client.get(f"/instances/{store.gate}").text)
    missing = post(client, url, {"event": "approve"})
    assert missing.status_code == 403 and "CSRF" in missing.text
    assert post(client, url, {"event": "approve", "csrf_token": "0" * 64}).status_code == 403
    foreign = post(client, url, {"event": "approve", "csrf_token": token}, origin="http://evil.example")
    assert foreign.status_code == 403 and "evil.example" in foreign.text
    no_origin = client.post(url, data={"event": "approve", "csrf_token": token}, follow_redirects=False)
    assert no_origin.status_code == 403 and "Origin" in no_origin.text
    referer = client.post(
        url,
        data={"event": "approve", "csrf_token": token},
        headers={"referer": f"{ORIGIN}/instances/{store.gate}"},
        follow_redirects=False,
    )
    assert referer.status_code == 303
    assert inbox(store.path, store.gate) == ["approve"]


def test_security_headers_on_every_response(client: TestClient) -> None:
    """Every response forbids inline script but by nonce, sniffing and framing, and limits the referrer."""
    page = client.get("/")
    policy = page.headers["content-security-policy"]
    nonce = re.search(r"'nonce-([^']+)'", policy)
    assert nonce is not None and "unsafe-inline" not in policy and "frame-ancestors 'none'" in policy
    assert f'<script nonce="{nonce.group(1)}">' in page.text
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "same-origin"
    assert client.get("/nowhere").headers["x-frame-options"] == "DENY"


def test_stored_markup_is_shown_as_text(client: TestClient, store: Store) -> None:
    """A context value holding a script and an image tag is shown escaped, never as markup."""
    page = client.get(f"/instances/{store.gate}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert page.count("<script") == 1  # the console's own, with its nonce
    fragment = client.get("/instances/table").text
    assert "<img" not in fragment
    assert client.get(f"/instances/{store.gate}?format=json").json()["instance"]["context"] == {"text": XSS}


def test_diagram_escapes_labels_and_marks_active_states() -> None:
    """The SVG escapes every label and gives active states the class ``active`` and a visible stroke."""
    svg = diagram_svg(GATE.shape, ["waiting"], counts={"waiting": 2})
    assert '<g class="state atomic active" data-state="waiting">' in svg
    assert 'stroke="#d9480f" stroke-width="3"' in svg
    assert '<g class="state final" data-state="approved">' in svg
    assert ">2</text>" in svg
    assert "<script" not in diagram_svg(GATE.shape, ['"><script>'])


@pytest.mark.postgres
def test_database_credentials_never_appear(tmp_path: Path) -> None:
    """Over a PostgreSQL URL with a password, no page, JSON view or message shows the password."""
    with storage_for("postgres", tmp_path) as storage:
        assert isinstance(storage, PostgresStorage)
        password = f"pw-{uuid.uuid4().hex[:12]}"
        url = (
            f"postgresql://{storage.user}:{password}@{storage.host}:"
            f"{storage.port}/{storage.dbname}?schema={storage.schema}"
        )
        engine = Engine([GATE], {}, storage=Storage.from_url(url))
        try:
            gate = engine.start("gate", {"text": "check"}).id
            engine.run_until_idle()
        finally:
            engine.close()
        with TestClient(base_url=ORIGIN, app=create_app(url, charts=[GATE])) as client:
            token = csrf(client.get(f"/instances/{gate}").text)
            answers = [
                client.get("/"),
                client.get("/?format=json"),
                client.get(f"/instances/{gate}"),
                client.get(f"/instances/{gate}?format=json"),
                client.get("/charts/gate"),
            ]
            refused = post(client, f"/instances/{gate}/send", {"csrf_token": token, "event": "nope"})
            answers.append(client.get(refused.headers["location"]))
            assert storage.host in answers[0].text  # the store is named ...
            for answer in answers:
                assert password not in answer.text  # ... but never its password


# ---------------------------------------------------------------- actions


def test_sending_an_enabled_event_appends_to_the_inbox(client: TestClient, store: Store) -> None:
    """Sending an event the configuration has a transition for is accepted into the inbox, with its data."""
    token = csrf(client.get(f"/instances/{store.gate}").text)
    answer = post(
        client,
        f"/instances/{store.gate}/send",
        {"csrf_token": token, "event": "approve", "data": '{"by": "ops"}'},
    )
    assert flash_of(client, answer).startswith("ok: accepted &#39;approve&#39;")
    engine = Engine([GATE], {}, storage=Storage.sqlite(str(store.path)))
    try:
        (message,) = engine.instance(store.gate).record.inbox
        assert (message.event.name, message.event.data) == ("approve", {"by": "ops"})
    finally:
        engine.close()


def test_a_disabled_event_or_bad_data_is_refused(client: TestClient, store: Store) -> None:
    """An event with no transition from the configuration, or data that is not JSON, is refused, not sent."""
    token = csrf(client.get(f"/instances/{store.gate}").text)
    url = f"/instances/{store.gate}/send"
    disabled = flash_of(client, post(client, url, {"csrf_token": token, "event": "checkout"}))
    assert disabled.startswith("error:") and "approve, reject" in disabled
    internal = flash_of(client, post(client, url, {"csrf_token": token, "event": "done.invoke.x"}))
    assert internal.startswith("error:")
    bad = flash_of(client, post(client, url, {"csrf_token": token, "event": "approve", "data": "{oops"}))
    assert bad.startswith("error:") and "JSON" in bad
    finished = flash_of(
        client, post(client, f"/instances/{store.approved}/send", {"csrf_token": token, "event": "approve"})
    )
    assert finished.startswith("error:")
    assert inbox(store.path, store.gate) == []


def test_cancel_terminate_and_resolve(client: TestClient, store: Store) -> None:
    """Cancel asks an instance to stop, terminate ends a root's tree, resolve refuses a root not parked."""
    token = csrf(client.get(f"/instances/{store.gate}").text)
    cancelled = flash_of(client, post(client, f"/instances/{store.gate}/cancel", {"csrf_token": token}))
    assert cancelled.startswith("ok: cancel of")
    resolve = flash_of(client, post(client, f"/instances/{store.order}/resolve", {"csrf_token": token}))
    assert resolve.startswith("error:") and "not parked" in resolve
    unconfirmed = flash_of(client, post(client, f"/instances/{store.order}/terminate", {"csrf_token": token}))
    assert unconfirmed.startswith("error:") and "to confirm" in unconfirmed
    confirmed = {"csrf_token": token, "confirm": str(store.order)[:8]}
    ended = flash_of(client, post(client, f"/instances/{store.order}/terminate", confirmed))
    assert ended.startswith("ok: terminated the call tree")
    assert client.get(f"/instances/{store.order}?format=json").json()["instance"]["status"] == "cancelled"
    child = client.get(f"/instances/{store.order}?format=json").json()["tree"]["children"][0]["id"]
    refused = flash_of(client, post(client, f"/instances/{child}/terminate", {"csrf_token": token}))
    assert refused.startswith("error:") and "child" in refused


RENAMED_GATE = Chart(
    "gate",
    state("pending", on=[transition("approve", "approved"), transition("reject", "rejected")]),
    final("approved"),
    final("rejected"),
    context=Note,
)
"""The gate chart after a release that renamed ``waiting`` to ``pending``."""


def test_migration_applies_only_after_its_dry_run(store: Store) -> None:
    """A migration shows its dry run first; applying needs that dry run's proof, and then migrates."""
    charts = [chart for chart in CHARTS if chart.name != "gate"] + [RENAMED_GATE]
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=charts)) as client:
        unmapped = client.get("/charts/gate/migrate?format=json").json()
        assert [v["verdict"] for v in unmapped["verdicts"]] == ["needs-mapping"]
        dry = client.get("/charts/gate/migrate?mapping=waiting%3Dpending")
        assert dry.status_code == 200 and "Apply this migration" in dry.text
        assert "migrates" in dry.text
        token = csrf(dry.text)
        proof = re.search(r'name="proof" value="([0-9a-f]+)"', dry.text)
        assert proof is not None
        forged = post(client, "/charts/gate/migrate", {"csrf_token": token, "mapping": "waiting=pending"})
        assert flash_of(client, forged).startswith("error:")
        assert client.get(f"/instances/{store.gate}?format=json").json()["instance"]["configuration"] == [
            "waiting"
        ]
        applied = post(
            client,
            "/charts/gate/migrate",
            {"csrf_token": token, "mapping": "waiting=pending", "proof": proof.group(1)},
        )
        assert flash_of(client, applied).startswith("ok: migration")
        detail = client.get(f"/instances/{store.gate}?format=json").json()["instance"]
        assert detail["configuration"] == ["pending"]
        assert "is not OLD=NEW" in client.get("/charts/gate/migrate?mapping=nonsense").text


def test_a_parked_root_is_listed_resolvable_and_migrated(store: Store) -> None:
    """A root parked by a changed chart is listed as parked with its incident; migrating unparks it."""
    charts = [chart for chart in CHARTS if chart.name != "gate"] + [RENAMED_GATE]
    engine = Engine(charts, TASKS, storage=Storage.sqlite(str(store.path)))
    try:
        engine.resume_all()  # meets the stored gate, whose state 'waiting' is gone: parks it
    finally:
        engine.close()
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=charts)) as client:
        assert ids(client, "status=parked") == {str(store.gate)}
        page = client.get(f"/instances/{store.gate}").text
        assert "revalidation" in page and "state &#39;waiting&#39; was removed" in page
        assert f'action="/instances/{store.gate}/resolve"' in page
        assert 'href="/charts/gate#migrate"' in page
        assert 'name="event"' not in page  # nothing runs while it is parked, so nothing to send
        token = csrf(page)
        refused = flash_of(client, post(client, f"/instances/{store.gate}/resolve", {"csrf_token": token}))
        assert refused.startswith("error:")
        assert "1 parked root(s)" in client.get("/charts/gate").text
        dry = client.get("/charts/gate/migrate?mapping=waiting%3Dpending").text
        proof = re.search(r'name="proof" value="([0-9a-f]+)"', dry)
        assert proof is not None
        form = {"csrf_token": token, "mapping": "waiting=pending", "proof": proof.group(1)}
        applied = flash_of(client, post(client, "/charts/gate/migrate", form))
        assert "1 parked root(s) resolved" in applied
        detail = client.get(f"/instances/{store.gate}?format=json").json()["instance"]
        assert (detail["status"], detail["configuration"]) == ("running", ["pending"])


NEW_CHARTS = [chart for chart in CHARTS if chart.name != "gate"] + [RENAMED_GATE]
"""The charts of the release that renamed the gate's ``waiting``, for ``--charts``."""


def test_the_console_and_the_cli_give_the_same_verdicts(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console's dry run, ``incarnate check`` and ``migrate --dry-run`` judge every instance alike."""
    import json

    new = "tests.console.test_console_app:NEW_CHARTS"
    with TestClient(base_url=ORIGIN, app=create_app(str(store.path), charts=NEW_CHARTS)) as client:
        console = client.get("/charts/gate/migrate?mapping=waiting%3Dpending&format=json").json()
    capsys.readouterr()
    assert (
        main(["check", new, "--chart", "gate", "--map", "waiting=pending", "--db", str(store.path), "--json"])
        == 0
    )
    checked = json.loads(capsys.readouterr().out)
    argv = ["migrate", "--chart", "gate", "--map", "waiting=pending", "--dry-run", "--json"]
    assert main([*argv, "--charts", new, "--db", str(store.path)]) == 0
    dry = json.loads(capsys.readouterr().out)

    def verdicts(document: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
        return sorted((v["instance_id"], v["verdict"], v["reasons"]) for v in document["verdicts"])

    assert verdicts(console) == verdicts(checked) == verdicts(dry)
    assert [v[1] for v in verdicts(console)] == ["migrates"]
