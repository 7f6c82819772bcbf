"""``evolve_record`` makes exactly what ``attrs.evolve`` makes, converters included."""

from __future__ import annotations

import uuid
from typing import Any

import attrs
import pytest

from aggregates import InstanceKind, InstanceRecord, InstanceStatus
from aggregates._keyed import SlotData
from aggregates._records import Activations, CancelRequest, evolve_record


def record() -> InstanceRecord:
    return InstanceRecord(
        kind=InstanceKind.CHART,
        name="order",
        fingerprint="f" * 8,
        input={"items": ["book"]},
        owner="engine-a",
        root=uuid.uuid4(),
        parent=None,
        birth=None,
        ancestry=(),
    )


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"status": InstanceStatus.DONE, "output": {"ok": True}},
        {"cancel": CancelRequest(None, "stop"), "steps": 3, "keys": ("k",)},
        {"slots": [{"site": "pack", "key": "0", "status": "running"}], "snapshot_parts": {"time": 1.0}},
        {"retained": (), "incarnation": 2, "owner": "engine-b"},
    ],
    ids=["nothing", "finished", "cancel", "slots as a list", "retained as a tuple"],
)
def test_evolve_record_equals_attrs_evolve(changes: dict[str, Any]) -> None:
    before = record()
    made = evolve_record(before, **changes)
    assert made == attrs.evolve(before, **changes)
    assert type(made) is InstanceRecord
    assert isinstance(made.slots, SlotData) and isinstance(made.retained, Activations)
    assert (before.status, before.steps, before.owner) == (InstanceStatus.BORN, 0, "engine-a")  # untouched


def test_evolve_record_names_a_field_it_does_not_know() -> None:
    with pytest.raises(TypeError, match="no field 'colour'"):
        evolve_record(record(), colour="red")
