"""Plans: a macrostep that runs no executable content is computed once per configuration, history and event.

Every test compares a chart that keeps plans with the same chart whose plans
are switched off (``chart.plans = None``), which always takes the ordinary
path: the snapshots and effects must be equal, call for call.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
from hypothesis import given, note
from hypothesis import strategies as st

from statechart import (
    Chart,
    Event,
    NoContext,
    always,
    assign,
    final,
    history,
    in_state,
    invoke,
    log,
    parallel,
    raise_event,
    start,
    state,
    step,
    transition,
)
from statechart.effects import Effect, Logged
from statechart.errors import ChartInvalid, RunawayMacrostep, UnreachableState
from statechart.event import InvokeId
from statechart.model import Action, InState, StateKind, StateNode, Transition
from statechart.snapshot import Snapshot, Status
from tests.strategies import Counter, GuardFunction, below_three, increment, is_even, rebuild

NAMES = ("a", "b", "c", "a.x", "z")
"""The events a script sends: ``a.x`` matches ``a`` by prefix, ``z`` matches nothing but ``*``."""

CONTENT: list[tuple[Action, ...]] = [()] * 7
"""Mostly no executable content."""

Outcome = tuple[Snapshot[Counter], tuple[Effect, ...]] | tuple[str, tuple[str, ...]]


def ordinary(chart: Chart[Counter]) -> Chart[Counter]:
    """A fresh copy of ``chart`` that keeps no plans."""
    copy = rebuild(chart)
    copy.plans = None
    return copy


def drive(chart: Chart[Counter], names: Sequence[str], count: int = 0) -> list[Outcome]:
    """Start ``chart`` counting from ``count`` and step each event; a runaway macrostep ends the list."""
    outcomes: list[Outcome] = []
    try:
        snapshot, effects = start(chart, Counter(count))
        outcomes.append((snapshot, effects))
        for name in names:
            if snapshot.status is not Status.RUNNING:
                break
            snapshot, effects = step(chart, snapshot, Event(name), now=len(outcomes) / 4)
            outcomes.append((snapshot, effects))
    except RunawayMacrostep as error:
        outcomes.append((error.event, error.configuration))
    return outcomes


# ------------------------------------------------------------- random charts


@attrs.define
class _Draft:
    """A state of the tree being drawn, built into a state once every id is known."""

    id: str
    kind: StateKind
    children: list[_Draft] = attrs.Factory(list)
    history: bool | None = None
    """Whether the state holds a history state, ``f"{id}h"``: None for none, else whether it is deep."""

    def walk(self) -> list[_Draft]:
        return [self, *(n for child in self.children for n in child.walk())]


def _draft(draw: st.DrawFn, count: list[int], depth: int, first: bool) -> _Draft:
    """A state and its descendants; a compound's first child and a region are never final."""
    kinds = [StateKind.ATOMIC, StateKind.ATOMIC] + ([] if first else [StateKind.FINAL])
    if depth < 3 and count[0] < 14:
        kinds += [StateKind.COMPOUND, StateKind.COMPOUND, StateKind.PARALLEL]
    count[0] += 1
    node = _Draft(f"s{count[0]}", draw(st.sampled_from(kinds)))
    if node.kind in (StateKind.COMPOUND, StateKind.PARALLEL):
        regions = node.kind is StateKind.PARALLEL
        for n in range(draw(st.integers(2 if regions else 1, 3))):
            node.children.append(_draft(draw, count, depth + 1, first=n == 0 or regions))
        node.history = draw(st.sampled_from([None, False, True]))
    return node


def _transition(draw: st.DrawFn, states: Sequence[str], targets: Sequence[str]) -> Transition[Counter]:
    """Mostly plain: no guard, no actions; now and then a guard, an action or an eventless one."""
    target = draw(st.one_of(st.none(), st.sampled_from(targets)))
    if draw(st.integers(0, 5)) == 0:
        # guarded on the counter and counting up, so that it settles
        return always(target, guard=below_three, actions=[assign(increment)])
    guards: list[GuardFunction | InState | None] = [None] * 6
    guards += [is_even, in_state(draw(st.sampled_from(states)))]
    guard = draw(st.sampled_from(guards))
    actions = draw(st.sampled_from(CONTENT[:6] + [(assign(increment),), (raise_event("b"),), (log("t"),)]))
    events = draw(st.sampled_from(("a", "b", "c", "a b", "*")))
    return transition(events, target, guard=guard, actions=actions, internal=draw(st.booleans()))


def _build(
    draw: st.DrawFn, node: _Draft, states: Sequence[str], targets: Sequence[str]
) -> StateNode[Counter]:
    if node.kind is StateKind.FINAL:
        return final(node.id)
    on = [_transition(draw, states, targets) for _ in range(draw(st.integers(0, 2)))]
    content = st.sampled_from(CONTENT + [(log(f"in {node.id}"),), (assign(increment),)])
    entry, exit = draw(content), draw(content)
    inner = [_build(draw, child, states, targets) for child in node.children]
    if node.history is not None:
        below = [n.id for child in node.children for n in child.walk()]
        marker = history(f"{node.id}h", draw(st.sampled_from(below)), deep=node.history)
        inner.insert(draw(st.integers(0, len(inner))), marker)
    if node.kind is StateKind.PARALLEL:
        return parallel(node.id, *inner, on=on, entry=entry, exit=exit)
    return state(node.id, *inner, on=on, entry=entry, exit=exit)


@st.composite
def charts(draw: st.DrawFn) -> Chart[Counter]:
    """A random chart without sites whose transitions are mostly plain (no guard, no actions)."""
    count = [0]
    roots = [_draft(draw, count, 1, first=n == 0) for n in range(draw(st.integers(1, 3)))]
    nodes = [n for root in roots for n in root.walk()]
    states = [n.id for n in nodes]
    targets = states + [f"{n.id}h" for n in nodes if n.history is not None]
    built = [_build(draw, root, states, targets) for root in roots]
    waived: list[str] = []
    for _ in range(2):
        try:
            return Chart("planned", *built, context=Counter, max_microsteps=30, allow_unreachable=waived)
        except ChartInvalid as group:
            unreachable = [e for e in group.exceptions if isinstance(e, UnreachableState)]
            assert not waived and len(unreachable) == len(group.exceptions), group.exceptions
            waived = [e.where.split("'")[1] for e in unreachable]
    raise AssertionError("unreachable")  # pragma: no cover


RUNS = st.lists(
    st.tuples(st.integers(0, 3), st.lists(st.sampled_from(NAMES), max_size=30)), min_size=1, max_size=3
)
"""Runs of one chart: the counter each starts with and the events it sends."""


@given(charts(), RUNS)
def test_plans_give_the_outcomes_of_the_ordinary_path(
    chart: Chart[Counter], runs: list[tuple[int, list[str]]]
) -> None:
    """Stepping with plans learnt in this run or earlier ones (other contexts) gives the ordinary outcomes."""
    plain = ordinary(chart)
    for count, names in runs + runs:
        note(f"run from count {count}: {names}")
        assert drive(chart, names, count) == drive(plain, names, count)


# --------------------------------------------------------------- named cases


def ring() -> Chart[NoContext]:
    """Three states in a ring on ``next``."""
    return Chart(
        "ring",
        state("s0", on=[transition("next", "s1")]),
        state("s1", on=[transition("next", "s2")]),
        state("s2", on=[transition("next", "s0")]),
    )


def test_a_plain_macrostep_is_planned_once_and_reused() -> None:
    """Each configuration of a plain ring gets one plan, and the planned steps equal the ordinary ones."""
    chart, plain = ring(), ring()
    plain.plans = None
    snapshot, _ = start(chart)
    expected, _ = start(plain)
    for n in range(7):
        snapshot, effects = step(chart, snapshot, Event("next"), now=float(n))
        expected, _ = step(plain, expected, Event("next"), now=float(n))
        assert (snapshot, effects) == (expected, ())
    assert chart.plans is not None
    planned = {key[0]: plan.configuration for key, plan in chart.plans.items() if plan is not None}
    assert planned == {("s0",): ("s1",), ("s1",): ("s2",), ("s2",): ("s0",)}
    assert (snapshot.steps, snapshot.time, snapshot.configuration) == (8, 6.0, ("s1",))


def device() -> Chart[NoContext]:
    """``on`` holds a deep history around two regions; ``power`` leaves it and returns through it."""
    return Chart(
        "device",
        state(
            "on",
            history("memory", "running", deep=True),
            parallel(
                "running",
                state("left", state("l1", on=[transition("tick", "l2")]), state("l2")),
                state("right", state("r1", on=[transition("tock", "r2")]), state("r2")),
            ),
            on=[transition("power", "off")],
        ),
        state("off", on=[transition("power", "memory")]),
    )


def test_a_plan_that_records_or_restores_history_depends_on_the_history() -> None:
    """Leaving through a history-recording exit and returning through the history are planned per history."""
    chart, plain = device(), device()
    plain.plans = None
    for names in (["power", "power", "tick"], ["tick", "power", "power", "tock", "power", "power"]):
        snapshot, _ = start(chart)
        expected, _ = start(plain)
        for name in names:
            snapshot, effects = step(chart, snapshot, Event(name))
            expected, _ = step(plain, expected, Event(name))
            assert (snapshot, effects) == (expected, ())
    assert snapshot.configuration == ("on", "running", "left", "l2", "right", "r2")
    assert chart.plans is not None
    restored = [
        plan.configuration
        for (configuration, _, name), plan in chart.plans.items()
        if configuration == ("off",) and plan is not None
    ]
    assert sorted(restored) == [
        ("on", "running", "left", "l1", "right", "r1"),
        ("on", "running", "left", "l2", "right", "r1"),
        ("on", "running", "left", "l2", "right", "r2"),
    ]


def test_a_guard_on_the_context_keeps_its_macrostep_unplanned() -> None:
    """A transition whose guard reads the context is never planned: each context takes its own branch."""
    chart = Chart(
        "guarded",
        state("s0", on=[transition("go", "even", guard=is_even), transition("go", "odd")]),
        state("even"),
        state("odd"),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter())
    for count, reached in ((0, "even"), (1, "odd"), (2, "even"), (3, "odd")):
        after, _ = step(chart, attrs.evolve(snapshot, context=Counter(count)), Event("go"))
        assert after.configuration == (reached,)
    assert chart.plans == {(("s0",), (), "go"): None}


def test_entry_and_exit_actions_keep_their_macrostep_unplanned() -> None:
    """A macrostep that runs an entry or an exit action runs it every time, never from a plan."""
    chart = Chart(
        "traced",
        state("s0", on=[transition("next", "s1")], exit=[log("exit s0")]),
        state("s1", on=[transition("next", "s2")]),
        state("s2", on=[transition("next", "s0")], entry=[log("enter s2")]),
    )
    snapshot, _ = start(chart)
    for _ in range(3):
        for logged in (["exit s0"], ["enter s2"], []):
            snapshot, effects = step(chart, snapshot, Event("next"))
            assert [e.label for e in effects if isinstance(e, Logged)] == logged
    assert chart.plans is not None
    assert chart.plans[(("s0",), (), "next")] is None
    assert chart.plans[(("s1",), (), "next")] is None
    assert chart.plans[(("s2",), (), "next")] is not None  # s0's exit action runs only on leaving it


def test_the_content_of_a_history_default_or_an_initial_transition_runs_on_every_entry() -> None:
    """Entering by a history default or an ``<initial>`` with content runs that content every time."""
    chart = Chart(
        "defaults",
        state("idle", on=[transition("resume", "h"), transition("begin", "job")]),
        state(
            "work",
            history("h", "w2", actions=[log("default")]),
            state("w1", on=[transition("next", "w2")]),
            state("w2", on=[transition("next", "w1")]),
        ),
        state("job", state("j1"), initial_actions=[log("initial")]),
    )
    for _ in range(2):
        snapshot, _ = start(chart)
        assert step(chart, snapshot, Event("resume"))[1] == (Logged("default", None),)
        assert step(chart, snapshot, Event("begin"))[1] == (Logged("initial", None),)
    assert chart.plans == {(("idle",), (), "resume"): None, (("idle",), (), "begin"): None}


def test_the_actions_of_a_transition_run_on_every_macrostep() -> None:
    """A transition with actions is never planned: its assignment counts every time it is taken."""
    chart = Chart(
        "counting",
        state("s0", on=[transition("next", "s1", actions=[assign(increment)])]),
        state("s1", on=[transition("next", "s0")]),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter())
    for _ in range(6):
        snapshot, _ = step(chart, snapshot, Event("next"))
    assert (snapshot.configuration, snapshot.context.count) == (("s0",), 3)
    assert chart.plans is not None
    assert chart.plans[(("s0",), (), "next")] is None


def test_an_eventless_transition_in_the_reached_configuration_keeps_the_macrostep_unplanned() -> None:
    """The eventless transition waiting where a macrostep arrives is tried every time, on that context."""
    chart = Chart(
        "waiting",
        state("s0", on=[transition("go", "s1")]),
        state("s1", on=[always("s2", guard=is_even)]),
        state("s2"),
        context=Counter,
    )
    odd, _ = start(chart, Counter(1))
    assert step(chart, odd, Event("go"))[0].configuration == ("s1",)
    even, _ = start(chart, Counter(2))
    assert step(chart, even, Event("go"))[0].configuration == ("s2",)
    assert chart.plans == {(("s0",), (), "go"): None}


def test_a_queued_event_or_a_child_outcome_takes_the_ordinary_path() -> None:
    """A snapshot with a queued internal event, or an event from a child, is never answered by a plan."""
    chart, plain = ring(), ring()
    plain.plans = None
    snapshot, _ = start(chart)
    step(chart, snapshot, Event("next"))  # learns the plan of s0 on next
    queued = attrs.evolve(snapshot, internal_queue=(Event("next"),))
    assert step(chart, queued, Event("next")) == step(plain, queued, Event("next"))
    assert step(chart, queued, Event("next"))[0].configuration == ("s2",)
    child = attrs.evolve(Event("next"), invoke_id=InvokeId("w", "", 1))
    assert step(chart, snapshot, child) == step(plain, snapshot, child)


def test_a_chart_with_sites_keeps_no_plans() -> None:
    """Every macrostep of a chart with child sites also reconciles its slots, so none is planned."""
    chart = Chart(
        "parent",
        state("idle", on=[transition("go", "busy")]),
        state("busy", invoke=[invoke("work", task="job")], on=[transition("go", "idle")]),
    )
    assert chart.plans is None
