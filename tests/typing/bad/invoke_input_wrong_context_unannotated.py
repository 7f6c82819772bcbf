"""A child's input computed from another context class, in a chart whose type is inferred."""

from __future__ import annotations

import attrs

from statechart import Chart, JsonValue, final, invoke, state, transition


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def task_input(invoice: Invoice) -> JsonValue:
    """Input for invoices."""
    return invoice.total


APPROVAL = Chart(
    "approval",
    state(
        "open",
        # E: Argument "input" to "invoke" has incompatible type
        invoke=[invoke("notify", task="notify", input=task_input)],
        on=[transition("close", "done")],
    ),
    final("done"),
    context=Approval,
)
