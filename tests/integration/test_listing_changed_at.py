"""A listing row's changed_at is when its instance's last event was made, not when it was folded."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

import pytest
from eventsourcing.cipher import AESCipher

from incarnate import Engine, RecoveryManager, RecoverySettings
from incarnate._listing import Listing
from projections._listing import event_time
from tests.integration.conftest import EngineFactory
from tests.scenarios import charts

HOUR = 3600.0


@contextlib.contextmanager
def writers_clock(offset: float) -> Iterator[None]:
    """Stamp every event made inside with the wall clock moved by ``offset`` seconds.

    Events are stamped by the library from the writing host's clock; moving
    it back writes a store as if an hour ago, moving it forward plays a
    writer whose clock runs ahead of the store's.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            "eventsourcing.domain.datetime_now_with_tzinfo",
            lambda: datetime.now(tz=UTC) + timedelta(seconds=offset),
        )
        yield


def family_engine(make_engine: EngineFactory, **kwargs: object) -> Engine:
    return make_engine(charts.ALL, {"charge": lambda call: "ok"}, **kwargs)


def last_event_time(engine: Engine, instance_id: UUID) -> float:
    """When the instance's last stored event was made (the aggregate's modified_on)."""
    return engine.instance(instance_id).modified_on.timestamp()


def changed_at(listing: Listing, instance_id: UUID) -> float:
    row = listing.get(instance_id)
    assert row is not None, f"{instance_id} is not listed"
    return row.changed_at


def test_a_late_fold_dates_each_row_by_its_last_event(make_engine: EngineFactory) -> None:
    """A listing folded an hour after the events shows each row changed when its last event was made."""
    engine = family_engine(make_engine)
    with writers_clock(-HOUR):
        quiet, answered = engine.start("gate"), engine.start("gate")
        engine.send(answered, "answer", "yes")
        engine.run_until_idle()
    with Listing(engine.parts.journal) as listing:
        listing.catch_up()
        for instance_id in (quiet, answered):
            assert changed_at(listing, instance_id) == last_event_time(engine, instance_id)
            assert changed_at(listing, instance_id) < engine.parts.coordination.now() - HOUR + 60
        assert changed_at(listing, answered) > changed_at(listing, quiet)


def test_a_store_written_earlier_is_dated_by_its_events(make_engine: EngineFactory) -> None:
    """An engine that folds a store another engine wrote earlier dates rows by the events, not by the fold."""
    writer = family_engine(make_engine, engine_id="writer")
    instance_id = writer.start("gate")
    writer.run_until_idle()
    written = last_event_time(writer, instance_id)
    writer.close()
    time.sleep(0.5)
    reader = family_engine(make_engine, engine_id="reader")
    with Listing(reader.parts.journal) as listing:
        folded_from = reader.parts.coordination.now()
        listing.catch_up()
        assert changed_at(listing, instance_id) == written
        assert folded_from - changed_at(listing, instance_id) >= 0.5


def test_a_compressed_and_encrypted_store_is_dated_by_its_events(make_engine: EngineFactory) -> None:
    """The event time is read from a state that is compressed and encrypted too, for every kind of event."""
    env = {
        "COMPRESSOR_TOPIC": "eventsourcing.compressor:ZlibCompressor",
        "CIPHER_TOPIC": "eventsourcing.cipher:AESCipher",
        "CIPHER_KEY": AESCipher.create_key(16),
    }
    engine = family_engine(make_engine, env=env)
    with writers_clock(-HOUR):
        started, answered = engine.start("gate"), engine.start("gate")
        engine.send(answered, "answer", "yes")  # a Stepped and a Completed: no state the row needs
        engine.run_until_idle()
    with Listing(engine.parts.journal) as listing:
        listing.catch_up()
        for instance_id in (started, answered):
            assert changed_at(listing, instance_id) == last_event_time(engine, instance_id)


def test_a_writer_clock_ahead_is_capped_at_the_fold(make_engine: EngineFactory) -> None:
    """An event stamped in the store's future is dated no later than the fold that saw it."""
    engine = family_engine(make_engine)
    with writers_clock(HOUR):
        instance_id = engine.start("gate")
        engine.run_until_idle()
    with Listing(engine.parts.journal) as listing:
        before = engine.parts.coordination.now()
        listing.catch_up()
        after = engine.parts.coordination.now()
        assert before <= changed_at(listing, instance_id) <= after


def test_a_row_no_event_changed_keeps_its_time(make_engine: EngineFactory) -> None:
    """A later fold moves only the rows of instances with new events, each to its newest event's time."""
    engine = family_engine(make_engine)
    quiet, busy = engine.start("gate"), engine.start("gate")
    engine.run_until_idle()
    with Listing(engine.parts.journal) as listing:
        listing.catch_up()
        first = {row.id: row.changed_at for row in listing.rows()}
        engine.send(busy, "answer", "yes")
        engine.run_until_idle()
        listing.catch_up()
        assert changed_at(listing, quiet) == first[quiet] == last_event_time(engine, quiet)
        assert changed_at(listing, busy) == last_event_time(engine, busy) > first[busy]


def test_recovery_takes_a_root_quiet_past_ttl_right_after_a_late_fold(make_engine: EngineFactory) -> None:
    """A dead owner's root whose last event is older than ttl is a candidate as soon as it is listed."""
    owner = family_engine(make_engine, engine_id="dead-owner")  # never heartbeats
    with writers_clock(-HOUR):
        root = owner.start("gate")
        owner.run_until_idle()
    replica = family_engine(make_engine, engine_id="replica")
    settings = RecoverySettings(ttl=60.0, lock_id=random.SystemRandom().randrange(1, 2**62))
    seen: list[UUID] = []
    report = RecoveryManager(replica, settings, seen.append).sweep()
    assert (report.candidates, seen) == (1, [root])


def test_recovery_leaves_a_root_changed_within_ttl(make_engine: EngineFactory) -> None:
    """A dead owner's root whose last event is younger than ttl is not yet a candidate."""
    owner = family_engine(make_engine, engine_id="dead-owner")
    owner.start("gate")
    owner.run_until_idle()
    replica = family_engine(make_engine, engine_id="replica")
    settings = RecoverySettings(ttl=HOUR, lock_id=random.SystemRandom().randrange(1, 2**62))
    seen: list[UUID] = []
    report = RecoveryManager(replica, settings, seen.append).sweep()
    assert (report.candidates, seen) == (0, [])


# ---------------------------------------------------------------- event_time


def test_event_time_reads_the_leading_timestamp() -> None:
    """The stored layout's leading timestamp is read, whatever follows it."""
    state = b'{"timestamp":"2026-12-06T02:48:48.798944+00:00","trigger":{"timestamp":"1999-01-01T00:00:00Z"}}'
    assert event_time(state) == datetime(2026, 12, 6, 2, 48, 48, 798944, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (b'{"x":1, "timestamp": "2026-12-06T02:48:48+01:00"}', datetime(2026, 12, 6, 1, 48, 48, tzinfo=UTC)),
        (b'{"timestamp":"2026-12-06T02:48:48"}', datetime(2026, 12, 6, 2, 48, 48, tzinfo=UTC)),
    ],
    ids=["another-layout", "no-zone-is-utc"],
)
def test_event_time_reads_other_layouts(state: bytes, expected: datetime) -> None:
    """A timestamp that is not the leading key, or has no zone (taken as UTC), still reads."""
    assert event_time(state) == expected.timestamp()


@pytest.mark.parametrize(
    "state",
    [b"", b"not json", b'{"timestamp":"yesterday"}', b'{"timestamp":"2026-12-06', b'{"name":"x"}', b"[1]"],
)
def test_event_time_is_none_when_no_time_reads(state: bytes) -> None:
    """A state without a timestamp that reads as a time gives None (the listing then uses the fold's time)."""
    assert event_time(state) is None
