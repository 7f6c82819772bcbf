"""The Basic HTTP event I/O processor end to end, on loopback: durable posts and the ingress's answers."""

from __future__ import annotations

import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from incarnate import Engine, HttpConfig, IngressServer
from incarnate._http import Answer, post
from incarnate.testing import memory_engine, restart
from statechart import Chart
from statechart.scxml import load

CHART = """<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="python" name="poster"
       initial="s0" version="1.0">
  <datamodel><data id="target" expr="None"/></datamodel>
  <state id="s0">
    <transition event="go" target="s1"><assign location="target" expr="_event.data"/></transition>
  </state>
  <state id="s1">
    <onentry>
      <send id="ping1" event="ping" type="basichttp" targetexpr="target"><param name="n" expr="2"/></send>
    </onentry>
    <transition event="error.communication" target="failed"/>
    <transition event="done" target="done"/>
  </state>
  <final id="failed"/>
  <final id="done"/>
</scxml>"""


@pytest.fixture
def chart(tmp_path: Path) -> Chart[Any]:
    path = tmp_path / "poster.scxml"
    path.write_text(CHART, "utf-8")
    return load(path)


class Recorder:
    """A loopback HTTP server that records each POST (path, headers, body) and answers 202."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                headers = {name.lower(): value for name, value in self.headers.items()}
                recorder.requests.append((self.path, headers, self.rfile.read(length)))
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hook"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    server = Recorder()
    yield server
    server.stop()


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


FAST = HttpConfig("http://127.0.0.1:9/", attempts=3, backoff=0.01, timeout=2.0)


def test_a_send_is_posted_as_a_form_with_its_idempotency_key(chart: Chart[Any], recorder: Recorder) -> None:
    """The post carries ``_scxmleventname``, the params, the origin and ``<instance>/<step>.<n>``."""
    engine = memory_engine([chart], http=FAST)
    try:
        root = engine.start("poster").id
        engine.send(root, "go", recorder.url)
        engine.run_until_idle(100)
        ((path, headers, body),) = recorder.requests
        assert path == "/hook" and body == b"_scxmleventname=ping&n=2"
        assert headers["content-type"] == "application/x-www-form-urlencoded"
        assert headers["idempotency-key"] == f"{root}/2.0"
        assert headers["scxml-origin"] == f"http://127.0.0.1:9/instances/{root}/events"
        assert engine.instance(root).record.outbox == ()
        names = [type(event).__name__ for event in engine.events_of(root)]
        assert names[-1] == "HttpSendSettled"
    finally:
        engine.close()


def test_a_crash_between_post_and_commit_posts_the_same_request_again(
    chart: Chart[Any], recorder: Recorder
) -> None:
    """At least once: a post whose outcome was never committed is posted again after a restart, unchanged."""

    class Crash(Exception):
        pass

    def post_then_crash(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
        post(url, body, headers, timeout)
        raise Crash("the process died before committing the answer")

    engine = memory_engine([chart], http=FAST)
    root = engine.start("poster").id
    engine.send(root, "go", recorder.url)
    engine.parts.commits.http_post = post_then_crash
    with pytest.raises(Crash):
        engine.run_until_idle(100)
    assert len(engine.instance(root).record.outbox) == 1  # recorded, not settled
    engine = restart(engine)
    try:
        engine.run_until_idle(100)
        assert len(recorder.requests) == 2
        first, second = recorder.requests
        assert first[2] == second[2] and first[1]["idempotency-key"] == second[1]["idempotency-key"]
        assert engine.instance(root).record.outbox == ()
    finally:
        engine.close()


def test_a_refused_target_ends_in_error_communication_after_the_bounded_tries(chart: Chart[Any]) -> None:
    """Connection refused on every try: ``attempts`` posts, then ``error.communication`` with the send id."""
    tries: list[str] = []

    def counted(url: str, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
        tries.append(url)
        return post(url, body, headers, timeout)

    engine = memory_engine([chart], http=FAST)
    try:
        engine.parts.commits.http_post = counted
        root = engine.start("poster").id
        target = f"http://127.0.0.1:{_closed_port()}/nobody"
        engine.send(root, "go", target)
        engine.run_until_idle(100)
        assert tries == [target] * 3
        assert engine.snapshot(root).configuration == ("failed",)
        settled = [e for e in engine.events_of(root) if type(e).__name__ == "HttpSendSettled"]
        assert settled[0].status is None and "could not post" in settled[0].error
        triggers = [e.trigger for e in engine.events_of(root) if type(e).__name__ == "Stepped"]
        error = triggers[-1]
        assert (error.name, error.send_id, error.data["target"]) == ("error.communication", "ping1", target)
    finally:
        engine.close()


def _post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.fixture
def engine(chart: Chart[Any]) -> Iterator[Engine]:
    built = memory_engine([chart])
    yield built
    built.close()


FORM = {"Content-Type": "application/x-www-form-urlencoded"}


def test_the_ingress_accepts_a_form_and_answers_202_with_the_sequence(engine: Engine) -> None:
    """A form post is accepted durably: 202, the inbox sequence, the event with its data and origin type."""
    root = engine.start("poster").id
    with IngressServer(engine.send) as server:
        status, body = _post(
            f"{server.url}/instances/{root}/events",
            b"_scxmleventname=go&n=2&who=ann",
            {**FORM, "SCXML-Origin": "http://peer/x"},
        )
    assert (status, body) == (202, {"accepted": True, "sequence": 1})
    (message,) = engine.instance(root).record.inbox
    event = message.event
    assert (event.name, event.data, event.origin) == ("go", {"n": 2, "who": "ann"}, "http://peer/x")
    assert event.origin_type == "http://www.w3.org/TR/scxml/#BasicHTTPEventProcessor"
    assert event.raw is not None and event.raw.startswith(f"POST /instances/{root}/events HTTP/1.1")


def test_the_ingress_takes_a_json_body_and_a_name_in_the_path(engine: Engine) -> None:
    """``{"name", "data"}`` as JSON, and ``…/events/{name}``, which wins over the body's name."""
    root = engine.start("poster").id
    with IngressServer(engine.send) as server:
        base = f"{server.url}/instances/{root}/events"
        json_headers = {"Content-Type": "application/json"}
        assert _post(base, b'{"name": "go", "data": [1]}', json_headers)[0] == 202
        assert _post(f"{base}/done", b'{"name": "go"}', json_headers)[0] == 202
    assert [(m.event.name, m.event.data) for m in engine.instance(root).record.inbox] == [
        ("go", [1]),
        ("done", None),
    ]


def test_the_ingress_answers_400_and_404_with_what_is_wrong(engine: Engine) -> None:
    """A bad body or name is 400 with a message; an unknown or malformed instance id is 404."""
    root = engine.start("poster").id
    with IngressServer(engine.send) as server:
        base = f"{server.url}/instances/{root}/events"
        status, body = _post(base, b"<x/>", {"Content-Type": "text/xml"})
        assert status == 400 and "unsupported content type 'text/xml'" in body["message"]
        status, body = _post(base, b"{", {"Content-Type": "application/json"})
        assert status == 400 and "does not parse" in body["message"]
        status, body = _post(base, b"_scxmleventname=done.invoke.x", FORM)
        assert status == 400 and "done.invoke.x" in body["message"]
        other = "00000000-0000-0000-0000-000000000001"
        assert _post(f"{server.url}/instances/{other}/events", b"", FORM)[0] == 404
        assert _post(f"{server.url}/instances/nope/events", b"", FORM)[0] == 404
    assert engine.instance(root).record.inbox == ()


def test_the_ingress_requires_its_token_when_it_has_one(engine: Engine) -> None:
    """With a token, a request without ``Authorization: Bearer TOKEN`` (or with a wrong one) is 401."""
    root = engine.start("poster").id
    token = "t" * 24
    with IngressServer(engine.send, token=token) as server:
        url = f"{server.url}/instances/{root}/events/go"
        assert _post(url, b"", FORM)[0] == 401
        assert _post(url, b"", {**FORM, "Authorization": "Bearer wrong-token-wrong"})[0] == 401
        assert _post(url, b"", {**FORM, "Authorization": f"Bearer {token}"})[0] == 202


def test_a_repeated_idempotency_key_is_accepted_once(engine: Engine) -> None:
    """The same ``Idempotency-Key`` twice (a redelivered post): one message; the repeat says duplicate."""
    root = engine.start("poster").id
    with IngressServer(engine.send) as server:
        url = f"{server.url}/instances/{root}/events/go"
        headers = {**FORM, "Idempotency-Key": "sender/2.0"}
        assert _post(url, b"", headers) == (202, {"accepted": True, "sequence": 1})
        assert _post(url, b"", headers) == (202, {"accepted": True, "sequence": None, "duplicate": True})
    assert len(engine.instance(root).record.inbox) == 1
