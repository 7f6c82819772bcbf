"""A context an action leaves unstorable fails its instance with the field named; nothing is stored as null.

JSON has no NaN or infinity and no form for a ``datetime`` or a ``set``. A
float field of a context is checked where the snapshot is encoded (the
converter's hook for every float), and a value a field typed ``Any`` passes
through is checked before the step is stored; either way the macrostep
becomes an incident and a ``Failed`` instance whose error names the path,
and the engine goes on with its other instances.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import attrs
import pytest

from aggregates import InstanceStatus
from incarnate import testing
from statechart import Chart, Event, assign, state, transition


@attrs.frozen
class Gauge:
    ratio: float = 1.0
    extra: Any = None


def to_nan(context: Gauge, event: Event) -> Gauge:
    return attrs.evolve(context, ratio=math.nan)


def to_infinity(context: Gauge, event: Event) -> Gauge:
    return attrs.evolve(context, ratio=-math.inf)


def to_datetime(context: Gauge, event: Event) -> Gauge:
    return attrs.evolve(context, extra={"when": datetime.datetime(2026, 1, 1)})


def to_tuple(context: Gauge, event: Event) -> Gauge:
    return attrs.evolve(context, extra=("a", 1))


GAUGE = Chart(
    "tests.hostile.gauge",
    state(
        "on",
        on=[
            transition("nan", "on", actions=[assign(to_nan)]),
            transition("infinity", "on", actions=[assign(to_infinity)]),
            transition("datetime", "on", actions=[assign(to_datetime)]),
            transition("tuple", "on", actions=[assign(to_tuple)]),
        ],
    ),
    context=Gauge,
)


@pytest.mark.parametrize(
    ("event", "where", "problem"),
    [
        ("nan", "snapshot.context.ratio", "nan is not representable in JSON"),
        ("infinity", "snapshot.context.ratio", "-inf is not representable in JSON"),
        ("datetime", "snapshot.context", "Object of type datetime is not JSON serializable"),
    ],
)
def test_an_unstorable_context_fails_the_instance_naming_the_field(
    event: str, where: str, problem: str
) -> None:
    with testing.memory_engine([GAUGE], {}) as engine:
        hostile = engine.start(GAUGE).id
        bystander = engine.start(GAUGE).id
        engine.run_until_idle()
        engine.send(hostile, event)
        engine.send(bystander, "tuple")
        engine.run_until_idle()  # returns: the bad step is the instance's failure, not the engine's
        record = engine.instance(hostile).record
        assert record.status is InstanceStatus.FAILED
        error = record.error
        assert isinstance(error, dict)
        assert error["error"] == "CodecError"
        assert f"at {where}: {problem}" in str(error["message"])
        assert [incident.kind for incident in record.incidents] == ["step-error"]
        # the committed context is the last good one; nothing was written as null
        assert engine.snapshot(hostile).context == Gauge()
        # the other instance stepped: a tuple in an ``Any`` field is stored as the list JSON has
        assert list(engine.snapshot(bystander).context.extra) == ["a", 1]
        stored = [event for event in engine.events_of(bystander) if type(event).__name__ == "Stepped"]
        assert stored[-1].parts["context"]["extra"] == ["a", 1]
