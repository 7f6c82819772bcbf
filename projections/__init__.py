"""Projections of instance events: checkpoints, listings, call trees and timelines."""

from projections._embedded import embedded_history, embedded_tasks
from projections._history import instance_at, interleave, versions_at
from projections._listing import (
    ListingRow,
    apply_notification,
    ends_instance,
    in_flight,
    is_embedded,
    select_rows,
)
from projections._resume import Checkpoint, resume_plan
from projections._tree import TimelineEntry, TreeNode, born, call_tree, render_timeline, render_tree, timeline
from projections._whatif import (
    RecordedInput,
    RecordedRun,
    Replayed,
    ReplayVerdict,
    recorded_run,
    replay,
    strands,
)
from projections.errors import (
    CheckpointError,
    CheckpointUndecodable,
    CorruptedDelta,
    DuplicatedActivation,
    MismatchedActivation,
    OmittedActivation,
    ReorderedActivation,
)

__all__ = [
    "Checkpoint",
    "embedded_history",
    "embedded_tasks",
    "ListingRow",
    "apply_notification",
    "ends_instance",
    "in_flight",
    "is_embedded",
    "select_rows",
    "CheckpointError",
    "CheckpointUndecodable",
    "CorruptedDelta",
    "DuplicatedActivation",
    "MismatchedActivation",
    "OmittedActivation",
    "ReorderedActivation",
    "resume_plan",
    "TimelineEntry",
    "TreeNode",
    "born",
    "call_tree",
    "render_timeline",
    "render_tree",
    "timeline",
    "instance_at",
    "interleave",
    "versions_at",
    "RecordedInput",
    "RecordedRun",
    "Replayed",
    "ReplayVerdict",
    "recorded_run",
    "replay",
    "strands",
]
