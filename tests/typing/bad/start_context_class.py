"""Starting an instance with the context class instead of the chart."""

from __future__ import annotations

import attrs

from incarnate import Engine
from statechart import Chart, state


@attrs.frozen
class Approval:
    """The chart's context."""

    title: str = ""
    reminders: int = 0


@attrs.frozen
class Invoice:
    """Another context class."""

    total: float = 0.0


APPROVAL: Chart[Approval] = Chart("approval", state("open"), context=Approval)


def begin(engine: Engine) -> None:
    """Passes the context class where the chart belongs."""
    # E: Argument 1 to "start" of "Engine" has incompatible type
    engine.start(Approval, {"title": "desk"})
