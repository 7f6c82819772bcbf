"""Done data computed from another context class, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, JsonValue, final, state, transition


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def total(invoice: Invoice, event: Event) -> JsonValue:
    """Done data for invoices."""
    return invoice.total


APPROVAL = Chart(
    "approval",
    state("open", on=[transition("close", "done")]),
    # E: Argument "done_data" to "final" has incompatible type
    final("done", done_data=total),
    context=Approval,
)
