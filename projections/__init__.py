"""Projections of instance events: checkpoints, listings, call trees and timelines."""

from projections._tree import TimelineEntry, TreeNode, call_tree, render_timeline, render_tree, timeline

__all__ = [
    "TimelineEntry",
    "TreeNode",
    "call_tree",
    "render_timeline",
    "render_tree",
    "timeline",
]
