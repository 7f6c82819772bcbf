"""The operator's read model: filtered lists, one instance's detail, enabled events, trees, counts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest

from incarnate import Engine, Storage, TaskCall, VirtualClock
from incarnate._inspect import (
    call_tree_of,
    enabled_events,
    instance_detail,
    list_instances,
    state_counts,
    tree_events,
    tree_json,
)
from statechart import JsonValue
from tests.scenarios import charts
from tests.unit.incarnate.sample_charts import ORDER


def decline(call: TaskCall) -> JsonValue:
    """A charge that always fails."""
    raise RuntimeError(f"card declined on attempt {call.attempt}")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    """An engine over a SQLite file holding two parents (one kid each) and a charging whose task failed."""
    engine = Engine(
        [*charts.ALL, ORDER],
        {"charge": decline},
        storage=Storage.sqlite(str(tmp_path / "s.db")),
        clock=VirtualClock(),
    )
    yield engine
    engine.close()


def _fill(engine: Engine) -> tuple[list[UUID], UUID]:
    clock = engine.clock
    assert isinstance(clock, VirtualClock)
    parents: list[UUID] = [engine.start("parent", {"members": [name]}) for name in ("a", "b")]
    charging: UUID = engine.start("charging")
    engine.run_until_idle()
    for _ in range(3):  # the retries fall due on the engine's clock
        clock.advance(10.0)
        engine.run_until_idle()
    return parents, charging


def test_filters_by_status_chart_root_prefix_and_pages(engine: Engine) -> None:
    """Each filter keeps only the rows it names; a page knows the total and how many it left off."""
    parents, _ = _fill(engine)
    roots = list_instances(engine, roots=True)
    assert {r.name for r in roots.rows} == {"parent", "charging"}
    kids = list_instances(engine, chart="kid")
    assert kids.total == 2 and {r.parent for r in kids.rows} == set(parents)
    prefix = str(parents[0])[:8].upper()
    assert [r.id for r in list_instances(engine, prefix=prefix).rows] == [parents[0]]
    page = list_instances(engine, limit=2, offset=1)
    assert len(page.rows) == 2 and page.left_off == page.total - 3
    assert page.to_json()["left_off"] == page.left_off
    failed = list_instances(engine, statuses=["failed"])
    assert {r.kind for r in failed.rows} == {"task"}
    assert list_instances(engine, since=10**12).total == 0
    with pytest.raises(ValueError, match="unknown status 'sleeping'; choose among born, running"):
        list_instances(engine, statuses=["sleeping"])


def test_a_failed_task_shows_its_error_and_a_chart_its_context(engine: Engine) -> None:
    """The detail of a failed task carries the error; a chart's carries its stored context and timers."""
    parents, _ = _fill(engine)
    failed = list_instances(engine, statuses=["failed"]).rows
    assert len(failed) == 3  # one incarnation per attempt
    detail = max((instance_detail(engine, row.id) for row in failed), key=lambda d: d.attempt)
    assert "card declined" in json.dumps(detail.error)
    assert detail.kind == "task" and detail.site == "charge" and detail.slot == "charge#3"
    parent = instance_detail(engine, parents[0])
    assert parent.context == {"members": ["a"], "results": [], "note": ""}
    assert "gathering" in parent.configuration and parent.is_root
    document = parent.to_json()
    assert document["id"] == str(parents[0]) and document["children"] == 1
    json.dumps(document)  # a JSON document through and through


def test_enabled_events_are_the_sendable_ones_of_the_active_states(engine: Engine) -> None:
    """Events with a transition from an active state, without delayed, wildcard or internal ones."""
    assert enabled_events(ORDER, ["cart"]) == ("checkout",)
    assert enabled_events(ORDER, ["payment", "payment.pending"]) == ("paid",)
    assert enabled_events(ORDER, ["shipped"]) == ()
    assert enabled_events(ORDER, ["no-such-state"]) == ()


def test_trees_events_and_state_counts(engine: Engine) -> None:
    """The call tree lists each kid under its parent; the timeline interleaves them; counts count states."""
    parents = [engine.start("parent", {"members": [name]}) for name in ("a", "b")]
    engine.run_until_idle()
    tree = call_tree_of(engine, parents[0])
    assert [node.name for node in tree.walk()] == ["parent", "kid"]
    assert tree_json(tree)["children"][0]["site"] == "team"  # type: ignore[index,call-overload]
    instances, events = tree_events(engine, parents[0], tree=True)
    assert len(instances) == 2 and {e.originator_id for e in events} == {i.id for i in instances}
    assert [e.timestamp for e in events] == sorted(e.timestamp for e in events)
    counts = state_counts(engine, "parent")
    assert counts["gathering"] == 2 and counts["reviewing"] == 0


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"in_flight": True},
        {"in_flight": False},
        {"roots": True},
        {"roots": True, "in_flight": True},
        {"statuses": ["failed"], "limit": 1},
        {"chart": "kid", "offset": 1},
    ],
)
def test_a_page_from_rows_already_read_is_the_page_the_listing_gives(
    engine: Engine, filters: dict[str, object]
) -> None:
    """Given every row (the console reads them once for its filters too), a page filters them the same."""
    _fill(engine)
    engine.listing.catch_up()
    rows = engine.listing.rows()
    assert list_instances(engine, rows=rows, **filters) == list_instances(engine, **filters)  # type: ignore[arg-type]


def test_a_tree_is_read_from_its_members_histories_not_the_whole_listing(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree, its timeline and a position of its history read its members, never every listing row.

    Finished children and every retry's incarnation are in it, as the
    parents' births record them; other trees in the store cost nothing.
    """
    _, charging = _fill(engine)  # the charging task failed and was retried: four incarnations
    others = [engine.start("parent", {"members": ["x"]}) for _ in range(5)]
    engine.run_until_idle()
    listed: list[object] = []
    rows = engine.listing.rows

    def counted(**options: bool) -> object:
        listed.append(options)
        return rows(**options)

    monkeypatch.setattr(engine.listing, "rows", counted)
    tree = call_tree_of(engine, charging)
    attempts = [node.attempt for node in tree.walk() if node.ref is not None]
    assert attempts == sorted(attempts) and len(attempts) >= 2, "every retried incarnation is in the tree"
    assert all(node.status.finished for node in tree.walk() if node.ref is not None)
    instances, _ = tree_events(engine, charging, tree=True)
    assert {i.id for i in instances} == {node.id for node in tree.walk()}
    assert not {i.id for i in instances} & set(others)
    moment = engine.at(charging, 1, tree=True)
    assert set(moment.instances) <= {node.id for node in tree.walk()}
    assert listed == [], "the whole listing was read"


def test_changed_at_is_the_time_of_the_last_event_even_before_the_listing_folds_it(tmp_path: Path) -> None:
    """An instance's detail says when its last event happened, read from the instance, not the listing."""
    path = str(tmp_path / "changed.db")
    with Engine(charts.ALL, {"charge": decline}, storage=Storage.sqlite(path)) as engine:
        parent = engine.start("parent", {"members": []})
        engine.run_until_idle()
        first = instance_detail(engine, parent).changed_at
        engine.cancel(parent, "later")  # another process would not have folded this into its listing yet
        last = engine.events_of(parent)[-1]
        detail = instance_detail(engine, parent)
        assert detail.changed_at == last.timestamp.timestamp() and first is not None
        assert detail.changed_at is not None and detail.changed_at > first
        assert detail.to_json()["changed_at_epoch"] == detail.changed_at
