"""A guard for another context class, in a chart whose type is inferred."""

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


# E: Cannot infer value of type parameter "C" of "Chart"
APPROVAL = Chart(
    "approval",
    state("open", on=[transition("go", "done", guard=is_big)]),
    final("done"),
    context=Approval,
)
