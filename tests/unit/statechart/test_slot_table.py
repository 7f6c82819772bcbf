"""A macrostep's working copy of the child slots: an ordered dict's behaviour, shared until changed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from statechart._snapshot import SlotTable
from statechart.snapshot import ChildSlot, SlotStatus, Snapshot, Status

KEYS = [("s", key) for key in "abcdefgh"] + [("t", "")]

Operation = tuple[str, tuple[str, str], int]
OPERATIONS = st.lists(
    st.tuples(st.sampled_from(["put", "pop", "finish"]), st.sampled_from(KEYS), st.integers(1, 9)),
    max_size=40,
)


def slot(key: tuple[str, str], generation: int) -> ChildSlot:
    return ChildSlot(key[0], key[1], generation, 1, SlotStatus.RUNNING, "running", None, 0)


def snapshot_of(children: tuple[ChildSlot, ...]) -> Snapshot[None]:
    return Snapshot("chart", Status.RUNNING, ("a",), (), None, children=children)


@settings(max_examples=200, deadline=None)
@given(
    start=st.lists(st.sampled_from(KEYS), unique=True, max_size=6),
    operations=OPERATIONS,
)
def test_a_slot_table_behaves_as_an_ordered_dict(
    start: list[tuple[str, str]], operations: list[Operation]
) -> None:
    """Replaced slots keep their place, new ones go last, removed ones are gone; finishing keeps it all."""
    base = snapshot_of(tuple(slot(key, 0) for key in start))
    table = SlotTable(base.children, base.slot_positions())
    model = {key: slot(key, 0) for key in start}
    for kind, key, generation in operations:
        if kind == "put":
            new = slot(key, generation)
            assert table.put(new) == model.get(key)
            model[key] = new
        elif kind == "pop":
            if key in model:
                assert table.pop(key) == model.pop(key)
            else:
                try:
                    table.pop(key)
                except KeyError:
                    pass
                else:
                    raise AssertionError(f"popping the absent {key} did not raise KeyError")
        else:
            children, positions = table.finish()
            assert children == tuple(model.values())
            after = snapshot_of(children)
            if positions is not None:
                assert dict(positions) == dict(after.slot_positions())
        assert table.values() == tuple(model.values())
        assert table.items() == list(model.items())
        assert len(table) == len(model)
        assert bool(table) == bool(model)
        for probe in KEYS:
            assert (probe in table) == (probe in model)
            assert table.get(probe) == model.get(probe)
            if probe in model:
                assert table[probe] == model[probe]
    # The snapshot the table started from is untouched.
    assert base.children == tuple(slot(key, 0) for key in start)
    for key in start:
        assert base.slot(*key) == slot(key, 0)


def test_a_snapshot_indexes_its_slots_by_site_and_key() -> None:
    """``slot`` and ``slot_index`` find every slot, in the order of ``children``; an absent key is None."""
    children = tuple(slot(key, 1) for key in KEYS)
    snapshot = snapshot_of(children)
    index = snapshot.slot_index()
    assert list(index) == KEYS
    assert list(index.values()) == list(children)
    assert len(index) == len(KEYS)
    for key, child in zip(KEYS, children, strict=True):
        assert snapshot.slot(*key) is child
        assert index[key] is child
        assert key in index
    assert snapshot.slot("s", "z") is None
    assert ("s", "z") not in index
    assert index.get(("s", "z")) is None
    assert snapshot_of(()).slot("s", "a") is None
