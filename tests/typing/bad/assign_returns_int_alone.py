"""An assigner returning an int, made into an action on its own."""

from __future__ import annotations

import attrs

from statechart import Event, assign


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


def count(approval: Approval, event: Event) -> int:
    """Returns a number, not a new context."""
    return approval.reminders + 1


# E: Cannot infer value of type parameter "T" of "assign"
NUDGE = assign(count)
