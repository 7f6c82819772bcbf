"""The registry: child charts and tasks resolve, recursion is bounded, names are unique."""

from __future__ import annotations

import pytest

from statechart import Chart, NoContext, Registry, invoke, state, transition
from statechart.errors import (
    AmbiguousId,
    ChartInvalid,
    UnboundedRecursion,
    UnknownChart,
    UnregisteredChart,
)


def parent(site_chart: str | None = None, site_task: str | None = None) -> Chart[NoContext]:
    return Chart("parent", state("a", invoke=[invoke("kid", chart=site_chart, task=site_task)]))


def leaf(name: str = "leaf") -> Chart[NoContext]:
    return Chart(name, state("only"))


def calls(
    name: str, target: str, *, group: str | None = None, max_depth: int | None = None
) -> Chart[NoContext]:
    """A chart ``name`` whose one site invokes chart ``target``."""
    return Chart(name, state("a", invoke=[invoke("sub", chart=target, group=group, max_depth=max_depth)]))


def test_registered_names_resolve() -> None:
    """A registry holds charts by name and declared task names."""
    registry = Registry([parent("leaf"), leaf()], tasks=["t2", "t1"])
    assert registry.names == ("parent", "leaf")
    assert registry.tasks == ("t1", "t2")
    assert "leaf" in registry
    assert "ghost" not in registry
    assert registry.chart("leaf").name == "leaf"
    assert registry.has_task("t1")
    assert [chart.name for chart in registry] == ["parent", "leaf"]
    registry.validate()
    assert registry.problems() == []


def test_looking_up_an_unknown_chart_is_a_lookup_error() -> None:
    """``Registry.chart`` of an unregistered name raises UnknownChart listing the known names."""
    registry = Registry([leaf()])
    with pytest.raises(UnknownChart) as caught:
        registry.chart("ghost")
    assert isinstance(caught.value, LookupError)
    assert caught.value.known == ("leaf",)
    assert "'ghost'" in str(caught.value)


def test_site_naming_an_unregistered_chart_is_reported() -> None:
    """A site whose child chart is not registered raises UnregisteredChart naming the site and state."""
    registry = Registry([parent("ghost")])
    with pytest.raises(ChartInvalid) as caught:
        registry.validate()
    (error,) = caught.value.exceptions
    assert isinstance(error, UnregisteredChart)
    assert error.chart == "parent"
    assert error.where == "site 'kid' on state 'a'"
    assert "'ghost'" in error.problem
    assert "register" in error.fix


def test_site_naming_an_undeclared_task_is_reported() -> None:
    """A site whose task is not declared raises UnregisteredChart."""
    registry = Registry([parent(site_task="crunch")], tasks=["other"])
    (error,) = registry.problems()
    assert isinstance(error, UnregisteredChart)
    assert "task 'crunch'" in error.problem
    registry.add_task("crunch")
    assert registry.problems() == []


def test_direct_recursion_needs_a_group_and_max_depth() -> None:
    """A chart invoking itself without a recursion bound raises UnboundedRecursion."""
    registry = Registry([calls("tree", "tree")])
    (error,) = registry.problems()
    assert isinstance(error, UnboundedRecursion)
    assert error.where == "site 'sub' on state 'a'"
    assert "max_depth" in error.fix
    bounded = Registry([calls("tree", "tree", group="tree", max_depth=4)])
    bounded.validate()


def test_mutual_recursion_needs_bounds_on_every_site_of_the_cycle() -> None:
    """Charts that invoke each other need a bound on each site on the cycle."""
    registry = Registry([calls("ping", "pong"), calls("pong", "ping")])
    found = registry.problems()
    assert [type(p) for p in found] == [UnboundedRecursion, UnboundedRecursion]
    assert {p.chart for p in found} == {"ping", "pong"}
    half = Registry([calls("ping", "pong", group="g", max_depth=3), calls("pong", "ping")])
    assert [p.chart for p in half.problems()] == ["pong"]
    both = Registry(
        [calls("ping", "pong", group="g", max_depth=3), calls("pong", "ping", group="g", max_depth=3)]
    )
    both.validate()


def test_chain_without_cycle_needs_no_bound() -> None:
    """A chart invoking another that does not lead back needs no recursion bound."""
    Registry([calls("top", "middle"), calls("middle", "bottom"), leaf("bottom")]).validate()


def test_cycle_elsewhere_does_not_flag_a_site_into_it() -> None:
    """A site entering a cycle from outside it is not itself recursive."""
    registry = Registry([calls("entry", "loop_a"), calls("loop_a", "loop_b"), calls("loop_b", "loop_a")])
    assert {p.chart for p in registry.problems()} == {"loop_a", "loop_b"}


def test_different_chart_with_a_taken_name_is_refused() -> None:
    """Registering a structurally different chart under a taken name raises AmbiguousId."""
    registry = Registry([leaf("shared")])
    other = Chart("shared", state("x", on=[transition("go", "y")]), state("y"))
    with pytest.raises(ChartInvalid) as caught:
        registry.add(other)
    (error,) = caught.value.exceptions
    assert isinstance(error, AmbiguousId)
    assert error.where == "the registry"
    assert registry.chart("shared").state_ids == ("only",)


def test_same_chart_may_be_registered_again() -> None:
    """Adding the same chart, or an identical rebuild of it, is accepted."""
    first = leaf("same")
    registry = Registry([first])
    registry.add(first)
    registry.add(leaf("same"))
    assert registry.names == ("same",)


def test_several_registry_problems_are_reported_together() -> None:
    """``validate`` lists every cross-chart problem in one ChartInvalid."""
    registry = Registry([parent("ghost"), calls("tree", "tree"), calls("x", "y")])
    with pytest.raises(ChartInvalid) as caught:
        registry.validate()
    assert sorted(type(p).__name__ for p in caught.value.exceptions) == [
        "UnboundedRecursion",
        "UnregisteredChart",
        "UnregisteredChart",
    ]
