"""A listing row changed by the fold is the row ``attrs.evolve`` makes, and says what it is."""

from __future__ import annotations

from typing import Any
from uuid import UUID

import attrs
from hypothesis import given
from hypothesis import strategies as st

from aggregates import InstanceKind, InstanceStatus
from projections._listing import _FIELDS, ORPHAN, ListingRow, _changed

statuses = st.sampled_from([status.value for status in InstanceStatus] + [ORPHAN])
rows = st.builds(
    ListingRow,
    id=st.uuids(),
    root=st.uuids(),
    parent=st.none() | st.uuids(),
    kind=st.sampled_from([kind.value for kind in InstanceKind]),
    name=st.text(max_size=5),
    status=statuses,
    owner=st.text(max_size=5),
    version=st.integers(1, 10**6),
    has_snapshot=st.booleans(),
    changed_at=st.floats(0, 2e9),
)
changes = st.fixed_dictionaries(
    {},
    optional={
        "version": st.integers(1, 10**6),
        "status": statuses,
        "owner": st.text(max_size=5),
        "has_snapshot": st.booleans(),
        "changed_at": st.floats(0, 2e9),
    },
)


@given(rows, changes)
def test_a_changed_row_is_the_evolved_row(row: ListingRow, change: dict[str, Any]) -> None:
    changed = _changed(row, **change)
    assert changed == attrs.evolve(row, **change)
    assert hash(changed) == hash(attrs.evolve(row, **change))
    assert changed.finished == (changed.status == ORPHAN or InstanceStatus(changed.status).finished)


def test_every_field_is_copied() -> None:
    assert tuple(field.name for field in attrs.fields(ListingRow)) == _FIELDS
    row = ListingRow(UUID(int=1), UUID(int=2), UUID(int=3), "task", "t", "running", "e", 4, True, 5.0)
    assert _changed(row) == row
