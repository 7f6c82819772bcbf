"""``incarnate ingress``: a real process accepts events over HTTP; a real worker runs them.

Every process is a real OS process on a real SQLite file; the requests go
over loopback. Every wait is bounded, and every process is killed in a
``finally``.
"""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.integration.test_worker import ROOT, run, start_in_client, status, store, wait_for, worker

TOKEN = "an-ingress-token-of-24-chars"
FORM = "application/x-www-form-urlencoded"


@contextlib.contextmanager
def ingress(db: str, *options: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """``incarnate ingress`` on ``db``; yields its base URL once it says it serves."""
    command = [sys.executable, "-m", "incarnate", "ingress", "--db", db, "--port", "0", *options]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # the first line names the port the system chose
        found = re.search(r"on (http://127\.0\.0\.1:\d+)/instances/ID/events", line)
        assert found is not None, line + (process.stderr.read() if process.poll() is not None else "")
        yield found[1], process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


def post(url: str, body: bytes, content_type: str, token: str | None = None) -> tuple[int, dict[str, object]]:
    """POST ``body``; the status and the JSON answer."""
    headers = {"Content-Type": content_type}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_an_event_posted_to_the_ingress_is_run_by_a_worker(tmp_path: Path) -> None:
    """A gate answered over HTTP (202) finishes on the worker; a wrong token is 401, an unknown id 404."""
    with store("sqlite", tmp_path) as (_, db, engine), ingress(db, "--token", TOKEN) as (base, process):
        with worker(tmp_path, db, "--no-recovery", "--ingress-url", base) as running:
            (gate,) = start_in_client(db, "gate")
            refused, _ = post(f"{base}/instances/{gate}/events/answer", b"", "text/plain", "x" * 20)
            assert refused == 401
            form = b"_scxmleventname=answer&who=ops"
            code, answer = post(f"{base}/instances/{gate}/events", form, FORM, TOKEN)
            assert (code, answer["accepted"]) == (202, True), answer
            took = wait_for(lambda: status(engine, gate) == "done", 10.0)
            assert took is not None, running.output()
            missing, error = post(f"{base}/instances/{uuid.uuid4()}/events/answer", b"", FORM, TOKEN)
            assert missing == 404, error
            running.terminate()
        process.send_signal(signal.SIGTERM)
        assert process.wait(10) == 0


def test_an_scxml_instance_sends_itself_an_event_over_http(tmp_path: Path) -> None:
    """``<send type=basichttp>`` to its own location: the worker posts it, the ingress accepts it back."""
    charts = str(Path(__file__).with_name("http_echo.scxml"))
    with store("sqlite", tmp_path) as (_, db, engine), ingress(db) as (base, _):
        options = ("--no-recovery", "--charts", charts, "--ingress-url", base)
        with worker(tmp_path, db, *options) as running:
            started = run(sys.executable, "-m", "incarnate", "start", "echo", "--db", db, "--charts", charts)
            assert started.returncode == 0, started.stderr
            echo = uuid.UUID(started.stdout.strip())
            sent = run(
                sys.executable, "-m", "incarnate", "send", str(echo), "go", "--db", db, "--charts", charts
            )
            assert sent.returncode == 0, sent.stderr
            took = wait_for(lambda: status(engine, echo) == "done", 15.0, 0.1)
            assert took is not None, running.output()
            parts = engine.instance(echo).record.snapshot_parts
            assert parts is not None and parts["configuration"] == ["heard"]
            running.terminate()


def test_the_ingress_refuses_to_start_unsafely(tmp_path: Path) -> None:
    """Another address without a token, a short token, a port in use: exit 2 with what to do."""
    with store("sqlite", tmp_path) as (_, db, _engine):
        exposed = run(sys.executable, "-m", "incarnate", "ingress", "--db", db, "--host", "0.0.0.0")
        assert exposed.returncode == 2 and "without a token" in exposed.stderr
        short = run(sys.executable, "-m", "incarnate", "ingress", "--db", db, "--token", "short")
        assert short.returncode == 2 and "at least 16" in short.stderr
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            port = str(held.getsockname()[1])
            busy = run(sys.executable, "-m", "incarnate", "ingress", "--db", db, "--port", port)
        assert busy.returncode == 2 and "in use" in busy.stderr
