"""Slot changes and snapshot deltas: a macrostep's changes applied to the earlier snapshot give the later."""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from statechart import Event, fire, start, step
from statechart.codec import SnapshotCodec, SnapshotDelta
from statechart.event import done_invoke_event, error_invoke_event
from statechart.snapshot import SlotChanges, Snapshot, Status, slot_changes
from tests.scenarios import charts

CODEC = SnapshotCodec(charts.PARENT)
NAMES = ("a", "b", "c", "d")

Operation = tuple[str, int | tuple[str, ...]]
OPERATIONS = st.one_of(
    st.tuples(st.sampled_from(["done", "error"]), st.integers(0, 3)),
    st.tuples(st.just("regroup"), st.lists(st.sampled_from(NAMES), unique=True, max_size=4).map(tuple)),
    st.tuples(st.sampled_from(["leave", "back", "timer"]), st.just(0)),
)


def applied(data: dict[str, Any], delta: SnapshotDelta) -> dict[str, Any]:
    """An encoded snapshot after a delta, as the record and the ResumePlan apply it."""
    slots = {(s["site"], s["key"]): s for s in data["children"]}
    for key in delta.removed:
        del slots[key]
    for slot in delta.changed:
        assert (slot["site"], slot["key"]) in slots
        slots[(slot["site"], slot["key"])] = slot
    for slot in delta.added:
        assert (slot["site"], slot["key"]) not in slots
        slots[(slot["site"], slot["key"])] = slot
    return {**data, **delta.parts, "children": list(slots.values())}


def applied_changes(before: Snapshot[Any], changes: SlotChanges) -> list[Any]:
    slots = dict(before.slot_index())
    for key in changes.removed:
        del slots[key]
    for slot in (*changes.changed, *changes.added):
        slots[(slot.site, slot.key)] = slot
    return list(slots.values())


def next_snapshot(snapshot: Snapshot[Any], operation: Operation) -> Snapshot[Any]:
    kind, arg = operation
    if kind in ("done", "error"):
        live = [s for s in snapshot.children if s.live]
        if not live:
            return snapshot
        assert isinstance(arg, int)
        slot = live[arg % len(live)]
        build = done_invoke_event if kind == "done" else error_invoke_event
        return step(charts.PARENT, snapshot, build(slot.invoke_id, "out"), now=snapshot.time + 1)[0]
    if kind == "regroup":
        assert isinstance(arg, tuple)
        return step(charts.PARENT, snapshot, Event("regroup", list(arg)), now=snapshot.time + 1)[0]
    if kind == "timer":
        if not snapshot.timers:
            return snapshot
        timer = snapshot.timers[0]
        return fire(charts.PARENT, snapshot, timer.id, now=timer.deadline)[0]
    return step(charts.PARENT, snapshot, Event(kind), now=snapshot.time + 1)[0]


@settings(max_examples=60, deadline=None)
@given(operations=st.lists(OPERATIONS, max_size=12))
def test_a_delta_applied_to_the_earlier_snapshot_gives_the_later(operations: list[Operation]) -> None:
    """Each macrostep's encoded delta turns the encoded earlier snapshot into the later one, order included;
    the slot changes the interpreter recorded and those found by comparing the two agree."""
    snapshot, _ = start(charts.PARENT, input={"members": ["a", "b", "c"]})
    data = CODEC.encode(snapshot)
    assert applied({"children": []}, CODEC.encode_delta(None, snapshot)) == data
    for operation in operations:
        if snapshot.status is not Status.RUNNING:
            break
        after = next_snapshot(snapshot, operation)
        expected = CODEC.encode(after)
        assert applied(data, CODEC.encode_delta(snapshot, after)) == expected
        recorded = slot_changes(snapshot, after)
        compared = slot_changes(attrs.evolve(snapshot), after)  # no record of the step: compared
        assert applied_changes(snapshot, recorded) == list(after.children)
        assert applied_changes(snapshot, compared) == list(after.children)
        for slot in after.children:
            assert after.slot(slot.site, slot.key) is slot
        snapshot, data = after, expected


def test_an_unchanged_snapshot_has_an_empty_delta() -> None:
    """Comparing a snapshot with itself finds no slot changes and no changed parts."""
    snapshot, _ = start(charts.PARENT, input={"members": ["a", "b"]})
    assert not slot_changes(snapshot, snapshot)
    assert CODEC.encode_delta(snapshot, snapshot) == SnapshotDelta({})
