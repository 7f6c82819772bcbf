"""An unannotated lambda assigner returning an int, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, assign, final, state, transition


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
    # E: Incompatible return value type (got "int", expected "Approval")
    state("open", on=[transition("nudge", actions=[assign(lambda a, e: a.reminders + 1)])]),
    state("closed", on=[transition("close", "done")]),
    final("done"),
    context=Approval,
)
