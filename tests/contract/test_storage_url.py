"""Storage.from_url, url() and describe(): the --db forms, read back exactly, never showing a password."""

from __future__ import annotations

import pytest

from incarnate import Storage
from incarnate.errors import ConfigurationError

PASSWORD = "s3cr3t-Pw"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("work/incarnate.db", Storage.sqlite("work/incarnate.db")),
        ("/var/lib/incarnate.db", Storage.sqlite("/var/lib/incarnate.db")),
        ("sqlite:///work/incarnate.db", Storage.sqlite("work/incarnate.db")),
        ("sqlite:////var/lib/incarnate.db", Storage.sqlite("/var/lib/incarnate.db")),
        (
            "postgresql://app@db.example:6543/orders",
            Storage.postgres("orders", host="db.example", port=6543, user="app"),
        ),
        (
            f"postgresql://app:{PASSWORD}@db.example/orders?schema=tenant_1",
            Storage.postgres("orders", host="db.example", user="app", password=PASSWORD, schema="tenant_1"),
        ),
        ("postgres://db.example/orders", Storage.postgres("orders", host="db.example")),
        ("postgresql://app:p%40ss@h/db", Storage.postgres("db", host="h", user="app", password="p@ss")),
    ],
)
def test_from_url_reads_each_accepted_form(text: str, expected: Storage) -> None:
    """Each --db form reads as the Storage its parts name (port 5432 and user postgres when left out)."""
    assert Storage.from_url(text) == expected


@pytest.mark.parametrize(
    "storage",
    [
        Storage.sqlite("work/incarnate.db"),
        Storage.sqlite("/abs/incarnate.db"),
        Storage.postgres("orders", host="db.example", port=6543, user="app"),
        Storage.postgres("orders", host="db.example", user="app", schema="tenant_1"),
    ],
)
def test_url_round_trips(storage: Storage) -> None:
    """A storage's url() reads back through from_url() as the same storage."""
    assert Storage.from_url(storage.url()) == storage


def test_a_password_never_shows() -> None:
    """describe() and url() of a PostgreSQL storage leave its password out."""
    storage = Storage.from_url(f"postgresql://app:{PASSWORD}@db.example:5432/orders?schema=s")
    assert storage.postgres_password == PASSWORD
    assert storage.describe() == "PostgreSQL app@db.example:5432/orders schema s"
    assert storage.url() == "postgresql://app@db.example:5432/orders?schema=s"


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


def test_a_memory_store_has_no_url() -> None:
    """An in-memory store lives in one process, so asking for its URL is a ConfigurationError."""
    with pytest.raises(ConfigurationError, match="has no URL"):
        Storage.popo("shared").url()


def test_the_store_kind_is_decided_by_open() -> None:
    """open() returns the adapter of the storage's kind, and an unknown kind is a ConfigurationError."""
    assert [
        Storage.popo().open().kind,
        Storage.sqlite("x.db").open().kind,
        Storage.postgres("orders").open().kind,
    ] == [
        "memory",
        "sqlite",
        "postgres",
    ]
    with pytest.raises(ConfigurationError, match="storage kind 'oracle' is not one of"):
        Storage(kind="oracle").open()
