"""The console over real HTTP: uvicorn on a loopback port, forged Host headers, a port already in use."""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import urlencode

import pytest
import uvicorn
from starlette.applications import Starlette

from incarnate.cli import main
from incarnate.console import create_app
from incarnate.console._serve import listen
from tests.console.charts import CHARTS, Store, make_store
from tests.console.test_console_app import inbox
from tests.console.test_console_guard import never_serve

REPOSITORY = Path(__file__).resolve().parents[2]
TOKEN = "a-console-token-of-32-characters"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


@contextlib.contextmanager
def served(app: Starlette) -> Iterator[int]:
    """``app`` served by uvicorn in a thread on a free loopback port, as the command does; yields the port."""
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the console's server did not start within 20 s")
        time.sleep(0.02)
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def request(
    port: int, method: str, path: str, host: str, headers: Mapping[str, str] | None = None, body: str = ""
) -> tuple[int, dict[str, str], str]:
    """One HTTP request to the loopback ``port`` with the Host header ``host``: its status, headers, body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        sent = {"Host": host, **(headers or {})}
        if body:
            sent["Content-Type"] = "application/x-www-form-urlencoded"
        connection.request(method, path, body=body or None, headers=sent)
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read().decode()
    finally:
        connection.close()


def csrf(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = re.search(r'name="csrf_token" value="([0-9a-f]+)"', html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def test_a_rebound_name_is_refused_over_http(store: Store) -> None:
    """Over HTTP a page or action named by a re-pointed Host is refused 421; the loopback names are served."""
    with served(create_app(str(store.path), charts=CHARTS)) as port:
        evil = f"evil.example:{port}"
        status, _, text = request(port, "GET", f"/instances/{store.gate}", evil)
        assert status == 421 and "csrf_token" not in text
        assert f"'{evil}'" in text and "--allow-host evil.example" in text
        status, _, page = request(port, "GET", f"/instances/{store.gate}", f"127.0.0.1:{port}")
        assert status == 200
        form = urlencode({"event": "approve", "csrf_token": csrf(page)})
        status, _, _ = request(
            port, "POST", f"/instances/{store.gate}/send", evil, {"Origin": f"http://{evil}"}, form
        )
        assert status == 421
        assert inbox(store.path, store.gate) == []
        for host in (f"localhost:{port}", "localhost", f"[::1]:{port}"):
            assert request(port, "GET", "/charts", host)[0] == 200, host
        status, headers, _ = request(
            port,
            "POST",
            f"/instances/{store.gate}/send",
            f"localhost:{port}",
            {"Origin": f"http://localhost:{port}"},
            form,
        )
        assert status == 303 and headers["location"].startswith(f"/instances/{store.gate}?flash=")
        assert inbox(store.path, store.gate) == ["approve"]


def test_an_allowed_name_and_a_token_over_http(store: Store) -> None:
    """Over HTTP an ``allowed_hosts`` name is served, and with a token any Host gets 401 without it."""
    with served(create_app(str(store.path), charts=CHARTS, allowed_hosts=["console.example"])) as port:
        assert request(port, "GET", "/", f"console.example:{port}")[0] == 200
        assert request(port, "GET", "/", f"other.example:{port}")[0] == 421
    with served(create_app(str(store.path), charts=CHARTS, token=TOKEN)) as port:
        assert request(port, "GET", "/", "evil.example")[0] == 401
        bearer = {"Authorization": f"Bearer {TOKEN}"}
        assert request(port, "GET", "/", "console.example", bearer)[0] == 200


def test_a_port_in_use_is_one_line_and_exit_2(
    store: Store, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its port held by another socket the command exits 2 naming the port and --port, never serving."""
    monkeypatch.delenv("INCARNATE_CONSOLE_TOKEN", raising=False)
    monkeypatch.setattr(uvicorn.Server, "run", never_serve)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main(["console", "--db", str(store.path), "--port", str(port)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "incarnate console: error:" in error
    assert f"port {port} is in use" in error and "--port" in error
    assert "incarnate console on" not in error


def test_the_command_serves_on_the_port_it_names(store: Store, tmp_path: Path) -> None:
    """``incarnate console --port 0`` says which port it serves on, and serves it with its Host rule."""
    command = [sys.executable, "-m", "incarnate", "console", "--db", str(store.path), "--port", "0"]
    process = subprocess.Popen(
        [*command, "--charts", "tests.console.charts:CHARTS", "--allow-host", "console.example"],
        cwd=REPOSITORY,
        stderr=subprocess.PIPE,
        text=True,
        env={key: value for key, value in os.environ.items() if key != "INCARNATE_CONSOLE_TOKEN"},
    )
    try:
        assert process.stderr is not None
        ready, _, _ = select.select([process.stderr], [], [], 30)
        assert ready, "the console printed nothing within 30 s"
        line = process.stderr.readline()
        found = re.search(r"incarnate console on http://127\.0\.0\.1:(\d+)/ over ", line)
        assert found is not None, line
        port = int(found.group(1))
        assert port != 0
        deadline = time.monotonic() + 20
        while True:
            try:
                status = request(port, "GET", "/", f"127.0.0.1:{port}")[0]
                break
            except OSError:
                assert time.monotonic() < deadline, "the console did not answer within 20 s"
                time.sleep(0.05)
        assert status == 200
        assert request(port, "GET", "/", f"console.example:{port}")[0] == 200
        assert request(port, "GET", "/", f"evil.example:{port}")[0] == 421
    finally:
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
