"""Definition-time validation: every problem is named, with a fix, and reported at once."""

from __future__ import annotations

from collections.abc import Callable

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    RetryPolicy,
    history,
    in_state,
    invoke,
    parallel,
    send_child,
    state,
    transition,
)
from statechart.errors import (
    AmbiguousId,
    ChartInvalid,
    DefinitionError,
    FinalWithChildren,
    HistoryOutsideCompound,
    IncarnateError,
    InvalidDefinition,
    MissingInitial,
    UnboundedRecursion,
    UnknownTarget,
    UnreachableState,
    UnstableId,
)
from statechart.model import StateKind, StateNode


@attrs.frozen
class Frozen:
    """A valid context."""

    n: int = 0


@attrs.define
class Mutable:
    """An attrs class that is not frozen."""

    n: int = 0


class Plain:
    """Not an attrs class at all."""


def problems(build: Callable[[], object]) -> list[DefinitionError]:
    """The definition errors ``build`` raises in its ChartInvalid group."""
    with pytest.raises(ChartInvalid) as caught:
        build()
    found = [error for error in caught.value.exceptions if isinstance(error, DefinitionError)]
    assert len(found) == len(caught.value.exceptions)
    return found


def only(build: Callable[[], object], kind: type[DefinitionError]) -> DefinitionError:
    """The single problem ``build`` raises, checked to be of class ``kind``."""
    found = problems(build)
    assert [type(p) for p in found] == [kind], found
    return found[0]


def test_chart_invalid_is_an_exception_group_of_definition_errors() -> None:
    """ChartInvalid is an ExceptionGroup and an IncarnateError; its members are ValueErrors."""
    error = only(lambda: Chart("c", state("a", on=[transition("go", "nowhere")])), UnknownTarget)
    assert isinstance(error, ValueError)
    assert isinstance(error, IncarnateError)
    with pytest.raises(ChartInvalid) as caught:
        Chart("c", state("a", on=[transition("go", "nowhere")]))
    assert isinstance(caught.value, ExceptionGroup)
    assert isinstance(caught.value, IncarnateError)
    assert "chart 'c'" in str(caught.value)


def test_split_keeps_the_chart_invalid_class() -> None:
    """Splitting the group (as ``except*`` does) yields ChartInvalid again."""
    with pytest.raises(ChartInvalid) as caught:
        Chart("c", state("a", on=[transition("go", "x"), transition("go", "y")]))
    matched, rest = caught.value.split(UnknownTarget)
    assert isinstance(matched, ChartInvalid)
    assert rest is None


def test_several_problems_are_reported_together() -> None:
    """One ChartInvalid lists every problem found, of different kinds."""
    found = problems(
        lambda: Chart(
            "many",
            state("a", on=[transition("go", "missing")]),
            state("a"),
            state("bad id", on=[transition("go", "a")]),
            context=Mutable,
        )
    )
    assert sorted(type(p).__name__ for p in found) == [
        "AmbiguousId",
        "InvalidDefinition",
        "UnknownTarget",
        "UnreachableState",
        "UnstableId",
    ]


# ---------------------------------------------------------------- targets


def test_unknown_transition_target_names_the_transition_and_fix() -> None:
    """A transition to a missing state raises UnknownTarget naming the source state, event and target."""
    error = only(lambda: Chart("c", state("a", on=[transition("go", "nowhere")])), UnknownTarget)
    assert error.chart == "c"
    assert error.where == "transition #0 (on go) of state 'a'"
    assert "'nowhere'" in error.problem
    assert "fix:" in str(error) and "'a'" in error.fix


def test_transition_id_appears_in_messages() -> None:
    """A transition with an ``id`` is named by that id in validation messages."""
    error = only(lambda: Chart("c", state("a", on=[transition("go", "x", id="leave")])), UnknownTarget)
    assert error.where == "transition 'leave' of state 'a'"


def test_in_state_guard_naming_no_state_is_an_unknown_target() -> None:
    """``in_state`` must name an existing state."""
    error = only(
        lambda: Chart("c", state("a", on=[transition("go", "a", guard=in_state("ghost"))])),
        UnknownTarget,
    )
    assert "ghost" in error.problem


def test_send_child_naming_no_site_is_an_unknown_target() -> None:
    """``send_child`` must name a site the chart declares."""
    error = only(
        lambda: Chart("c", state("a", entry=[send_child("nope", "hi")])),
        UnknownTarget,
    )
    assert error.where == "entry of state 'a'"
    assert "'nope'" in error.problem


def test_history_default_must_exist_and_be_a_descendant() -> None:
    """A history default naming a missing or foreign state is an UnknownTarget."""
    missing = only(
        lambda: Chart("c", state("p", history("h", "ghost"), state("a"))),
        UnknownTarget,
    )
    assert missing.where == "history 'h'"
    foreign = only(
        lambda: Chart("c", state("p", history("h", "q"), state("a"), on=[transition("x", "q")]), state("q")),
        UnknownTarget,
    )
    assert "not a descendant of 'p'" in foreign.problem


def test_allow_unreachable_must_name_existing_states() -> None:
    """Waiving reachability for a state that does not exist is an UnknownTarget."""
    error = only(lambda: Chart("c", state("a"), allow_unreachable=["ghost"]), UnknownTarget)
    assert error.where == "allow_unreachable"


# ---------------------------------------------------------------- reachability


def test_unreachable_state_is_reported() -> None:
    """A state that no initial, transition or history default enters is UnreachableState."""
    error = only(lambda: Chart("c", state("a"), state("island")), UnreachableState)
    assert error.where == "state 'island'"
    assert "transition" in error.fix


def test_unreachable_subtree_is_reported_once_at_its_root() -> None:
    """Descendants of an unreachable state are not reported separately."""
    error = only(lambda: Chart("c", state("a"), state("island", state("i1"), state("i2"))), UnreachableState)
    assert error.where == "state 'island'"


def test_allow_unreachable_waives_the_check() -> None:
    """``allow_unreachable`` accepts a deliberately unreachable state and its descendants."""
    chart = Chart("c", state("a"), state("island", state("i1")), allow_unreachable=["island"])
    assert "island" in chart.state_ids


def test_reachability_follows_parallel_regions_and_history_defaults() -> None:
    """States entered by a parallel sibling region or a history default count as reachable."""
    chart = Chart(
        "c",
        state("a", on=[transition("go", "x1"), transition("back", "h")]),
        parallel("p", state("r1", state("x1")), state("r2", state("y1"))),
        state("q", history("h", "q2"), state("q1"), state("q2")),
        allow_unreachable=["q1"],
    )
    assert chart.kind_of("y1") is StateKind.ATOMIC


def test_unknown_target_and_unreachable_state_are_reported_together() -> None:
    """An unknown transition target does not hide an unreachable state: both are in one ChartInvalid."""
    found = problems(lambda: Chart("c", state("a", on=[transition("go", "ghost")]), state("island")))
    assert [type(p) for p in found] == [UnknownTarget, UnreachableState]
    assert [p.where for p in found] == ["transition #0 (on go) of state 'a'", "state 'island'"]


def test_reachability_treats_unknown_names_as_entering_nothing() -> None:
    """An unknown initial falls back to the first child; an unknown history default enters nothing."""
    found = problems(
        lambda: Chart(
            "c",
            state("a", state("a1"), state("a2"), initial="ghost", on=[transition("back", "h")]),
            state("q", history("h", "phantom"), state("q1")),
        )
    )
    assert sorted((type(p).__name__, p.where) for p in found) == [
        ("MissingInitial", "state 'a'"),
        ("UnknownTarget", "history 'h'"),
        ("UnreachableState", "state 'a2'"),
        ("UnreachableState", "state 'q1'"),
    ]


def test_misplaced_history_still_has_its_default_checked() -> None:
    """A history outside a compound state is reported together with its unknown default target."""
    found = problems(lambda: Chart("c", state("a"), history("h", "ghost")))
    assert sorted(type(p).__name__ for p in found) == ["HistoryOutsideCompound", "UnknownTarget"]


def test_site_on_a_final_state_is_still_checked() -> None:
    """A site on a final state is reported, and so are the site's own problems."""
    bad_final = StateNode("f", StateKind.FINAL, sites=(invoke("w"),))
    found = problems(lambda: Chart("c", state("a", on=[transition("go", "f")]), bad_final))
    assert [p.problem for p in found] == [
        "a final state has transitions or child sites",
        "a site needs exactly one of chart=, task= and choose=",
    ]


# ---------------------------------------------------------------- initial states


def test_missing_compound_initial_is_reported() -> None:
    """A compound ``initial`` naming no state is MissingInitial with a suggested child."""
    error = only(lambda: Chart("c", state("p", state("a"), initial="ghost")), MissingInitial)
    assert error.where == "state 'p'"
    assert "'a'" in error.fix


def test_compound_initial_outside_the_state_is_reported() -> None:
    """A compound ``initial`` must be one of its descendants; the state it names is then unreachable."""
    found = problems(lambda: Chart("c", state("p", state("a"), initial="q"), state("q"), initial="p"))
    assert [type(p) for p in found] == [MissingInitial, UnreachableState]
    assert "not one of its descendants" in found[0].problem
    assert found[1].where == "state 'q'"


def test_initial_on_an_atomic_state_is_reported() -> None:
    """``initial=`` on a state with no children is MissingInitial; the state it names stays unreachable."""
    found = problems(lambda: Chart("c", state("a", initial="b"), state("b")))
    assert [type(p) for p in found] == [MissingInitial, UnreachableState]


def test_chart_without_states_is_reported() -> None:
    """A chart with no states has no initial configuration."""
    error = only(lambda: Chart("empty"), MissingInitial)
    assert error.where == "the chart"


def test_chart_initial_naming_no_state_is_reported() -> None:
    """``Chart(initial=...)`` must name an existing state."""
    only(lambda: Chart("c", state("a"), initial="ghost"), MissingInitial)


def test_compound_with_only_history_children_is_reported() -> None:
    """A compound whose only child is a history state has no initial state."""
    found = problems(lambda: Chart("c", state("p", history("h", "p"))))
    error = next(p for p in found if isinstance(p, MissingInitial))
    assert "only history children" in error.problem


def test_parallel_without_regions_is_reported() -> None:
    """A parallel state needs at least one region."""
    error = only(lambda: Chart("c", parallel("p")), MissingInitial)
    assert "no regions" in error.problem


def test_history_without_default_is_reported() -> None:
    """A history state without a default target is MissingInitial."""
    error = only(lambda: Chart("c", state("p", history("h"), state("a"))), MissingInitial)
    assert "history('h', default=...)" in error.fix


# ---------------------------------------------------------------- ids


def test_duplicate_state_ids_are_ambiguous() -> None:
    """Two states with one id raise AmbiguousId."""
    error = only(lambda: Chart("c", state("a", state("x")), state("x")), AmbiguousId)
    assert error.where == "state 'x'"


def test_duplicate_site_and_transition_ids_are_ambiguous() -> None:
    """Site ids and transition ids must each be unique within a chart."""
    found = problems(
        lambda: Chart(
            "c",
            state(
                "a",
                invoke=[invoke("w", task="t"), invoke("w", task="t")],
                on=[transition("x", "a", id="t1"), transition("y", "a", id="t1")],
            ),
        )
    )
    assert [type(p) for p in found] == [AmbiguousId, AmbiguousId]


@pytest.mark.parametrize("bad", ["", "1abc", "has space", "a..b", "a.", "ü-nicode", "a/b"])
def test_unstable_state_ids_are_refused(bad: str) -> None:
    """State ids must be dot-separated tokens of letters, digits, '_' and '-'."""
    found = problems(lambda: Chart("c", state(bad)))
    assert UnstableId in {type(p) for p in found}


@pytest.mark.parametrize("good", ["a", "_a", "a-b", "a.b", "b1.2", "A_1.x-y"])
def test_stable_state_ids_are_accepted(good: str) -> None:
    """Ids of letters, digits, '_' and '-' in dot-separated tokens are accepted."""
    assert Chart("c", state(good)).state_ids == (good,)


def test_site_id_must_be_a_single_token() -> None:
    """A site id with a dot is UnstableId: ``done.invoke.<site>`` would prefix-match another site."""
    error = only(lambda: Chart("c", state("a", invoke=[invoke("pay.ment", task="t")])), UnstableId)
    assert error.where == "site 'pay.ment' on state 'a'"
    assert "'payment'" in error.fix


@pytest.mark.parametrize("bad", ["", "has space", "1x"])
def test_chart_name_must_be_stable(bad: str) -> None:
    """A chart name must be a stable name."""
    error = only(lambda: Chart(bad, state("a")), UnstableId)
    assert error.where == "the chart name"


def test_transition_id_must_be_stable() -> None:
    """A transition id must be a stable name."""
    only(lambda: Chart("c", state("a", on=[transition("x", "a", id="no good")])), UnstableId)


# ---------------------------------------------------------------- structure


def test_final_with_children_is_reported() -> None:
    """A final state given child states raises FinalWithChildren."""
    bad_final = StateNode("f", StateKind.FINAL, children=(state("x"),))
    found = problems(lambda: Chart("c", state("a", on=[transition("go", "f")]), bad_final))
    assert FinalWithChildren in {type(p) for p in found}
    error = next(p for p in found if isinstance(p, FinalWithChildren))
    assert error.where == "state 'f'"
    assert "compound" in error.fix


def test_final_with_transitions_or_sites_is_invalid() -> None:
    """A final state may not carry transitions or child sites."""
    bad_final = StateNode("f", StateKind.FINAL, transitions=(transition("x", "a"),))
    found = problems(lambda: Chart("c", state("a", on=[transition("go", "f")]), bad_final))
    assert [type(p) for p in found] == [InvalidDefinition]


def test_history_at_top_level_is_outside_a_compound() -> None:
    """A history pseudo-state directly in the chart raises HistoryOutsideCompound."""
    error = only(lambda: Chart("c", state("a"), history("h", "a")), HistoryOutsideCompound)
    assert error.where == "history 'h'"
    assert "the chart" in error.problem


def test_history_inside_a_final_state_is_outside_a_compound() -> None:
    """A history whose parent is not compound or parallel raises HistoryOutsideCompound."""
    bad_final = StateNode("f", StateKind.FINAL, children=(history("h", "f"),))
    found = problems(lambda: Chart("c", state("a", on=[transition("go", "f")]), bad_final))
    assert HistoryOutsideCompound in {type(p) for p in found}


def test_mutable_context_is_invalid() -> None:
    """A context class that is not frozen is InvalidDefinition, pointing at ``@attrs.frozen``."""
    error = only(lambda: Chart("c", state("a"), context=Mutable), InvalidDefinition)
    assert error.where == "context"
    assert "Mutable" in error.problem and "mutable" in error.problem
    assert "@attrs.frozen" in error.fix


def test_non_attrs_context_is_invalid() -> None:
    """A context class that is not an attrs class is InvalidDefinition."""
    error = only(lambda: Chart("c", state("a"), context=Plain), InvalidDefinition)
    assert "@attrs.frozen" in error.fix


def test_frozen_context_is_accepted() -> None:
    """An ``@attrs.frozen`` context class is accepted."""
    assert Chart("c", state("a"), context=Frozen).context_type is Frozen


def test_site_needs_exactly_one_of_chart_and_task() -> None:
    """A site with both (or neither) of ``chart=`` and ``task=`` is InvalidDefinition."""
    both = only(lambda: Chart("c", state("a", invoke=[invoke("w", chart="x", task="t")])), InvalidDefinition)
    assert both.where == "site 'w' on state 'a'"
    assert "exactly one" in both.problem
    only(lambda: Chart("c", state("a", invoke=[invoke("w")])), InvalidDefinition)


@pytest.mark.parametrize(
    "policy", [RetryPolicy(max_attempts=0), RetryPolicy(backoff=-1), RetryPolicy(multiplier=0.5)]
)
def test_invalid_retry_policy_is_reported(policy: RetryPolicy) -> None:
    """A retry policy with no attempts, negative backoff or shrinking multiplier is InvalidDefinition."""
    error = only(
        lambda: Chart("c", state("a", invoke=[invoke("w", task="t", retry=policy)])), InvalidDefinition
    )
    assert "retry policy" in error.problem


def test_targets_in_one_region_cannot_be_entered_together() -> None:
    """A multi-target transition whose targets are not in distinct parallel regions is InvalidDefinition."""
    error = only(
        lambda: Chart("c", state("a", on=[transition("go", ["b", "c"])]), state("b"), state("c")),
        InvalidDefinition,
    )
    assert "'b'" in error.problem and "'c'" in error.problem
    assert "parallel" in error.fix


def test_multi_initial_outside_parallel_regions_is_invalid() -> None:
    """Several initial states of a compound must lie in distinct regions of a parallel state."""
    only(lambda: Chart("c", state("p", state("a"), state("b"), initial=["a", "b"])), InvalidDefinition)


def test_target_named_twice_is_invalid() -> None:
    """A multi-target transition naming one state twice is InvalidDefinition."""
    only(lambda: Chart("c", state("a", on=[transition("go", ["a", "a"])])), InvalidDefinition)


@pytest.mark.parametrize("descriptor", ["a..b", "a.", ".a", "a.*.b", "**", "*.a", "a*", "a.b*"])
def test_malformed_event_descriptor_is_invalid(descriptor: str) -> None:
    """Descriptors with empty tokens, or a ``*`` that is not the SCXML wildcard, are InvalidDefinition."""
    error = only(lambda: Chart("c", state("a", on=[transition(descriptor, "a")])), InvalidDefinition)
    assert repr(descriptor) in error.problem


@pytest.mark.parametrize(
    "descriptor", ["*", ".*", "error", "error.*", "order.paid", "order.paid.*", "a-1.b_2"]
)
def test_every_schema_event_descriptor_is_accepted(descriptor: str) -> None:
    """Every descriptor form the SCXML schema allows (``*``, ``.*``, tokens, a ``.*`` suffix) is accepted."""
    chart = Chart("c", state("a", on=[transition(descriptor, "b")]), state("b"))
    assert chart.kind_of("b") is StateKind.ATOMIC


def test_non_callable_guard_is_invalid() -> None:
    """A guard that is neither ``in_state`` nor callable is InvalidDefinition."""
    only(
        lambda: Chart("c", state("a", on=[transition("go", "a", guard=True)])),  # type: ignore[arg-type]
        InvalidDefinition,
    )


def test_non_callable_map_is_invalid() -> None:
    """A fan-out ``map`` that is not callable is InvalidDefinition."""
    only(
        lambda: Chart("c", state("a", invoke=[invoke("w", task="t", map={"k": 1})])),  # type: ignore[arg-type]
        InvalidDefinition,
    )


# ---------------------------------------------------------------- recursion bounds


@pytest.mark.parametrize(("group", "max_depth"), [("g", None), (None, 2)])
def test_half_declared_recursion_is_unbounded(group: str | None, max_depth: int | None) -> None:
    """A recursive site needs both ``group=`` and ``max_depth=``."""
    site = invoke("w", chart="c", group=group, max_depth=max_depth)
    error = only(lambda: Chart("c", state("a", invoke=[site])), UnboundedRecursion)
    assert "max_depth" in error.fix


def test_max_depth_below_one_is_unbounded_recursion() -> None:
    """``max_depth`` must be at least 1."""
    only(
        lambda: Chart("c", state("a", invoke=[invoke("w", chart="c", group="g", max_depth=0)])),
        UnboundedRecursion,
    )


def test_guard_functions_may_use_the_declared_context() -> None:
    """A guard typed for the chart's own context class is accepted at definition time."""

    def positive(context: Frozen, event: Event) -> bool:
        return context.n > 0

    chart = Chart("c", state("a", on=[transition("go", "a", guard=positive)]), context=Frozen)
    assert chart.name == "c"
