"""Reading a field the chart's context does not have from a typed snapshot."""

from __future__ import annotations

from uuid import UUID

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


def total(engine: Engine, instance_id: UUID) -> float:
    """Reads an invoice field from an approval."""
    # E: "Approval" has no attribute "total"
    return engine.snapshot(instance_id, APPROVAL).context.total
