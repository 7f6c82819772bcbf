"""Charts, task tables, and things that are neither, for the command-line tests to name by import path."""

from __future__ import annotations

from incarnate import TaskCall, TaskFunction
from statechart import Chart, NoContext, after, final, state, transition

ORDER = Chart(
    "order",
    state("cart", on=[transition("checkout", "payment")]),
    state(
        "payment",
        state("payment.pending", on=[transition("paid", "payment.settled")]),
        final("payment.settled"),
        on=[transition("done.state.payment", "shipped"), after(600, "cancelled")],
    ),
    final("shipped"),
    final("cancelled"),
)
"""A small order chart: a cart, a nested payment, and two ways to finish."""

NOT_A_CHART = 42
"""A module attribute that is neither a chart nor a function returning one."""


def order() -> Chart[NoContext]:
    """Return the order chart: a zero-argument function is accepted in place of a chart."""
    return ORDER


def order_named(name: str) -> Chart[NoContext]:
    """Need an argument, which the command line cannot supply."""
    return ORDER


def not_a_chart() -> str:
    """Return something other than a chart."""
    return "order"


def broken() -> Chart[NoContext]:
    """Build a chart with two definition problems, so building it raises ``ChartInvalid``."""
    return Chart(
        "broken",
        state("a", on=[transition("go", "nowhere")]),
        state("a"),
    )


def charge(call: TaskCall) -> str:
    """Charge nothing and succeed: the ``charge`` task of the scenario charts."""
    return f"receipt for attempt {call.attempt}"


TASKS: dict[str, TaskFunction] = {"charge": charge}
"""The task functions the scenario charts invoke, for ``--tasks``."""


def tasks() -> dict[str, TaskFunction]:
    """Return the task table: a zero-argument function is accepted in place of a table."""
    return TASKS


NOT_TASKS = {"charge": "not callable"}
"""A table whose value is not a function."""
