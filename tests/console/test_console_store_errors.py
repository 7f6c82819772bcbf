"""When the store's connection fails: a page reads again, an action does not, a store down is 503."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError
from starlette.testclient import TestClient

from incarnate import Engine, PostgresStorage, StorageError
from incarnate.console import create_app
from incarnate.console._console import READ_ATTEMPTS, connection_failed
from tests.console.charts import CHARTS, GATE, Store, make_store
from tests.console.test_console_app import inbox
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT, storage_for

ORIGIN = "http://127.0.0.1:8080"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """A fresh store with an order at its approval gate and three gates."""
    return make_store(tmp_path / "console.db")


@pytest.fixture
def client(store: Store) -> Iterator[TestClient]:
    """A client of a console with actions over ``store``; server errors come back as responses."""
    app = create_app(str(store.path), charts=CHARTS)
    with TestClient(app, base_url=ORIGIN, raise_server_exceptions=False) as client:
        yield client


def lose_connection(monkeypatch: pytest.MonkeyPatch, method: str, times: int) -> Callable[[], int]:
    """Make the engine's ``method`` fail ``times`` times as a lost connection does; returns its call count."""
    real = getattr(Engine, method)
    calls = 0

    def failing(self: Engine, *args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= times:
            # What the engine raises when the library's recorder meets a connection the server closed.
            try:
                raise OperationalError("server closed the connection unexpectedly")
            except OperationalError as error:
                raise StorageError(f"could not read instance: {error}") from error
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Engine, method, failing)
    return lambda: calls


def test_connection_errors_are_told_from_others() -> None:
    """An error from a connection error counts as one, through causes and shown contexts; others do not."""
    import sqlite3

    import psycopg

    for cause in (
        OperationalError("gone"),
        psycopg.OperationalError("gone"),
        sqlite3.OperationalError("locked"),
    ):
        try:
            raise StorageError("could not read") from cause
        except StorageError as error:
            assert connection_failed(error), cause
    try:
        try:
            raise psycopg.InterfaceError("the connection is closed")
        except psycopg.InterfaceError:
            raise RuntimeError("while cleaning up")  # noqa: B904 (the context is the point)
    except RuntimeError as error:
        assert connection_failed(error)
    try:
        try:
            raise psycopg.InterfaceError("the connection is closed")
        except psycopg.InterfaceError:
            raise LookupError("no such instance") from None
    except LookupError as error:
        assert not connection_failed(error)  # "from None" says the connection error is not the story
    assert not connection_failed(StorageError("could not read: a row does not decode"))
    assert not connection_failed(ValueError("no such state"))


def test_a_page_reads_again_after_a_lost_connection(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose read fails on the connection is read again and served, not answered 500."""
    calls = lose_connection(monkeypatch, "instance", times=1)
    page = client.get(f"/instances/{store.gate}")
    assert page.status_code == 200, page.text
    assert 'data-state="waiting"' in page.text and calls() > 1


def test_a_store_that_stays_down_answers_503(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A page whose every read fails on the connection answers 503, saying the store is unreachable."""
    calls = lose_connection(monkeypatch, "instance", times=1_000)
    page = client.get(f"/instances/{store.gate}")
    assert page.status_code == 503 and page.headers["retry-after"] == "5"
    assert "could not reach its store" in page.text and "server closed the connection" in page.text
    assert "code: store-unreachable" in page.text
    assert calls() == READ_ATTEMPTS
    answer = client.get(f"/instances/{store.gate}?format=json")
    assert (answer.status_code, answer.json()["error"]["code"]) == (503, "store-unreachable")
    monkeypatch.undo()
    assert client.get("/instances/table").status_code == 200


def test_an_action_is_never_run_twice(
    client: TestClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An action whose write fails on the connection is reported, not run again: it may have committed."""
    page = client.get(f"/instances/{store.gate}").text
    token = re.search(r'name="csrf_token" value="([0-9a-f]+)"', page)
    assert token is not None
    calls = lose_connection(monkeypatch, "send", times=1)
    answer = client.post(
        f"/instances/{store.gate}/send",
        data={"event": "approve", "csrf_token": token.group(1)},
        headers={"origin": ORIGIN},
        follow_redirects=False,
    )
    assert answer.status_code == 303 and calls() == 1
    flashed = client.get(answer.headers["location"]).text
    assert "server closed the connection" in flashed
    assert inbox(store.path, store.gate) == []


@pytest.mark.postgres
def test_the_first_pages_after_the_database_drops_its_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After PostgreSQL ends every connection of the console (as a restart does), its pages are served."""
    import psycopg

    name = f"incarnate-console-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("PGAPPNAME", name)  # libpq names the console's connections, so only they are ended
    with storage_for("postgres", tmp_path) as storage:
        engine = Engine([GATE], {}, storage=storage)
        try:
            gate = engine.start("gate", {"text": "check"}).id
            engine.run_until_idle()
        finally:
            engine.close()
        app = create_app(storage, charts=[GATE])
        with TestClient(app, base_url=ORIGIN, raise_server_exceptions=False) as client:
            assert client.get("/").status_code == 200
            assert isinstance(storage, PostgresStorage)
            user = os.environ.get("PGUSER", storage.user)
            with psycopg.connect(
                host=PG_HOST,
                port=PG_PORT,
                dbname=PG_DBNAME,
                user=user,
                autocommit=True,
                application_name="ender",
            ) as admin:
                ended = admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                    (name,),
                ).fetchall()
            assert ended, "the console had no connection to end"
            for path in ("/", f"/instances/{gate}", "/charts/gate", "/charts"):
                page = client.get(path)
                assert page.status_code == 200, f"{path}: {page.text}"
