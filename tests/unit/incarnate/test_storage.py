"""Storage: one class per store kind, found by URL scheme or PERSISTENCE_MODULE, never showing a secret."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest

from incarnate import (
    ConfigurationError,
    Engine,
    MemoryStorage,
    PostgresStorage,
    SQLiteStorage,
    Storage,
    StorageError,
    VirtualClock,
    register_storage,
)
from incarnate._storage import unregister_storage
from incarnate.cli import main
from incarnate.cli._common import hide, redact
from incarnate.testing import StoreContract
from tests.scenarios import charts

PASSWORD = "s3cr3t-Pw"

# ------------------------------------------------------------------ SQLite


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("work/incarnate.db", "work/incarnate.db"),
        ("/var/lib/incarnate.db", "/var/lib/incarnate.db"),
        ("sqlite:///work/incarnate.db", "work/incarnate.db"),
        ("sqlite:////var/lib/incarnate.db", "/var/lib/incarnate.db"),
        ("SQLITE:///x.db", "x.db"),
    ],
)
def test_sqlite_from_url(text: str, path: str) -> None:
    """A bare path or sqlite:///PATH is a SQLite file; SQLiteStorage.from_url reads them too."""
    assert Storage.from_url(text) == Storage.sqlite(path) == SQLiteStorage(path)
    assert SQLiteStorage.from_url(text) == SQLiteStorage(path)


def test_sqlite_from_env() -> None:
    """SQLITE_DBNAME and SQLITE_LOCK_TIMEOUT; SQLite at ./incarnate.db when nothing is set."""
    assert Storage.from_env({}) == SQLiteStorage("incarnate.db")
    env = {"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": "x.db", "SQLITE_LOCK_TIMEOUT": "3"}
    assert Storage.from_env(env) == SQLiteStorage("x.db", lock_timeout=3)
    assert SQLiteStorage.from_env({"SQLITE_DBNAME": "y.db"}) == SQLiteStorage("y.db")


def test_sqlite_describe_url_and_secrets() -> None:
    """A SQLite file describes itself by its path, writes sqlite:///PATH, and has no secret."""
    storage = SQLiteStorage("work/incarnate.db")
    assert storage.describe() == "SQLite file work/incarnate.db"
    assert storage.url() == "sqlite:///work/incarnate.db"
    assert storage.secrets() == ()
    assert Storage.from_url(storage.url()) == storage


def test_sqlite_missing_file(tmp_path: Path) -> None:
    """A path naming no file is missing, with the fix; an existing file or a file: URI is not."""
    absent = SQLiteStorage(str(tmp_path / "none.db"))
    assert absent.missing("--db") == (
        f"no store at {absent.path!r} (named by --db); pass --db PATH naming the SQLite file an engine wrote"
    )
    (tmp_path / "some.db").write_bytes(b"")
    assert SQLiteStorage(str(tmp_path / "some.db")).missing("--db") is None
    assert SQLiteStorage("file:x?mode=memory&cache=shared").missing("--db") is None


def test_sqlite_timeouts() -> None:
    """SQLite has one timeout, the lock's; asking for another names the ones it has."""
    assert SQLiteStorage("a.db").timeout("lock_timeout", {}) == 30
    assert SQLiteStorage("a.db").timeout("lock_timeout", {"SQLITE_LOCK_TIMEOUT": "4"}) == 4
    assert SQLiteStorage("a.db", lock_timeout=2).timeout("lock_timeout", {"SQLITE_LOCK_TIMEOUT": "4"}) == 2
    with pytest.raises(
        ConfigurationError, match=r"no timeout 'connect_timeout'; its timeouts are \['lock_timeout'\]"
    ):
        SQLiteStorage("a.db").timeout("connect_timeout")


# ------------------------------------------------------------------ PostgreSQL


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "postgresql://app@db.example:6543/orders",
            PostgresStorage("orders", host="db.example", port=6543, user="app"),
        ),
        (
            f"postgresql://app:{PASSWORD}@db.example/orders?schema=tenant_1",
            PostgresStorage("orders", host="db.example", user="app", password=PASSWORD, schema="tenant_1"),
        ),
        ("postgres://db.example/orders", PostgresStorage("orders", host="db.example")),
        ("postgresql://app:p%40ss@h/db", PostgresStorage("db", host="h", user="app", password="p@ss")),
    ],
)
def test_postgres_from_url(text: str, expected: PostgresStorage) -> None:
    """Each PostgreSQL URL form reads as the storage its parts name (port 5432, user postgres by default)."""
    assert Storage.from_url(text) == expected
    assert PostgresStorage.from_url(text) == expected


def test_postgres_from_env() -> None:
    """POSTGRES_* name the database; the library's module, ours, and our former one select PostgreSQL."""
    env = {
        "PERSISTENCE_MODULE": "eventsourcing.postgres",
        "POSTGRES_DBNAME": "orders",
        "POSTGRES_HOST": "db",
        "POSTGRES_PORT": "6543",
        "POSTGRES_USER": "app",
        "POSTGRES_PASSWORD": "secret",
        "POSTGRES_SCHEMA": "tenant1",
        "POSTGRES_STATEMENT_TIMEOUT": "9",
        "CREATE_TABLE": "n",
    }
    expected = PostgresStorage(
        "orders",
        host="db",
        port=6543,
        user="app",
        password="secret",
        schema="tenant1",
        create_tables=False,
        statement_timeout=9,
    )
    assert Storage.from_env(env) == expected
    for module in ("postgres", "incarnate.store._postgres:Factory", "incarnate._postgres:Factory"):
        assert Storage.from_env({**env, "PERSISTENCE_MODULE": module}) == expected
    assert PostgresStorage.from_env({k: v for k, v in env.items() if k != "PERSISTENCE_MODULE"}) == expected


def test_postgres_describe_url_and_secrets() -> None:
    """describe(), url() and repr() leave the password out; secrets() names it, and url() reads back."""
    storage = Storage.from_url(f"postgresql://app:{PASSWORD}@db.example:5432/orders?schema=s")
    assert isinstance(storage, PostgresStorage) and storage.password == PASSWORD
    assert storage.describe() == "PostgreSQL app@db.example:5432/orders schema s"
    assert storage.url() == "postgresql://app@db.example:5432/orders?schema=s"
    assert storage.secrets() == (PASSWORD,)
    assert PASSWORD not in repr(storage) and "password='***'" in repr(storage)
    assert PostgresStorage("orders").secrets() == ()
    assert Storage.from_url(storage.url()) == attrs.evolve(storage, password="")


def test_postgres_needs_a_database_name() -> None:
    """There is no default database: leaving it out, in code, a URL or the environment, names the fix."""
    with pytest.raises(ConfigurationError, match="needs the database name"):
        Storage.postgres("")
    with pytest.raises(ConfigurationError, match="needs the database name"):
        PostgresStorage("")
    with pytest.raises(ConfigurationError, match="needs POSTGRES_DBNAME"):
        Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.postgres", "POSTGRES_HOST": "db"})


def test_postgres_timeouts() -> None:
    """Each PostgreSQL timeout is its field, else its variable, else its default."""
    storage = PostgresStorage("orders", connect_timeout=7)
    env = {"POSTGRES_STATEMENT_TIMEOUT": "11"}
    assert {name: storage.timeout(name, env) for name in PostgresStorage.timeouts} == {
        "connect_timeout": 7,
        "statement_timeout": 11,
        "lock_timeout": 10,
        "idle_in_transaction_timeout": 5,
    }


# ------------------------------------------------------------------ memory


def test_memory_from_url_env_and_describe() -> None:
    """memory:// and memory://NAME name an in-memory store, as PERSISTENCE_MODULE=eventsourcing.popo does."""
    assert Storage.from_url("memory://") == MemoryStorage() == Storage.popo()
    assert Storage.from_url("memory://tickets") == MemoryStorage("tickets")
    assert Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.popo"}) == MemoryStorage()
    assert Storage.from_env(
        {"PERSISTENCE_MODULE": "popo", "INCARNATE_MAX_PAYLOAD_BYTES": "9"}
    ) == MemoryStorage(max_payload_bytes=9)
    assert MemoryStorage("tickets").describe() == "in-memory (POPO) store 'tickets'"
    assert MemoryStorage().describe() == "in-memory (POPO)"
    assert MemoryStorage("tickets").secrets() == ()
    with pytest.raises(ConfigurationError, match="has no URL: it lives in one process"):
        MemoryStorage("tickets").url()
    with pytest.raises(ConfigurationError, match="write memory:// or memory://NAME"):
        Storage.from_url("memory://a/b")


def test_a_memory_store_is_missing_until_made_and_forgotten_after() -> None:
    """A named in-memory store exists in this process once opened, and no longer once forgotten."""
    storage = MemoryStorage("test-storage-missing")
    assert storage.missing("--db") is not None
    storage.open()
    assert storage.missing("--db") is None
    storage.forget()
    assert storage.missing("--db") is not None


# ------------------------------------------------------------------ the registry


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (f"mysql://app:{PASSWORD}@db.example/orders", "scheme 'mysql' is not supported"),
        (f"postgresql://app:{PASSWORD}@db.example", "needs a host and a database name"),
        (f"postgresql://app:{PASSWORD}@db.example:port/orders", "has a bad port"),
        (f"postgresql://app:{PASSWORD}@db.example/orders?sslmode=off", "unsupported parameters ['sslmode']"),
        ("sqlite://relative.db", "names no file"),
        ("", "an empty store name"),
    ],
)
def test_a_bad_url_names_the_accepted_forms(text: str, fragment: str) -> None:
    """A bad --db value is a ConfigurationError naming the fault and the accepted forms, never a password."""
    with pytest.raises(ConfigurationError) as raised:
        Storage.from_url(text)
    message = str(raised.value)
    assert fragment in message
    assert PASSWORD not in message
    assert "sqlite:///" in message or "?schema=" in message


def test_an_unknown_scheme_names_every_known_form() -> None:
    """The registry refuses a scheme no kind registered, listing each registered kind's URL form."""
    with pytest.raises(ConfigurationError) as raised:
        Storage.from_url("oracle://db/orders")
    message = str(raised.value)
    assert "store URL scheme 'oracle' is not supported" in message
    for kind in (SQLiteStorage, PostgresStorage, MemoryStorage):
        assert kind.url_form in message


def test_an_unknown_module_names_the_known_ones() -> None:
    """An unknown PERSISTENCE_MODULE is refused, naming each kind's module."""
    with pytest.raises(ConfigurationError, match="not supported") as raised:
        Storage.from_env({"PERSISTENCE_MODULE": "eventsourcing.mongo"})
    for module in ("eventsourcing.sqlite", "eventsourcing.postgres", "eventsourcing.popo"):
        assert module in str(raised.value)


def test_a_kind_reads_only_its_own_urls_and_variables() -> None:
    """SQLiteStorage.from_url refuses a PostgreSQL URL, and PostgresStorage.from_env a SQLite module."""
    with pytest.raises(ConfigurationError, match="names a PostgresStorage"):
        SQLiteStorage.from_url("postgresql://h/db")
    with pytest.raises(ConfigurationError, match="selects SQLiteStorage, not PostgresStorage"):
        PostgresStorage.from_env({"PERSISTENCE_MODULE": "eventsourcing.sqlite"})


def test_the_base_is_abstract_and_each_kind_opens_its_adapter() -> None:
    """Storage itself names no store; each kind opens the adapter of its own."""
    with pytest.raises(TypeError):
        Storage()  # type: ignore[abstract]
    assert [
        Storage.popo().open().kind,
        Storage.sqlite("x.db").open().kind,
        Storage.postgres("o").open().kind,
    ] == [
        "memory",
        "sqlite",
        "postgres",
    ]


def test_a_scheme_taken_by_another_kind_is_refused() -> None:
    """Registering a kind under a scheme another kind holds names both."""

    @attrs.frozen
    class Impostor(MemoryStorage):
        schemes = ("sqlite",)

    with pytest.raises(
        ConfigurationError, match="URL scheme 'sqlite' of Impostor is already registered by SQLiteStorage"
    ):
        register_storage(Impostor)


def test_payload_limit_and_extra_settings() -> None:
    """Every kind has the payload limit and the extra eventsourcing settings."""
    storage = SQLiteStorage("a.db", max_payload_bytes=1000, extra=(("IS_SNAPSHOTTING_ENABLED", "n"),))
    assert storage.payload_limit({}) == 1000
    assert storage.env({})["IS_SNAPSHOTTING_ENABLED"] == "n"
    assert MemoryStorage().payload_limit({"INCARNATE_MAX_PAYLOAD_BYTES": "77"}) == 77


# ------------------------------------------------------------------ a kind of one's own


@attrs.frozen
class ToyStorage(MemoryStorage):
    """A store kind of a test's own: ``toy://NAME``, kept in memory by the in-memory adapter.

    Everything a kind needs is in this class and its registration.
    """

    schemes = ("toy",)
    modules = ("tests.toy",)
    url_form = "toy://NAME"

    name: str = "toy"

    @classmethod
    def parse_url(cls, text: str) -> ToyStorage:
        """``toy://NAME``."""
        return cls(text.partition("://")[2] or "toy")

    @classmethod
    def parse_env(cls, env: Mapping[str, str]) -> ToyStorage:
        """``TOY_NAME``."""
        return cls(env.get("TOY_NAME", "toy"))

    def describe(self) -> str:
        """``toy store NAME``."""
        return f"toy store {self.name}"

    def url(self) -> str:
        """``toy://NAME``."""
        return f"toy://{self.name}"


@pytest.fixture
def toy() -> Iterator[type[ToyStorage]]:
    """ToyStorage registered for the test."""
    register_storage(ToyStorage)
    yield ToyStorage
    unregister_storage(ToyStorage)


def test_a_new_kind_registers_in_one_place(toy: type[ToyStorage]) -> None:
    """A kind registered by one call is found by scheme and module, named in errors, and runs an engine."""
    storage = Storage.from_url("toy://orders")
    assert storage == ToyStorage("orders")
    assert Storage.from_env({"PERSISTENCE_MODULE": "tests.toy", "TOY_NAME": "b"}) == ToyStorage("b")
    with pytest.raises(ConfigurationError, match="toy://NAME"):
        Storage.from_url("nowhere://x")
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage, clock=VirtualClock(0.0))
    try:
        gate = engine.start("gate")
        engine.run_until_idle()
        assert engine.instance(gate).record.name == "gate"
    finally:
        engine.close()
        storage.forget()
    assert register_storage(ToyStorage) is ToyStorage  # registering again changes nothing


class TestToyStore(StoreContract):
    """A kind of one's own passes the contract suite by giving one fixture."""

    notifies = True

    @pytest.fixture
    def storage(self, toy: type[ToyStorage], tmp_path: Path) -> Iterator[ToyStorage]:
        """A fresh toy store, forgotten afterwards."""
        storage = toy(tmp_path.name)
        yield storage
        storage.forget()


# ------------------------------------------------------------------ secrets in the command line


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("query", ["", "?sslmode=off"], ids=["unreachable", "refused-url"])
def test_a_password_never_shows_in_command_errors(capsys: pytest.CaptureFixture[str], query: str) -> None:
    """A command given a store URL with a password fails without printing it, however it fails."""
    url = f"postgresql://app:{PASSWORD}@127.0.0.1:{_closed_port()}/orders{query}"
    status = main(["list", "--db", url])
    out, err = capsys.readouterr()
    assert status != 0 and "error:" in err
    assert PASSWORD not in out + err


def test_hide_hides_every_secret_of_a_storage() -> None:
    """hide(storage) hides whatever the storage's kind names as its secrets."""
    secret = f"hidden-{uuid.uuid4().hex}"
    hide(PostgresStorage("orders", password=secret))
    hide(SQLiteStorage("a.db"))  # no secret: nothing to hide
    assert redact(f"connect as app:{secret}@db") == "connect as app:***@db"


def test_a_password_a_failure_repeats_is_hidden_in_command_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an error that repeats the store's password verbatim is printed with it hidden."""
    from incarnate.store._postgres import PostgresStore

    def echoing(store: PostgresStore) -> None:
        raise StorageError(f"the server said: no user app with password {store.storage.password}")

    monkeypatch.setattr(PostgresStore, "check", echoing)
    secret = f"echoed-{uuid.uuid4().hex}"
    status = main(["list", "--db", f"postgresql://app:{secret}@127.0.0.1/orders"])
    out, err = capsys.readouterr()
    assert status != 0 and "with password ***" in err
    assert secret not in out + err
