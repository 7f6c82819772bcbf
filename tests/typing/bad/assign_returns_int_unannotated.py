"""An assigner returning an int, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, assign, final, state, transition


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def count(approval: Approval, event: Event) -> int:
    """Returns a number, not a new context."""
    return approval.reminders + 1


APPROVAL = Chart(
    "approval",
    # E: Argument 1 to "assign" has incompatible type "Callable[[Approval, Event], int]"
    state("open", on=[transition("nudge", actions=[assign(count)]), transition("close", "done")]),
    final("done"),
    context=Approval,
)
