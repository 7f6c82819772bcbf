"""Completion: done.state events, top-level final states, and stopping (SCXML 3.7, 3.13, D)."""

from __future__ import annotations

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    JsonValue,
    assign,
    final,
    fire,
    invoke,
    log,
    parallel,
    raise_event,
    send,
    start,
    state,
    step,
    stop,
    transition,
)
from statechart.effects import ActionFailed, CancelChild, CancelTimer, Completed, Logged, Stopped
from statechart.errors import ChartInvalid, InstanceFinished, StepError, UnknownTimer
from statechart.event import EventKind, InvokeId
from statechart.snapshot import Status
from tests.unit.statechart.support import labels, of_type, traced


@attrs.frozen
class Tally:
    """A context with a number and the events a transition recorded."""

    n: int = 0
    seen: tuple[Event, ...] = ()


def record(tally: Tally, event: Event) -> Tally:
    return attrs.evolve(tally, seen=(*tally.seen, event))


def summary(tally: Tally, event: Event) -> JsonValue:
    return {"n": tally.n}


def test_entering_a_final_child_raises_done_state_of_its_parent() -> None:
    """Entering a final child queues ``done.state.<parent>`` carrying the final's done data."""
    chart = Chart(
        "done_compound",
        state(
            "job",
            state("working", on=[transition("finish", "finished")]),
            final("finished", done_data={"ok": True}),
            on=[transition("done.state.job", "after", actions=[assign(record)])],
        ),
        state("after"),
        context=Tally,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("finish"))
    assert snapshot.configuration == ("after",)
    assert snapshot.context.seen == (Event("done.state.job", {"ok": True}, EventKind.PLATFORM),)


def test_done_data_may_be_computed_from_the_context() -> None:
    """A callable ``done_data`` is evaluated with (context, event) when the final state is entered."""
    chart = Chart(
        "computed_done",
        state(
            "job",
            state("working", on=[transition("finish", "finished")]),
            final("finished", done_data=summary),
            on=[transition("done.state.job", actions=[assign(record)])],
        ),
        context=Tally,
    )
    snapshot, _ = start(chart, Tally(n=7))
    snapshot, _ = step(chart, snapshot, Event("finish"))
    assert [e.data for e in snapshot.context.seen] == [{"n": 7}]


def test_failing_done_data_is_an_execution_error_and_done_still_fires() -> None:
    """A raising ``done_data`` yields ActionFailed and ``done.state`` with no data."""

    def broken(tally: Tally, event: Event) -> int:
        raise ValueError("bad done data")

    chart = Chart(
        "broken_done",
        state(
            "job",
            state("working", on=[transition("finish", "finished")]),
            final("finished", done_data=broken),
            on=[transition("done.state.job", actions=[assign(record)])],
        ),
        context=Tally,
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("finish"))
    (failure,) = of_type(effects, ActionFailed)
    assert (failure.state, failure.action) == ("finished", "done_data")
    assert [(e.name, e.data) for e in snapshot.context.seen] == [("done.state.job", None)]


def test_parallel_is_done_when_every_region_is_final() -> None:
    """``done.state.<parallel>`` is raised once, only after the last region reaches a final state."""
    chart = Chart(
        "done_parallel",
        state(
            "outer",
            parallel(
                "p",
                state("r1", state("a", on=[transition("a", "a_done")]), final("a_done")),
                state("r2", state("b", on=[transition("b", "b_done")]), final("b_done")),
            ),
            on=[transition("done.state", actions=[assign(record)])],
        ),
        context=Tally,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("a"))
    assert [e.name for e in snapshot.context.seen] == ["done.state.r1"]
    snapshot, _ = step(chart, snapshot, Event("b"))
    assert [e.name for e in snapshot.context.seen] == ["done.state.r1", "done.state.r2", "done.state.p"]
    assert snapshot.context.seen[-1].data is None


def test_parallel_regions_finishing_together_raise_done_once() -> None:
    """When all regions reach final states in one microstep, ``done.state.<parallel>`` is raised once."""
    chart = Chart(
        "together",
        state(
            "outer",
            parallel(
                "p",
                state("r1", state("a", on=[transition("go", "a_done")]), final("a_done")),
                state("r2", state("b", on=[transition("go", "b_done")]), final("b_done")),
            ),
            on=[transition("done.state", actions=[assign(record)])],
        ),
        context=Tally,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert [e.name for e in snapshot.context.seen] == ["done.state.r1", "done.state.r2", "done.state.p"]


def test_top_level_final_completes_the_instance() -> None:
    """Entering a top-level final state sets status DONE, stores the output and returns Completed."""
    chart = Chart(
        "complete",
        state("a", on=[transition("finish", "end")]),
        final("end", done_data=summary),
        context=Tally,
    )
    snapshot, _ = start(chart, Tally(n=3))
    snapshot, effects = step(chart, snapshot, Event("finish"))
    assert snapshot.status is Status.DONE
    assert snapshot.output == {"n": 3}
    assert effects[-1] == Completed({"n": 3})


def test_top_level_final_reached_on_start_completes_at_once() -> None:
    """A chart whose initial configuration is final completes in ``start``."""
    chart = Chart("instant", final("end", done_data=[1, 2]))
    snapshot, effects = start(chart)
    assert snapshot.status is Status.DONE
    assert effects == (Completed([1, 2]),)


def test_completion_runs_exit_actions_of_the_final_configuration() -> None:
    """At completion every active state is exited, final state included, before Completed."""
    chart = Chart(
        "exits",
        traced("a", on=[transition("finish", "end")]),
        final("end", entry=[log("enter:end")], exit=[log("exit:end")]),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("finish"))
    assert labels(effects) == ["exit:a", "enter:end", "exit:end"]
    assert isinstance(effects[-1], Completed)


def test_completion_discards_pending_internal_events() -> None:
    """Internal events still queued when the instance completes are not processed."""
    chart = Chart(
        "discard",
        state("a", on=[transition("finish", "end", actions=[raise_event("late")])]),
        final("end"),
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("finish"))
    assert snapshot.internal_queue == ()
    assert effects == (Completed(None),)


def test_completion_cancels_children_and_timers() -> None:
    """Completion cancels running children and armed timers, as leaving their states would."""
    chart = Chart(
        "cleanup",
        parallel(
            "p",
            state("worker", invoke=[invoke("job", task="t")]),
            state("clock", on=[transition("arm", actions=[send("tick", delay=5, id="tick")])]),
            on=[transition("finish", "end")],
        ),
        final("end"),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("arm"))
    snapshot, effects = step(chart, snapshot, Event("finish"))
    assert CancelChild(InvokeId("job", "", 1)) in effects
    assert CancelTimer("tick") in effects
    assert snapshot.children == ()
    assert snapshot.timers == ()


def test_stepping_a_finished_instance_is_refused() -> None:
    """``step`` on a DONE snapshot raises InstanceFinished naming the chart, status and event."""
    chart = Chart("finished", state("a", on=[transition("finish", "end")]), final("end"))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("finish"))
    with pytest.raises(InstanceFinished) as caught:
        step(chart, snapshot, Event("again"))
    assert (caught.value.chart, caught.value.status, caught.value.event) == ("finished", "done", "again")
    assert isinstance(caught.value, StepError)


def test_stop_exits_everything_and_reports_stopped() -> None:
    """``stop`` runs every exit action, cancels children and timers, and sets status STOPPED."""
    chart = Chart(
        "stoppable",
        traced(
            "a",
            state("a1", invoke=[invoke("job", task="t")], entry=[send("tick", delay=5, id="tick")]),
        ),
    )
    snapshot, _ = start(chart)
    stopped, effects = stop(chart, snapshot, reason="operator", now=3.0)
    assert stopped.status is Status.STOPPED
    assert stopped.time == 3.0
    assert stopped.steps == snapshot.steps + 1
    assert effects == (
        CancelChild(InvokeId("job", "", 1)),
        Logged("exit:a", None),
        CancelTimer("tick"),
        Stopped("operator"),
    )


def test_stop_of_a_finished_instance_is_refused() -> None:
    """``stop`` on a stopped or completed instance raises InstanceFinished."""
    chart = Chart("twice", state("a"))
    snapshot, _ = start(chart)
    stopped, _ = stop(chart, snapshot)
    with pytest.raises(InstanceFinished):
        stop(chart, stopped)
    with pytest.raises(InstanceFinished):
        step(chart, stopped, Event("x"))


def test_stopped_instance_refuses_timers() -> None:
    """After ``stop``, no timer remains for ``fire``."""
    chart = Chart("stop_timer", state("a", entry=[send("tick", delay=1, id="tick")]))
    snapshot, _ = start(chart)
    stopped, _ = stop(chart, snapshot)
    with pytest.raises(UnknownTimer):
        fire(chart, stopped, "tick")


def test_final_region_does_not_complete_its_parallel_early() -> None:
    """A parallel state is not done while a region still runs, even beside a final region."""
    try:
        chart = Chart(
            "final_region",
            state(
                "top",
                parallel(
                    "p",
                    final("f1"),
                    state("r", state("r1", on=[transition("go", "r2")]), final("r2")),
                ),
                on=[transition("done.state.p", "out")],
            ),
            state("out"),
        )
    except ChartInvalid:
        return  # refusing <final> as a direct child of <parallel> (as the SCXML schema does) is also correct
    snapshot, _ = start(chart)
    assert snapshot.active("r1")
