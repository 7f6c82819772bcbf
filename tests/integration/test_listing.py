"""The recovery listing: rows, statuses, a durable position and exactly-once catch-up (every store)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast
from uuid import UUID

import pytest
from eventsourcing.domain import Aggregate

from incarnate import Engine
from incarnate._listing import Listing
from incarnate._ownership import orphan
from incarnate.store import Change
from incarnate.testing import SimulatedCrash
from projections._listing import STARTED, ListingRow
from tests.integration.conftest import EngineFactory
from tests.scenarios import charts

ListingFactory = Callable[..., Listing]


@pytest.fixture
def make_listing(make_engine: EngineFactory) -> Iterator[ListingFactory]:
    """Build listings; every listing is closed at the end, before the engines are."""
    listings: list[Listing] = []

    def build(engine: Engine, **kwargs: Any) -> Listing:
        listing = Listing(engine.parts.journal, **kwargs)
        listings.append(listing)
        return listing

    yield build
    for listing in listings:
        listing.close()


def crash_while_writing_rows(listing: Listing, monkeypatch: pytest.MonkeyPatch, *, at_write: int = 1) -> None:
    """Make the listing's ``at_write``-th write crash inside its transaction, after the position moved."""
    original = listing.tables.write
    writes = [0]

    def crashing(changes: Sequence[Change], expected: int, position: int) -> bool:
        writes[0] += 1
        if writes[0] != at_write:
            return original(changes, expected, position)

        def rows() -> Iterator[Change]:
            raise SimulatedCrash("simulated crash after the position was moved, before the rows were written")
            yield from changes

        return original(cast(Sequence[Change], rows()), expected, position)

    monkeypatch.setattr(listing.tables, "write", crashing)


def family_engine(make_engine: EngineFactory) -> Engine:
    return make_engine(charts.ALL, {"charge": lambda call: "ok"})


def notification_count(engine: Engine) -> int:
    return len(engine.parts.journal.recorder.select_notifications(start=1, limit=100_000))


def last_notification_id(engine: Engine) -> int:
    return engine.parts.journal.recorder.select_notifications(start=1, limit=100_000)[-1].id


def started_ids(engine: Engine, limit: int = 100_000) -> list[UUID]:
    """The instances created within the first ``limit`` notifications, in order."""
    return [
        UUID(str(n.originator_id))
        for n in engine.parts.journal.recorder.select_notifications(start=1, limit=limit)
        if n.topic == STARTED
    ]


def assert_matches_aggregates(engine: Engine, listing: Listing) -> None:
    """Every row agrees with its aggregate as stored now, and every instance has a row."""
    rows = listing.rows()
    assert len({row.id for row in rows}) == len(rows)
    for row in rows:
        record = engine.instance(row.id).record
        expected = (
            record.root,
            None if record.parent is None else record.parent.parent,
            record.kind.value,
            record.name,
            record.status.value,
            record.owner,
            engine.instance(row.id).version,
        )
        assert (row.root, row.parent, row.kind, row.name, row.status, row.owner, row.version) == expected
    assert [row.id for row in rows] == started_ids(engine)


def start_family(engine: Engine) -> tuple[UUID, UUID, UUID]:
    """A parent with kids ``a`` and ``b``, all running; returns the three ids."""
    parent_id = engine.start("parent", {"members": ["a", "b"]})
    engine.run_until_idle()
    kid_a, kid_b = (instance.id for instance in engine.children(parent_id))
    return parent_id, kid_a, kid_b


def test_rows_list_roots_and_children(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """After a catch-up, a root and its children are listed with their root, parent and status."""
    engine = family_engine(make_engine)
    parent_id, kid_a, kid_b = start_family(engine)
    listing = make_listing(engine)
    assert listing.catch_up() == notification_count(engine)
    rows = listing.rows()
    assert [row.id for row in rows] == [parent_id, kid_a, kid_b]
    parent, first, second = rows
    assert (parent.root, parent.parent, parent.kind, parent.name, parent.status) == (
        parent_id,
        None,
        "chart",
        "parent",
        "running",
    )
    assert parent.is_root and not parent.finished
    for kid in (first, second):
        assert (kid.root, kid.parent, kid.name, kid.status) == (parent_id, parent_id, "kid", "running")
        assert not kid.is_root
    assert listing.get(kid_b) == second
    assert listing.position() == last_notification_id(engine)
    assert_matches_aggregates(engine, listing)


def test_statuses_follow_completion_and_cancellation(
    make_engine: EngineFactory, make_listing: ListingFactory
) -> None:
    """A finished child is listed done, and a cancelled parent and its live child are listed cancelled."""
    engine = family_engine(make_engine)
    parent_id, kid_a, kid_b = start_family(engine)
    listing = make_listing(engine)
    listing.catch_up()
    engine.send(kid_a, "finish")
    engine.run_until_idle()
    listing.catch_up()
    assert [(row.id, row.status) for row in listing.rows()] == [
        (parent_id, "running"),
        (kid_a, "done"),
        (kid_b, "running"),
    ]
    assert engine.cancel(parent_id)
    engine.run_until_idle()
    listing.catch_up()
    statuses = {row.id: row.status for row in listing.rows()}
    assert statuses == {parent_id: "cancelled", kid_a: "done", kid_b: "cancelled"}
    assert_matches_aggregates(engine, listing)


def test_parking_and_resolving_are_listed(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """A parking incident lists an instance parked; resolving lists it running, or born if unstepped."""
    engine = family_engine(make_engine)
    parent_id = engine.start("parent", {"members": ["a"]})  # the kid is born, not yet stepped
    kid_id = engine.instance(parent_id).record.activations[0].child_id
    listing = make_listing(engine)
    for instance_id in (parent_id, kid_id):
        instance = engine.instance(instance_id)
        instance.record_incident("revalidation", "the chart changed", park=True)
        engine.parts.commits.save_instances(instance)
    listing.catch_up()
    assert [row.status for row in listing.rows()] == ["parked", "parked"]
    assert all(row.parked and row.in_flight for row in listing.rows())
    for instance_id in (parent_id, kid_id):
        instance = engine.instance(instance_id)
        instance.resolve("migrated by hand")
        engine.parts.commits.save_instances(instance)
    listing.catch_up()
    assert [row.status for row in listing.rows()] == ["running", "born"]
    assert_matches_aggregates(engine, listing)


class Note(Aggregate):
    """Another aggregate sharing the store, which the listing must not list."""

    def __init__(self, text: str) -> None:
        self.text = text


def test_other_aggregates_are_not_listed(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """Events of other aggregates in the same store are consumed but list nothing."""
    engine = family_engine(make_engine)
    engine.parts.journal.save(Note("not an instance"))
    gate_id = engine.start("gate")
    listing = make_listing(engine)
    assert listing.catch_up() == notification_count(engine)
    assert [row.id for row in listing.rows()] == [gate_id]


def test_position_survives_a_new_engine(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """A listing over a fresh engine on the same store resumes from the stored position."""
    engine = family_engine(make_engine)
    parent_id, _, _ = start_family(engine)
    listing = make_listing(engine)
    first = listing.catch_up()
    position = listing.position()
    listing.close()
    engine.close()

    fresh = family_engine(make_engine)
    resumed = make_listing(fresh)
    assert resumed.position() == position
    assert resumed.rows()[0].id == parent_id
    gate_id = fresh.start("gate")
    fresh.run_until_idle()
    assert resumed.catch_up() == notification_count(fresh) - first
    assert resumed.get(gate_id) is not None
    assert_matches_aggregates(fresh, resumed)


def test_catch_up_is_idempotent(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """A second catch-up with nothing new processes nothing and changes nothing."""
    engine = family_engine(make_engine)
    start_family(engine)
    listing = make_listing(engine)
    assert listing.catch_up() > 0
    rows, position = listing.rows(), listing.position()
    assert listing.catch_up() == 0
    assert (listing.rows(), listing.position()) == (rows, position)


def test_catch_up_honours_its_limit(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """A limited catch-up processes at most its limit, across small batches, and the next one continues."""
    engine = family_engine(make_engine)
    start_family(engine)
    total = notification_count(engine)
    listing = make_listing(engine, batch_size=2)
    assert listing.catch_up(limit=5) == 5
    assert listing.catch_up() == total - 5
    assert_matches_aggregates(engine, listing)


def test_a_crash_before_the_write_commits_changes_nothing(
    make_engine: EngineFactory, make_listing: ListingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash inside the write leaves position and rows unchanged; the next catch-up applies it once."""
    engine = family_engine(make_engine)
    parent_id, kid_a, _ = start_family(engine)
    listing = make_listing(engine)
    listing.catch_up()
    rows, position = listing.rows(), listing.position()
    engine.send(kid_a, "finish")
    engine.run_until_idle()
    pending = len(engine.parts.journal.recorder.select_notifications(start=position + 1, limit=100_000))

    crash_while_writing_rows(listing, monkeypatch)
    with pytest.raises(SimulatedCrash):
        listing.catch_up()
    assert (listing.position(), listing.rows()) == (position, rows)
    monkeypatch.undo()

    reopened = make_listing(engine)
    assert (reopened.position(), reopened.rows()) == (position, rows)
    assert reopened.catch_up() == pending
    assert reopened.get(kid_a) == ListingRow(
        kid_a,
        parent_id,
        parent_id,
        "chart",
        "kid",
        "done",
        engine.instance(kid_a).record.owner,
        engine.instance(kid_a).version,
        has_snapshot=True,
        changed_at=reopened.get(kid_a).changed_at,  # type: ignore[union-attr]
    )
    assert listing.catch_up() == 0
    assert_matches_aggregates(engine, listing)


def test_a_crash_between_batches_keeps_the_earlier_batches(
    make_engine: EngineFactory, make_listing: ListingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash in the second batch keeps the first batch's rows and position, and resumes right after it."""
    engine = family_engine(make_engine)
    listing = make_listing(engine, batch_size=3)
    before = listing.catch_up()  # whatever the engine stored when it started
    start_family(engine)
    total = notification_count(engine)
    crash_while_writing_rows(listing, monkeypatch, at_write=2)
    with pytest.raises(SimulatedCrash):
        listing.catch_up()
    monkeypatch.undo()
    first_batch = before + 3
    assert (
        listing.position()
        == engine.parts.journal.recorder.select_notifications(start=1, limit=first_batch)[-1].id
    )
    listed = [row.id for row in listing.rows()]
    assert listed == started_ids(engine, first_batch)
    assert listed  # the first batch holds the parent's creation

    resumed = make_listing(engine, batch_size=3)
    assert resumed.catch_up() == total - first_batch
    assert_matches_aggregates(engine, resumed)


def test_concurrent_catch_ups_apply_each_notification_once(
    make_engine: EngineFactory, make_listing: ListingFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When another listing commits first, a batch is discarded and nothing is applied twice."""
    engine = family_engine(make_engine)
    start_family(engine)
    total = notification_count(engine)
    slow, fast = make_listing(engine), make_listing(engine)
    original = slow.tables.write
    overtaken = [0]

    def overtaking_write(*args: Any) -> bool:
        overtaken[0] += fast.catch_up()
        return original(*args)

    monkeypatch.setattr(slow.tables, "write", overtaking_write)
    assert slow.catch_up() == 0
    assert overtaken[0] == total
    assert slow.position() == fast.position() == last_notification_id(engine)
    assert_matches_aggregates(engine, slow)


def test_in_flight_and_roots_filters(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """The in-flight filter drops finished instances, the roots filter drops children, and both combine."""
    engine = family_engine(make_engine)
    parent_id, kid_a, kid_b = start_family(engine)
    gate_id = engine.start("gate")
    other_gate_id = engine.start("gate")
    engine.send(kid_a, "finish")
    engine.send(gate_id, "answer", "yes")
    engine.run_until_idle()
    listing = make_listing(engine)
    listing.catch_up()

    def ids(rows: list[ListingRow]) -> list[UUID]:
        return [row.id for row in rows]

    assert ids(listing.rows()) == [parent_id, kid_a, kid_b, gate_id, other_gate_id]
    assert ids(listing.rows(roots=True)) == [parent_id, gate_id, other_gate_id]
    assert ids(listing.rows(in_flight=True)) == [parent_id, kid_b, other_gate_id]
    assert ids(listing.rows(in_flight=True, roots=True)) == [parent_id, other_gate_id]


def test_the_listing_lags_until_it_catches_up(
    make_engine: EngineFactory, make_listing: ListingFactory
) -> None:
    """Instances started after the last catch-up are not listed until the next one."""
    engine = family_engine(make_engine)
    listing = make_listing(engine)
    gate_id = engine.start("gate")
    listing.catch_up()
    parent_id, kid_a, kid_b = start_family(engine)
    engine.send(gate_id, "answer", "later")
    engine.run_until_idle()
    assert [(row.id, row.status) for row in listing.rows()] == [(gate_id, "running")]
    assert listing.get(parent_id) is None
    listing.catch_up()
    assert [(row.id, row.status) for row in listing.rows()] == [
        (gate_id, "done"),
        (parent_id, "running"),
        (kid_a, "running"),
        (kid_b, "running"),
    ]


def test_a_claim_moves_the_listed_owner(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """After another engine takes a call tree over, the listing names it as the owner of every member."""
    engine = family_engine(make_engine)
    parent_id, kid_a, kid_b = start_family(engine)
    successor = make_engine(charts.ALL, {"charge": lambda call: "ok"}, engine_id="successor")
    successor.take_over(parent_id)
    listing = make_listing(successor)
    listing.catch_up()
    owners = {row.id: row.owner for row in listing.rows()}
    assert {owners[parent_id], owners[kid_a], owners[kid_b]} == {"successor"}
    assert_matches_aggregates(successor, listing)


def test_an_orphan_is_listed_finished(make_engine: EngineFactory, make_listing: ListingFactory) -> None:
    """An orphaned instance is listed with status orphan and drops out of the in-flight rows."""
    engine = family_engine(make_engine)
    gate_id = engine.start("gate")
    assert orphan(engine.parts, gate_id, "its parent's record is gone")
    listing = make_listing(engine)
    listing.catch_up()
    row = listing.get(gate_id)
    assert row is not None
    assert (row.status, row.finished, row.in_flight) == ("orphan", True, False)
    assert gate_id not in {r.id for r in listing.rows(in_flight=True)}


def test_changed_at_is_the_time_of_the_last_event_folded_into_a_row(
    make_engine: EngineFactory, make_listing: ListingFactory
) -> None:
    """A row's changed_at is its instance's last event's time, not the catch-up's; other rows keep theirs."""
    engine = family_engine(make_engine)
    quiet, busy = engine.start("gate"), engine.start("gate")
    listing = make_listing(engine)
    listing.catch_up()
    first = {row.id: row.changed_at for row in listing.rows()}
    for instance_id in (quiet, busy):
        assert first[instance_id] == engine.instance(instance_id).modified_on.timestamp()
    engine.send(busy, "answer", "yes")
    engine.run_until_idle()
    listing.catch_up()
    second = {row.id: row.changed_at for row in listing.rows()}
    assert second[quiet] == first[quiet]
    assert second[busy] == engine.instance(busy).modified_on.timestamp() > first[busy]
