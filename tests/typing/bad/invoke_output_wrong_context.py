"""A child's output mapped into another context class."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, invoke, state


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def keep(invoice: Invoice, event: Event) -> Invoice:
    """Output mapping for invoices."""
    return invoice


APPROVAL: Chart[Approval] = Chart(
    "approval",
    # E: Argument "output" to "invoke" has incompatible type
    state("open", invoke=[invoke("notify", task="notify", output=keep)]),
    context=Approval,
)
