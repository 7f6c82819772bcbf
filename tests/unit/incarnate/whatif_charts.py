"""Versions of a ``ticket`` chart for the what-if tests: each takes the same recorded inputs differently."""

from __future__ import annotations

from typing import Any

from statechart import Chart, JsonValue, after, final, state, transition


def _ticket(*states: Any, **options: Any) -> Chart[Any]:
    return Chart("ticket", *states, **options)


V1 = _ticket(
    state("open", on=[transition("submit", "review")]),
    state(
        "review",
        on=[transition("approve", "closed"), transition("hold", "waiting"), after(3600, "escalated")],
    ),
    state("waiting", on=[transition("release", "review")]),
    state("escalated", on=[transition("approve", "closed")]),
    final("closed"),
)
"""The ticket as the instances were started with it: submitted tickets wait in ``review``."""

SAME = _ticket(
    state("open", on=[transition("submit", "review")]),
    state(
        "review",
        on=[
            transition("approve", "closed"),
            transition("hold", "waiting"),
            transition("reject", "closed"),
            after(3600, "escalated"),
        ],
    ),
    state("waiting", on=[transition("release", "review")]),
    state("escalated", on=[transition("approve", "closed")]),
    final("closed"),
)
"""A compatible change (``reject`` added): every recorded input leads where it led."""

DIVERGES = _ticket(
    state("open", on=[transition("submit", "waiting")]),
    state("review", on=[transition("approve", "closed"), after(3600, "escalated")]),
    state("waiting", on=[transition("release", "review")]),
    state("escalated", on=[transition("approve", "closed")]),
    final("closed"),
)
"""``submit`` now leads to ``waiting``: a submitted ticket diverges at its submit."""

STRANDS = _ticket(
    state("open", on=[transition("submit", "review")]),
    state("review"),
    state("waiting", on=[transition("release", "review")]),
    state("escalated", on=[transition("approve", "closed")]),
    final("closed"),
    allow_unreachable=["waiting", "escalated", "closed"],
)
"""``review`` lost its transitions and its timer: a submitted ticket waits there forever."""


def _refuse(value: JsonValue) -> Any:
    raise ValueError(f"the new ticket wants an input with a 'queue', got {value!r}")


PARKS = _ticket(
    state("open", on=[transition("submit", "review")]),
    state("review", on=[transition("approve", "closed")]),
    final("closed"),
    context_from_input=_refuse,
)
"""Its context does not build from the recorded input: the replay raises."""

ALL_V1: list[Chart[Any]] = [V1]
ALL_SAME: list[Chart[Any]] = [SAME]
ALL_DIVERGES: list[Chart[Any]] = [DIVERGES]
ALL_STRANDS: list[Chart[Any]] = [STRANDS]
ALL_PARKS: list[Chart[Any]] = [PARKS]
