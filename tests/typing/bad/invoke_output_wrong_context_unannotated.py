"""A child's output mapped into another context class, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, Event, final, invoke, state, transition


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


APPROVAL = Chart(
    "approval",
    state(
        "open",
        # E: Argument "output" to "invoke" has incompatible type
        invoke=[invoke("notify", task="notify", output=keep)],
        on=[transition("close", "done")],
    ),
    final("done"),
    context=Approval,
)
