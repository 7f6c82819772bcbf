"""A bare assigner in an action list, written for another context class."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, state


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


APPROVAL: Chart[Approval] = Chart(
    "approval",
    # E: List item 0 has incompatible type "Callable[[Invoice, Event], Invoice]"
    state("open", entry=[bill]),
    context=Approval,
)
