"""Snapshots: a chart instance at a macrostep boundary, its child slots, and whether it fits a chart.

A :class:`Snapshot` is what ``start`` and ``step`` return and take; its
``slots`` are the :class:`ChildSlot` of each live child, and
:func:`slot_changes` says how two snapshots' slots differ.
:func:`check_snapshot` raises :class:`~statechart.errors.SnapshotMismatch`
unless a decoded snapshot fits a chart (:func:`snapshot_problems` lists why).
"""

from statechart._check import check_snapshot, snapshot_problems
from statechart._snapshot import (
    ChildSlot,
    HistoryEntry,
    SlotChanges,
    SlotStatus,
    Snapshot,
    Status,
    slot_changes,
)

__all__ = [
    "Snapshot",
    "Status",
    "ChildSlot",
    "SlotStatus",
    "HistoryEntry",
    "SlotChanges",
    "slot_changes",
    "check_snapshot",
    "snapshot_problems",
]
