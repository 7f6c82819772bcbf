"""Run the ported SCION conformance cases: the active atomic states after every event."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from statechart import Chart, Event, NoContext, Snapshot, due_timers, fire, start, step
from tests.conformance import charts
from tests.conformance.cases import Case

KNOWN_FAILURES: dict[str, str] = {}
"""Cases the SCXML algorithm answers differently from SCION; see README.md here."""


def _cases() -> list[Case]:
    found: list[Case] = []
    for module in pkgutil.iter_modules(charts.__path__):
        found.extend(importlib.import_module(f"{charts.__name__}.{module.name}").CASES)
    return found


CASES = _cases()


def _deliver_due(chart: Chart[NoContext], snapshot: Snapshot[NoContext], now: float) -> Snapshot[NoContext]:
    """Fire every timer due at ``now``, earliest first, each as its own macrostep."""
    for _ in range(1000):
        due = due_timers(snapshot, now)
        if not due:
            return snapshot
        snapshot, _effects = fire(chart, snapshot, due[0].id, now=now)
    raise AssertionError("timers kept re-arming themselves")


def _atomic(chart: Chart[NoContext], snapshot: Snapshot[NoContext]) -> list[str]:
    return sorted(chart.atomic(snapshot.configuration))


def test_corpus_has_the_expression_free_cases() -> None:
    """The port covers all 86 expression-free SCION tests, each once."""
    names = [case.name for case in CASES]
    assert len(names) == 86
    assert len(set(names)) == 86


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_scion_case(case: Case) -> None:
    """The chart reaches the expected atomic configuration after each scripted event."""
    if case.name in KNOWN_FAILURES:
        pytest.xfail(KNOWN_FAILURES[case.name])
    chart = case.chart()
    now = 0.0
    snapshot, _ = start(chart, now=now)
    snapshot = _deliver_due(chart, snapshot, now)
    assert _atomic(chart, snapshot) == sorted(case.initial)
    for number, item in enumerate(case.script):
        now += item.after
        snapshot = _deliver_due(chart, snapshot, now)
        snapshot, _ = step(chart, snapshot, Event(item.event), now=now)
        snapshot = _deliver_due(chart, snapshot, now)
        assert _atomic(chart, snapshot) == sorted(item.expected), f"after event #{number} {item.event!r}"
