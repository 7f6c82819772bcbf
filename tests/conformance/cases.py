"""The shape of a ported SCION conformance case."""

from __future__ import annotations

from collections.abc import Callable

import attrs

from statechart import Chart, NoContext


@attrs.frozen
class Step:
    """Send ``event`` (after waiting ``after`` seconds); expect these atomic states."""

    event: str
    expected: list[str]
    after: float = 0.0


@attrs.frozen
class Case:
    """One SCION test: a chart, its initial atomic states, and its event script."""

    name: str
    chart: Callable[[], Chart[NoContext]]
    initial: list[str]
    script: list[Step]
