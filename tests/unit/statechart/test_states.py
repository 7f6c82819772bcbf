"""State kinds and initial configurations (SCXML 3.2-3.7)."""

from __future__ import annotations

from statechart import Chart, Event, NoContext, final, history, parallel, start, state, step, transition
from statechart.model import StateKind
from statechart.snapshot import Status
from tests.unit.statechart.support import labels, traced, traced_parallel


def test_state_without_children_is_atomic_and_with_children_compound() -> None:
    """``state()`` builds an atomic state, or a compound one when given children."""
    assert state("a").kind is StateKind.ATOMIC
    assert state("a", state("b")).kind is StateKind.COMPOUND
    assert parallel("p", state("r")).kind is StateKind.PARALLEL
    assert final("f").kind is StateKind.FINAL
    assert history("h", "b").kind is StateKind.HISTORY


def test_chart_reports_kinds_parents_and_document_order() -> None:
    """A compiled chart lists its states in document order with their kind and parent."""
    chart = Chart(
        "shapes",
        state("a", state("a1"), state("a2"), on=[transition("go", "p")]),
        parallel("p", state("r1"), state("r2")),
        allow_unreachable=["a2"],
    )
    assert chart.state_ids == ("a", "a1", "a2", "p", "r1", "r2")
    assert chart.kind_of("a") is StateKind.COMPOUND
    assert chart.kind_of("a1") is StateKind.ATOMIC
    assert chart.kind_of("p") is StateKind.PARALLEL
    assert chart.parent_of("a1") == "a"
    assert chart.parent_of("a") is None
    assert chart.atomic(("a", "a1", "p", "r1")) == ("a1", "r1")


def test_first_top_level_state_is_initial_by_default() -> None:
    """Without ``initial=``, the chart enters its first top-level state in document order."""
    chart = Chart("order", state("first", on=[transition("go", "second")]), state("second"))
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("first",)
    assert snapshot.status is Status.RUNNING
    assert snapshot.context == NoContext()


def test_chart_initial_selects_a_top_level_state() -> None:
    """``Chart(initial=...)`` overrides document order for the first configuration."""
    chart = Chart("order", state("first"), state("second", on=[transition("go", "first")]), initial="second")
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("second",)


def test_compound_enters_first_child_by_default_recursively() -> None:
    """A compound state without ``initial`` enters its first child, down to an atomic state."""
    chart = Chart(
        "nest",
        state(
            "outer",
            state("middle", state("inner", on=[transition("go", "other")]), state("inner2")),
            state("other", on=[transition("go", "inner2")]),
        ),
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("outer", "middle", "inner")


def test_compound_initial_names_a_child() -> None:
    """A compound state's ``initial`` names the child entered by default (SCXML 3.3)."""
    chart = Chart(
        "init",
        state("top", state("a", on=[transition("go", "b")]), state("b"), initial="b"),
        allow_unreachable=["a"],
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("top", "b")


def test_compound_initial_may_name_a_deep_descendant() -> None:
    """An initial naming a grandchild enters the intermediate state without its own default."""
    chart = Chart(
        "deep",
        state(
            "top",
            state("m", state("m1"), state("m2")),
            initial="m2",
        ),
        allow_unreachable=["m1"],
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("top", "m", "m2")


def test_history_child_is_never_the_default_initial() -> None:
    """A history pseudo-state written first is skipped when picking the default first child."""
    chart = Chart(
        "skip",
        state("top", history("h", "b"), state("a", on=[transition("go", "b")]), state("b")),
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("top", "a")


def test_parallel_enters_every_region() -> None:
    """Entering a parallel state enters each region and its default child (SCXML 3.4)."""
    chart = Chart(
        "par",
        parallel(
            "p",
            state("r1", state("a1"), state("a2")),
            state("r2", state("b1"), state("b2")),
            state("r3"),
        ),
        allow_unreachable=["a2", "b2"],
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("p", "r1", "a1", "r2", "b1", "r3")
    assert chart.atomic(snapshot.configuration) == ("a1", "b1", "r3")


def test_entry_order_is_parents_first_then_regions_in_document_order() -> None:
    """States are entered in document order: ancestors before descendants, regions left to right."""
    chart = Chart(
        "entry",
        traced_parallel("p", traced("r1", traced("a")), traced("r2", traced("b"))),
    )
    _, effects = start(chart)
    assert labels(effects) == ["enter:p", "enter:r1", "enter:a", "enter:r2", "enter:b"]


def test_multiple_initial_targets_enter_distinct_parallel_regions() -> None:
    """A compound ``initial`` may name one state per region of a parallel descendant."""
    chart = Chart(
        "multi",
        state(
            "top",
            parallel(
                "p",
                state("r1", state("a1"), state("a2")),
                state("r2", state("b1"), state("b2")),
            ),
            initial=["a2", "b2"],
        ),
        allow_unreachable=["a1", "b1"],
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("top", "p", "r1", "a2", "r2", "b2")


def test_chart_level_initial_may_name_several_parallel_states() -> None:
    """``Chart(initial=[...])`` with targets in distinct regions enters them together."""
    chart = Chart(
        "multi_root",
        parallel(
            "p",
            state("r1", state("a1"), state("a2")),
            state("r2", state("b1"), state("b2")),
        ),
        initial="a2 b2",
        allow_unreachable=["a1", "b1"],
    )
    snapshot, _ = start(chart)
    assert chart.atomic(snapshot.configuration) == ("a2", "b2")


def test_initial_into_one_region_defaults_the_others() -> None:
    """Naming a state in one region enters the other regions by their defaults."""
    chart = Chart(
        "one_region",
        parallel(
            "p",
            state("r1", state("a1"), state("a2")),
            state("r2", state("b1"), state("b2")),
        ),
        initial="a2",
        allow_unreachable=["a1", "b2"],
    )
    snapshot, _ = start(chart)
    assert chart.atomic(snapshot.configuration) == ("a2", "b1")


def test_final_state_is_atomic_in_configuration_queries() -> None:
    """A final state counts as atomic: it appears in ``Chart.atomic``."""
    chart = Chart("fin", state("a", state("a1", on=[transition("go", "f")]), final("f")))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert chart.atomic(snapshot.configuration) == ("f",)
    assert snapshot.active("a")
    assert not snapshot.active("a1")


def test_configuration_is_in_document_order_after_transitions() -> None:
    """The snapshot lists active states in document order whatever the order of entry."""
    chart = Chart(
        "order_after",
        state("z", on=[transition("go", "b2")]),
        parallel("p", state("r1", state("a1")), state("r2", state("b1"), state("b2"))),
        allow_unreachable=["b1"],
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("p", "r1", "a1", "r2", "b2")
