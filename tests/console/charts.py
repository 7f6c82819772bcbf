"""The charts the console tests run, and a store made by running them, for the console to show."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from uuid import UUID

import attrs

from incarnate import Engine, Storage
from incarnate._clock import VirtualClock
from incarnate._demo import ORDER, PACKER, TASKS
from statechart import Chart, final, state, transition

XSS = "<script>alert(1)</script><img src=x onerror=alert(1)>"
"""A context value that would run script if a page put it in as markup."""


@attrs.frozen
class Note:
    """What a gate shows its approver."""

    text: str = ""


GATE = Chart(
    "gate",
    state("waiting", on=[transition("approve", "approved"), transition("reject", "rejected")]),
    final("approved"),
    final("rejected"),
    context=Note,
    description="A human gate: it waits for approve or reject.",
)

CHARTS: list[Chart[Any]] = [ORDER, PACKER, GATE]
"""The charts of the console tests' store (``--charts tests.console.charts:CHARTS``)."""


@attrs.frozen
class Store:
    """A SQLite store made by running the charts, and the instances in it."""

    path: Path
    order: UUID
    """A demo order waiting at its approval gate, with its finished packers and card charge."""
    gate: UUID
    """A gate waiting, whose context holds :data:`XSS`."""
    approved: UUID
    """A gate approved: done."""
    cancelled: UUID
    """A gate cancelled by an operator."""


ORDER_ID = UUID("0d3e0000-0000-4000-8000-00000000d3e0")


def make_store(path: Path) -> Store:
    """Run the charts on a new SQLite file at ``path`` until each instance rests where :class:`Store` says."""
    clock = VirtualClock(time.time())
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(path)), clock=clock)
    try:
        order = engine.start("order", id=ORDER_ID).id
        for _ in range(10):  # the packers' timers and the charge's retry back-off fall due
            engine.run_until_idle()
            clock.advance(1.5)
        engine.run_until_idle()
        gate = engine.start("gate", {"text": XSS}).id
        approved = engine.start("gate", {"text": "ship it"}).id
        cancelled = engine.start("gate", {"text": "never mind"}).id
        engine.run_until_idle()
        engine.send(approved, "approve")
        engine.cancel(cancelled, "no longer wanted")
        engine.run_until_idle()
        configuration = engine.snapshot(order).configuration
        assert "awaiting_approval" in configuration, configuration
        return Store(path, order, gate, approved, cancelled)
    finally:
        engine.close()
