"""Action and guard errors are visible: a timeline line and a log record per failure (every store)."""

from __future__ import annotations

import logging
from uuid import UUID

import attrs
import pytest

from incarnate import Engine
from projections import render_timeline, timeline
from statechart import Chart, Event, assign, state, transition
from tests.stores import EngineFactory, clock, make_engine, storage

__all__ = ["clock", "make_engine", "storage"]

WRONG = "assign wrong_type returned Other, expected Counter (or None to keep the context)"


@attrs.frozen
class Counter:
    """The context of the chart under test."""

    n: int = 0


@attrs.frozen
class Other:
    """A context class the chart does not declare."""


def wrong_type(counter: Counter, event: Event) -> Other:
    return Other()


def increment(counter: Counter, event: Event) -> Counter:
    return attrs.evolve(counter, n=counter.n + 1)


def fussy(counter: Counter, event: Event) -> bool:
    raise ValueError("no opinion")


SILENT = Chart(
    "silent",
    state(
        "a",
        on=[
            # mypy rejects the assigner; the run-time check is what these tests pin
            transition("go", actions=[assign(increment), assign(wrong_type)], id="bump"),  # type: ignore[arg-type]
            transition("check", "b", guard=fussy),
        ],
    ),
    state("b"),
    context=Counter,
)
"""A chart with no ``error.execution`` handler: its failures change nothing in the chart."""


def run(make_engine: EngineFactory, *events: str) -> tuple[Engine, UUID]:
    engine = make_engine([SILENT])
    instance_id = engine.start("silent")
    for name in events:
        engine.send(instance_id, name)
    engine.run_until_idle()
    return engine, instance_id


def test_wrong_type_assign_gets_a_timeline_line(make_engine: EngineFactory) -> None:
    """An ignored wrong-type assign shows as an ``error.execution`` line naming the action and exception."""
    engine, instance_id = run(make_engine, "go")
    assert engine.snapshot(instance_id).context == Counter(n=1)  # the wrong value was dropped
    entries = timeline(engine.events_of(instance_id))
    errors = [entry for entry in entries if entry.event == "error.execution"]
    assert [entry.summary for entry in errors] == [
        f"error.execution in transition 'bump' of state 'a': assign wrong_type raised TypeError: {WRONG}"
    ]
    stepped = next(entry for entry in entries if entry.summary.startswith("event 'go'"))
    assert errors[0].version == stepped.version
    assert entries.index(errors[0]) == entries.index(stepped) + 1
    assert errors[0].summary in render_timeline(entries)


def test_raising_guard_gets_a_timeline_line(make_engine: EngineFactory) -> None:
    """A raising guard shows as an ``error.execution`` line naming the guard, its transition and the error."""
    engine, instance_id = run(make_engine, "check")
    summaries = [e.summary for e in timeline(engine.events_of(instance_id)) if e.event == "error.execution"]
    assert summaries == [
        "error.execution in transition 'a#1' of state 'a': guard of a#1 raised ValueError: no opinion"
    ]


def test_macrostep_without_failures_has_no_error_line(make_engine: EngineFactory) -> None:
    """A timeline of macrosteps in which nothing raised has no ``error.execution`` line."""
    engine, instance_id = run(make_engine)
    assert [e.event for e in timeline(engine.events_of(instance_id))] == ["Started", "Stepped"]


def test_committed_failure_is_logged_with_instance_and_chart(
    make_engine: EngineFactory, caplog: pytest.LogCaptureFixture
) -> None:
    """The engine logs a WARNING under ``incarnate.engine`` naming the instance, the chart and the failure."""
    with caplog.at_level(logging.WARNING, logger="incarnate.engine"):
        engine, instance_id = run(make_engine, "go")
    records = [
        r for r in caplog.records if r.name.startswith("incarnate.engine") and "error.execution" in r.message
    ]
    assert len(records) == 1
    (record,) = records
    assert record.levelno == logging.WARNING
    assert str(instance_id) in record.message and "'silent'" in record.message
    assert f"assign wrong_type raised TypeError: {WRONG}" in record.message
    assert record.instance_id == str(instance_id)  # type: ignore[attr-defined]
    assert record.chart == "silent"  # type: ignore[attr-defined]
    assert engine.snapshot(instance_id).context == Counter(n=1)  # the wrong value was dropped
