"""An unannotated lambda guard reading a field the context lacks, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, final, state, transition


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


APPROVAL = Chart(
    "approval",
    # E: "Approval" has no attribute "total"
    state("open", on=[transition("go", "done", guard=lambda a, e: a.total > 1), transition("stay", "open")]),
    final("done"),
    context=Approval,
)
