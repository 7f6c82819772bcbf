"""A guard that needs a context, on a chart that declares none."""

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


PLAIN = Chart(
    "plain",
    # E: expected "Callable[[NoContext, Event], bool] | InState | None"
    state("open", on=[transition("go", "done", guard=is_big)]),
    final("done"),
)
