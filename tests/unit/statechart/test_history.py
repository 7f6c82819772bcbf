"""History pseudo-states: shallow and deep, defaults, and history of parallel states (SCXML 3.10)."""

from __future__ import annotations

from statechart import Chart, Event, NoContext, history, log, parallel, start, state, step, transition
from statechart.snapshot import HistoryEntry, Snapshot
from tests.unit.statechart.support import labels, traced


def run(chart: Chart[NoContext], *names: str) -> Snapshot[NoContext]:
    """Start ``chart`` and process ``names`` in turn."""
    snapshot, _ = start(chart)
    for name in names:
        snapshot, _ = step(chart, snapshot, Event(name))
    return snapshot


def machine(*, deep: bool) -> Chart[NoContext]:
    """``work`` holds ``phase`` (p1 -> p2) and ``rest``; ``pause`` leaves it, ``resume`` returns via ``h``."""
    return Chart(
        "deep" if deep else "shallow",
        state(
            "work",
            history("h", "rest", deep=deep),
            state(
                "phase",
                state("p1", on=[transition("next", "p2")]),
                state("p2"),
            ),
            state("rest", on=[transition("back", "phase")]),
            on=[transition("pause", "paused")],
        ),
        state("paused", on=[transition("resume", "h")]),
    )


def test_shallow_history_restores_the_direct_child_only() -> None:
    """Shallow history re-enters the remembered child, which then takes its own default."""
    snapshot = run(machine(deep=False), "next", "pause", "resume")
    assert snapshot.configuration == ("work", "phase", "p1")


def test_deep_history_restores_the_atomic_descendants() -> None:
    """Deep history re-enters exactly the remembered atomic states and their ancestors."""
    snapshot = run(machine(deep=True), "next", "pause", "resume")
    assert snapshot.configuration == ("work", "phase", "p2")


def test_history_records_on_exit() -> None:
    """Exiting the parent records what the history remembers in the snapshot."""
    shallow = run(machine(deep=False), "next", "pause")
    deep = run(machine(deep=True), "next", "pause")
    assert shallow.history == (HistoryEntry("h", ("phase",)),)
    assert deep.history == (HistoryEntry("h", ("p2",)),)


def test_history_default_applies_before_any_exit() -> None:
    """Before the parent was ever exited, entering the history takes its default target."""
    chart = Chart(
        "fresh",
        state("off", on=[transition("on", "h")]),
        state("on_state", history("h", "b"), state("a"), state("b")),
        allow_unreachable=["a"],
    )
    snapshot = run(chart, "on")
    assert snapshot.configuration == ("on_state", "b")


def test_history_default_actions_run_after_parent_entry() -> None:
    """The default transition's actions run after the parent's entry actions, before the target's."""
    chart = Chart(
        "actions",
        traced("off", on=[transition("on", "h")]),
        traced("p", history("h", "b", actions=[log("default")]), traced("a"), traced("b")),
        allow_unreachable=["a"],
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("on"))
    assert labels(effects) == ["exit:off", "enter:p", "default", "enter:b"]


def test_history_default_actions_do_not_run_when_history_is_recorded() -> None:
    """Once the parent has been exited, re-entering via history skips the default actions."""
    chart = Chart(
        "recorded",
        state("off", on=[transition("on", "h")]),
        state(
            "p",
            history("h", "b", actions=[log("default")]),
            state("a"),
            state("b", on=[transition("flip", "a")]),
            on=[transition("off", "off")],
        ),
    )
    snapshot = run(chart, "on", "flip", "off")
    snapshot, effects = step(chart, snapshot, Event("on"))
    assert labels(effects) == []
    assert snapshot.configuration == ("p", "a")


def test_history_is_overwritten_by_the_latest_exit() -> None:
    """Each exit of the parent replaces what its history remembers."""
    chart = Chart(
        "latest",
        state("off", on=[transition("on", "h")]),
        state(
            "p",
            history("h", "a"),
            state("a", on=[transition("flip", "b")]),
            state("b", on=[transition("flip", "a")]),
            on=[transition("off", "off")],
        ),
    )
    snapshot = run(chart, "on", "flip", "off", "on", "flip", "off", "on")
    assert snapshot.configuration == ("p", "a")


def test_deep_history_of_parallel_restores_every_region() -> None:
    """Deep history on a parallel state restores the atomic state of each region."""
    chart = Chart(
        "par_deep",
        state("off", on=[transition("on", "h")]),
        parallel(
            "p",
            history("h", "a1", deep=True),
            state("r1", state("a1", on=[transition("a", "a2")]), state("a2")),
            state("r2", state("b1", on=[transition("b", "b2")]), state("b2")),
            on=[transition("off", "off")],
        ),
    )
    snapshot = run(chart, "on", "a", "b", "off")
    assert snapshot.history == (HistoryEntry("h", ("a2", "b2")),)
    snapshot, _ = step(chart, snapshot, Event("on"))
    assert chart.atomic(snapshot.configuration) == ("a2", "b2")


def test_shallow_history_of_parallel_restores_regions_by_default() -> None:
    """Shallow history on a parallel state remembers its regions, which re-enter their defaults."""
    chart = Chart(
        "par_shallow",
        state("off", on=[transition("on", "h")]),
        parallel(
            "p",
            history("h", "r1"),
            state("r1", state("a1", on=[transition("a", "a2")]), state("a2")),
            state("r2", state("b1")),
            on=[transition("off", "off")],
        ),
    )
    snapshot = run(chart, "on", "a", "off")
    assert snapshot.history == (HistoryEntry("h", ("r1", "r2")),)
    snapshot, _ = step(chart, snapshot, Event("on"))
    assert chart.atomic(snapshot.configuration) == ("a1", "b1")


def test_history_default_into_parallel_enters_other_regions() -> None:
    """A history default naming one region's state still enters every region of the parallel parent."""
    chart = Chart(
        "par_default",
        state("off", on=[transition("on", "h")]),
        parallel(
            "p",
            history("h", "a2", deep=True),
            state("r1", state("a1"), state("a2")),
            state("r2", state("b1")),
        ),
        allow_unreachable=["a1"],
    )
    snapshot = run(chart, "on")
    assert chart.atomic(snapshot.configuration) == ("a2", "b1")


def test_history_inside_a_region_restores_that_region_only() -> None:
    """A history inside one region of a parallel state restores that region; others take defaults."""
    chart = Chart(
        "region_history",
        state("off", on=[transition("on", "h")]),
        parallel(
            "p",
            state("r1", history("h", "a1"), state("a1", on=[transition("a", "a2")]), state("a2")),
            state("r2", state("b1", on=[transition("b", "b2")]), state("b2")),
            on=[transition("off", "off")],
        ),
    )
    snapshot = run(chart, "on", "a", "b", "off", "on")
    assert chart.atomic(snapshot.configuration) == ("a2", "b1")
