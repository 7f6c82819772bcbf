"""A child's input computed from another context class."""

from __future__ import annotations

import attrs

from statechart import Chart, JsonValue, invoke, state


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


APPROVAL: Chart[Approval] = Chart(
    "approval",
    # E: Argument "input" to "invoke" has incompatible type
    state("open", invoke=[invoke("notify", task="notify", input=task_input)]),
    context=Approval,
)
