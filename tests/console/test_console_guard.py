"""The console's guard in parts: the Host rule (DNS rebinding), the wrong-token throttle, the token length."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from incarnate._hosts import HostRule, allowed_host, split_host
from incarnate.cli import main
from incarnate.console import create_app
from incarnate.console._security import MIN_TOKEN_LENGTH, TOKEN_VARIABLE, Guard, Secrets, token_problem
from incarnate.console._throttle import Throttle, client_key
from incarnate.errors import ConfigurationError
from tests.console.charts import CHARTS, Store, make_store

TOKEN = "a-console-token-of-32-characters"
ORIGIN = "http://127.0.0.1:8080"


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def never_serve(*args: object, **kwargs: object) -> None:
    """Stands in for the server in command tests: a command that should not serve fails instead of hanging."""
    raise AssertionError("the console started serving")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


# ------------------------------------------------------------------ the Host


def test_split_host_reads_names_ports_and_bracketed_addresses() -> None:
    """A Host value splits into its lower-case name and port; a malformed one is None."""
    assert split_host("LocalHost:8080") == ("localhost", 8080)
    assert split_host("[::1]:8080") == ("::1", 8080)
    assert split_host("[::1]") == ("::1", None)
    assert split_host("console.example.") == ("console.example", None)
    for malformed in ("", ":8080", "host:", "host:port", "host:99999", "[::1", "[nope]:80", "a/b", "u@host"):
        assert split_host(malformed) is None, malformed


def test_the_host_rule_answers_loopback_addresses_its_bind_and_allowed_names() -> None:
    """Without a token the console answers loopback names, IP addresses, its bound name and allowed names."""
    rule = HostRule("127.0.0.1")
    for host in ("localhost", "localhost:8080", "127.0.0.1:8080", "127.9.9.9", "[::1]:8080", "10.0.0.5:80"):
        assert rule.refusal(host) is None, host
    for host in ("evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.evil.example"):
        refusal = rule.refusal(host)
        assert refusal is not None and refusal[0] == 421, host
        assert repr(host) in refusal[1] and "--allow-host" in refusal[1]
    for malformed in (None, "a b", "evil.example:http"):
        refusal = rule.refusal(malformed)
        assert refusal is not None and refusal[0] == 400 and "Host header" in refusal[1], malformed
    named = HostRule("0.0.0.0", ["console.example", "ops.example:8443"])
    assert named.refusal("console.example:8080") is None  # a name without a port: any port
    assert named.refusal("ops.example:8443") is None
    assert named.refusal("ops.example:8080") is not None  # a name with a port: that port only
    assert named.refusal("ops.example") is not None
    assert HostRule("console.internal").refusal("console.internal:8080") is None


def test_an_allowed_host_must_be_a_host_name() -> None:
    """``--allow-host`` refuses a URL or anything but NAME[:PORT], naming the form it takes."""
    assert allowed_host("Console.Example:8443") == ("console.example", 8443)
    for wrong in ("https://console.example", "console.example/", ""):
        with pytest.raises(ConfigurationError, match="host name") as error:
            allowed_host(wrong)
        assert repr(wrong) in str(error.value)


def test_a_rebound_name_reads_nothing_and_posts_nothing(store: Store) -> None:
    """Without a token a request naming another Host is refused (421) before any page or action runs."""
    app = create_app(str(store.path), charts=CHARTS)
    with TestClient(app, base_url="http://evil.example:8080") as client:
        page = client.get(f"/instances/{store.gate}")
        assert page.status_code == 421 and "csrf_token" not in page.text
        assert "'evil.example:8080'" in page.text and "--allow-host evil.example" in page.text
        sent = client.post(
            f"/instances/{store.gate}/send",
            data={"event": "approve", "csrf_token": "0" * 64},
            headers={"origin": "http://evil.example:8080"},
            follow_redirects=False,
        )
        assert sent.status_code == 421
    allowed = create_app(str(store.path), charts=CHARTS, allowed_hosts=["evil.example"])
    with TestClient(allowed, base_url="http://evil.example:8080") as client:
        assert client.get("/").status_code == 200


def test_with_a_token_any_host_is_answered_but_only_with_the_token(store: Store) -> None:
    """With a token the Host is not checked: a rebound page has no token, so it gets 401, not a page."""
    app = create_app(str(store.path), charts=CHARTS, token=TOKEN)
    with TestClient(app, base_url="http://console.example") as client:
        assert client.get("/").status_code == 401
        assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


# ------------------------------------------------------------- the token


def test_a_short_token_is_refused() -> None:
    """A token under 16 characters is refused with its length, the minimum and how to make a good one."""
    problem = token_problem("x" * (MIN_TOKEN_LENGTH - 1))
    assert problem is not None and "15 characters" in problem and "at least 16" in problem
    assert "secrets.token_urlsafe" in problem and "x" * 15 not in problem
    assert token_problem("x" * MIN_TOKEN_LENGTH) is None and token_problem(None) is None
    with pytest.raises(ConfigurationError, match="at least 16"):
        create_app("console.db", token="open-sesame")


def test_the_command_refuses_a_short_token_in_one_line(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``incarnate console`` exits 2 with one line for a short ``--token`` or ``$INCARNATE_CONSOLE_TOKEN``."""
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    monkeypatch.setattr(uvicorn.Server, "run", never_serve)
    assert main(["console", "--db", str(store.path), "--token", "hunter2-secret"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "incarnate console: error:" in error
    assert "at least 16" in error and "secrets.token_urlsafe(24)" in error and "hunter2" not in error
    monkeypatch.setenv(TOKEN_VARIABLE, "hunter2-secret")
    assert main(["console", "--db", str(store.path), "--host", "0.0.0.0"]) == 2
    error = capsys.readouterr().err
    assert "at least 16" in error and TOKEN_VARIABLE in error and "hunter2" not in error


# ------------------------------------------------------------ the throttle


def test_the_throttle_doubles_the_wait_after_the_free_failures() -> None:
    """Five wrong tokens are free; then the client waits 1 s, 2 s, 4 s … at most the longest wait."""
    clock = Clock()
    throttle = Throttle(clock=clock, longest_wait=8.0)
    for _ in range(4):
        throttle.failed("10.0.0.1")
        assert throttle.wait("10.0.0.1") == 0
    waits = []
    for _ in range(6):
        throttle.failed("10.0.0.1")
        waits.append(throttle.wait("10.0.0.1"))
    assert waits == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert throttle.wait("10.0.0.2") == 0  # another client is not slowed
    clock.now += 8.0
    assert throttle.wait("10.0.0.1") == 0
    throttle.succeeded("10.0.0.1")
    throttle.failed("10.0.0.1")
    assert throttle.wait("10.0.0.1") == 0  # a right token cleared the count


def test_the_throttle_forgets_quiet_clients_and_keeps_a_bounded_number() -> None:
    """A client's count restarts after a quiet spell, and only the most recent clients are remembered."""
    clock = Clock()
    throttle = Throttle(clock=clock, free=1, forget_after=60.0, kept=3)
    throttle.failed("a")
    assert throttle.wait("a") == 1.0
    clock.now += 61.0
    throttle.failed("a")
    assert throttle.wait("a") == 1.0  # counted from one again, not doubled
    for client in ("b", "c", "d"):
        throttle.failed(client)
    assert len(throttle) == 3 and throttle.wait("a") == 0  # "a" failed longest ago: forgotten


def test_clients_are_counted_by_address_and_ipv6_network() -> None:
    """An IPv4 client counts by its address (mapped or not), an IPv6 one by its /64 network."""
    assert client_key("192.0.2.7") == "192.0.2.7" == client_key("::ffff:192.0.2.7")
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:bbbb::9") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key(None) == "" and client_key("testclient") == "testclient"


@pytest.fixture
def guarded() -> Iterator[tuple[TestClient, Clock]]:
    """A client of a one-page app behind the guard with a token, and the clock its throttle reads."""

    async def page(request: Request) -> PlainTextResponse:
        return PlainTextResponse("the page")

    clock = Clock()
    app = Guard(
        Starlette(routes=[Route("/", page)]),
        secrets=Secrets(TOKEN),
        read_only=False,
        throttle=Throttle(clock=clock),
    )
    with TestClient(app, base_url=ORIGIN) as client:
        yield client, clock


def test_wrong_tokens_shut_the_client_out_and_the_right_one_works_after(
    guarded: tuple[TestClient, Clock],
) -> None:
    """After five wrong tokens even the right one gets 429 and Retry-After; after the wait it gets in."""
    client, clock = guarded
    right = {"authorization": f"Bearer {TOKEN}"}
    for _ in range(5):
        assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 403
    shut = client.get("/", headers=right)
    assert shut.status_code == 429 and shut.headers["retry-after"] == "1"
    assert "too many wrong tokens" in shut.text and "1 second" in shut.text
    assert client.get("/?token=wrong").status_code == 429  # not checked, so not counted either
    clock.now += 1.0
    opened = client.get("/", headers=right)
    assert opened.status_code == 200 and opened.text == "the page"
    assert client.get("/", headers={"authorization": "Bearer wrong"}).status_code == 403  # counted anew


def test_a_missing_token_is_not_a_wrong_one(guarded: tuple[TestClient, Clock]) -> None:
    """Requests without any token (a first visit) are answered 401 however many there are, never 429."""
    client, _ = guarded
    for _ in range(10):
        assert client.get("/").status_code == 401


def test_the_console_throttles_wrong_tokens(store: Store) -> None:
    """The console's own guard answers 429 with Retry-After once a client has sent five wrong tokens."""
    app = create_app(str(store.path), charts=CHARTS, token=TOKEN)
    with TestClient(app, base_url=ORIGIN) as client:
        answers = [client.get("/?token=wrong").status_code for _ in range(10)]
        assert answers[:5] == [403] * 5 and 429 in answers[5:]
        shut = client.get("/?token=wrong")
        assert shut.status_code == 429 and int(shut.headers["retry-after"]) >= 1
