"""A bare assigner written for another context class, in a chart whose type is inferred."""

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


def bill(invoice: Invoice, event: Event) -> Invoice:
    """An assigner for invoices."""
    return attrs.evolve(invoice, total=invoice.total + 1)


APPROVAL = Chart(
    "approval",
    # E: List item 0 has incompatible type "Callable[[Invoice, Event], Invoice]"
    state("open", entry=[bill], on=[transition("close", "done")]),
    final("done"),
    context=Approval,
)
