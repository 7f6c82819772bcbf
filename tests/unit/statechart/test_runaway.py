"""The microstep cap: a macrostep that never settles is refused, not returned."""

from __future__ import annotations

import attrs
import pytest

from statechart import Chart, Event, always, assign, raise_event, start, state, step, transition
from statechart.errors import ChartInvalid, InvalidDefinition, RunawayMacrostep, StepError


@attrs.frozen
class Loops:
    """How many microsteps a looping chart should take before it settles."""

    limit: int = 0
    n: int = 0


def more(loops: Loops, event: Event) -> bool:
    return loops.n < loops.limit


def bump(loops: Loops, event: Event) -> Loops:
    return attrs.evolve(loops, n=loops.n + 1)


def looping(cap: int) -> Chart[Loops]:
    """An eventless targetless transition that runs ``limit`` times after ``go``."""
    return Chart(
        "looping",
        state("idle", on=[transition("go", "busy")]),
        state("busy", on=[always(guard=more, actions=[assign(bump)])]),
        context=Loops,
        max_microsteps=cap,
    )


def test_eventless_loop_past_the_cap_raises_runaway() -> None:
    """A macrostep needing more microsteps than ``max_microsteps`` raises RunawayMacrostep."""
    chart = looping(5)
    snapshot, _ = start(chart, Loops(limit=100))
    with pytest.raises(RunawayMacrostep) as caught:
        step(chart, snapshot, Event("go"))
    error = caught.value
    assert (error.chart, error.event, error.limit) == ("looping", "go", 5)
    assert error.configuration == ("busy",)
    assert "max_microsteps" in str(error)
    assert isinstance(error, StepError)
    assert isinstance(error, RuntimeError)


def test_cap_counts_every_microstep_of_the_macrostep() -> None:
    """Exactly ``max_microsteps`` microsteps are allowed; one more is refused."""
    # "go" itself is one microstep, then ``limit`` eventless ones
    chart = looping(5)
    snapshot, _ = start(chart, Loops(limit=4))
    settled, _ = step(chart, snapshot, Event("go"))
    assert settled.context.n == 4
    snapshot, _ = start(chart, Loops(limit=5))
    with pytest.raises(RunawayMacrostep):
        step(chart, snapshot, Event("go"))


def test_raised_event_ping_pong_is_a_runaway() -> None:
    """Two states raising each other's events forever exceed the cap."""
    chart = Chart(
        "ping_pong",
        state("idle", on=[transition("go", "ping")]),
        state("ping", entry=[raise_event("to_pong")], on=[transition("to_pong", "pong")]),
        state("pong", entry=[raise_event("to_ping")], on=[transition("to_ping", "ping")]),
        max_microsteps=50,
    )
    snapshot, _ = start(chart)
    with pytest.raises(RunawayMacrostep) as caught:
        step(chart, snapshot, Event("go"))
    assert caught.value.limit == 50


def test_runaway_on_start_is_raised_too() -> None:
    """A chart whose initial configuration loops forever fails in ``start``."""
    chart = Chart("spin", state("a", on=[always("b")]), state("b", on=[always("a")]), max_microsteps=10)
    with pytest.raises(RunawayMacrostep) as caught:
        start(chart)
    assert caught.value.event == ""


def test_runaway_leaves_the_given_snapshot_usable() -> None:
    """A refused macrostep changes nothing: the caller's snapshot still steps normally."""
    chart = Chart(
        "recover",
        state("idle", on=[transition("go", "busy"), transition("other", "calm")]),
        state("busy", on=[always(guard=more, actions=[assign(bump)])]),
        state("calm"),
        context=Loops,
        max_microsteps=3,
    )
    snapshot, _ = start(chart, Loops(limit=10))
    with pytest.raises(RunawayMacrostep):
        step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("idle",)
    assert snapshot.context == Loops(limit=10)
    snapshot, _ = step(chart, snapshot, Event("other"))
    assert snapshot.configuration == ("calm",)


def test_default_cap_is_a_thousand() -> None:
    """Charts allow 1000 microsteps per macrostep unless told otherwise."""
    chart = Chart(
        "default_cap",
        state("idle", on=[transition("go", "busy")]),
        state("busy", on=[always(guard=more, actions=[assign(bump)])]),
        context=Loops,
    )
    assert chart.max_microsteps == 1000
    snapshot, _ = start(chart, Loops(limit=999))
    assert step(chart, snapshot, Event("go"))[0].context.n == 999
    snapshot, _ = start(chart, Loops(limit=1000))
    with pytest.raises(RunawayMacrostep):
        step(chart, snapshot, Event("go"))


def test_cap_below_one_is_a_definition_error() -> None:
    """``max_microsteps`` must be positive."""
    with pytest.raises(ChartInvalid) as caught:
        Chart("zero", state("a"), max_microsteps=0)
    assert [type(e) for e in caught.value.exceptions] == [InvalidDefinition]


def test_a_raising_eventless_guard_runs_away_instead_of_hanging() -> None:
    """An eventless guard that always raises re-queues error.execution; the cap ends the macrostep."""

    def broken(context: object, event: Event) -> bool:
        raise RuntimeError("the guard is broken")

    chart = Chart("broken", state("s1", on=[always("s2", guard=broken)]), state("s2"), max_microsteps=50)
    with pytest.raises(RunawayMacrostep) as caught:
        start(chart)
    assert caught.value.event == "error.execution" and caught.value.limit == 50
