"""A parent with many events is snapshotted by default: its recovery read is a snapshot and a short tail."""

from __future__ import annotations

from aggregates import InstanceSnapshot, InstanceStatus
from bench.fanout import KID, PARENT
from incarnate._snapshots import DEFAULT_SNAPSHOT_EVENTS
from incarnate.testing import memory_engine
from projections import Checkpoint


def test_a_large_fan_out_is_read_back_from_a_snapshot_and_a_short_tail() -> None:
    """After 400 children (1,600 parent events) the latest snapshot leaves a tail shorter than the spacing,
    and the plan from it equals the live checkpoint."""
    engine = memory_engine([PARENT, KID])
    try:
        parent = engine.start(PARENT.name, {"size": 400})
        engine.run_until_idle(max_units=10_000)
        instance = engine.instance(parent.id)
        assert instance.record.status is InstanceStatus.DONE
        assert instance.version > DEFAULT_SNAPSHOT_EVENTS
        start, tail = engine.parts.journal.stored(parent.id)
        assert isinstance(start, InstanceSnapshot)
        assert len(tail) < max(DEFAULT_SNAPSHOT_EVENTS, 3 * 400)
        assert len(tail) < instance.version - 1
        assert engine.plan(parent.id) == Checkpoint.of(instance, PARENT)
    finally:
        engine.close()
