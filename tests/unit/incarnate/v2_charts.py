"""Version 2 of the scenario charts' ``parent``, for the command-line tests of parking and migration."""

from __future__ import annotations

from typing import Any

from statechart import Chart, final, invoke, state, transition
from tests.scenarios import charts

PARENT = Chart(
    "parent",
    state(
        "collecting",
        invoke=[invoke("team", chart="kid", map=charts.team, output=charts.keep_output)],
        on=[transition("done.invoke.team", "reviewing")],
    ),
    state("reviewing", on=[transition("approve", "approved")]),
    final("approved"),
    context=charts.Family,
)
"""Version 2 of ``parent``: the state ``gathering`` was renamed ``collecting``."""

ALL: list[Chart[Any]] = [PARENT, charts.KID]
"""The charts an engine of version 2 registers."""
