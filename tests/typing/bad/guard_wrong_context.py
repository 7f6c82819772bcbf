"""A guard written for another context class than the chart's."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, final, state, transition


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def is_big(invoice: Invoice, event: Event) -> bool:
    """A guard for invoices."""
    return invoice.total > 100


APPROVAL: Chart[Approval] = Chart(
    "approval",
    # E: Argument "guard" to "transition" has incompatible type
    state("open", on=[transition("go", "done", guard=is_big)]),
    final("done"),
    context=Approval,
)
