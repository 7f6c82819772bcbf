"""A guard for another context class, beside a plain transition, in a chart whose type is inferred."""

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


APPROVAL = Chart(
    "approval",
    # E: Argument "guard" to "transition" has incompatible type
    state("open", on=[transition("go", "done", guard=is_big), transition("stay", "open")]),
    final("done"),
    context=Approval,
)
