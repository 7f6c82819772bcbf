"""Transitions: event matching, guards, targets, conflicts and action order (SCXML 3.5, 3.12, 3.13)."""

from __future__ import annotations

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    NoContext,
    always,
    assign,
    in_state,
    log,
    parallel,
    raise_event,
    start,
    state,
    step,
    transition,
)
from statechart.effects import ActionFailed, Ignored
from statechart.errors import InvalidEvent
from statechart.event import EventKind
from statechart.snapshot import Snapshot
from tests.unit.statechart.support import labels, of_type, traced, traced_parallel


@attrs.frozen
class Gate:
    """A context with a flag for guards and a counter for eventless loops."""

    open: bool = False
    count: int = 0


def is_open(gate: Gate, event: Event) -> bool:
    return gate.open


def opened(gate: Gate, event: Event) -> Gate:
    return attrs.evolve(gate, open=True)


def counted(gate: Gate, event: Event) -> Gate:
    return attrs.evolve(gate, count=gate.count + 1)


def below_three(gate: Gate, event: Event) -> bool:
    return gate.count < 3


def broken_guard(gate: Gate, event: Event) -> bool:
    raise ZeroDivisionError("guard blew up")


def matcher(descriptor: str) -> Chart[NoContext]:
    """A chart that moves from ``idle`` to ``hit`` on events matching ``descriptor``."""
    return Chart(
        "match",
        state("idle", on=[transition(descriptor, "hit")]),
        state("hit"),
    )


def lands(chart: Chart[NoContext], name: str) -> bool:
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event(name))
    return snapshot.active("hit")


# ------------------------------------------------------------------ matching


def test_descriptor_matches_the_equal_name() -> None:
    """An event descriptor matches an event of exactly that name."""
    assert lands(matcher("order.paid"), "order.paid")


def test_descriptor_matches_names_it_token_prefixes() -> None:
    """``foo`` matches ``foo.bar`` and ``foo.bar.baz`` (SCXML 3.12.1)."""
    chart = matcher("foo")
    assert lands(chart, "foo.bar")
    assert lands(chart, "foo.bar.baz")


def test_descriptor_does_not_match_a_longer_token() -> None:
    """``foo`` does not match ``foobar`` nor ``fo``: matching is by whole tokens."""
    chart = matcher("foo")
    assert not lands(chart, "foobar")
    assert not lands(chart, "fo")
    assert not lands(chart, "bar.foo")


def test_dot_star_suffix_is_the_same_prefix() -> None:
    """``foo.*`` matches ``foo`` and ``foo.bar`` but not ``foobar``."""
    chart = matcher("foo.*")
    assert lands(chart, "foo")
    assert lands(chart, "foo.bar")
    assert not lands(chart, "foobar")


def test_star_matches_every_event() -> None:
    """The descriptor ``*`` matches any event name."""
    chart = matcher("*")
    assert lands(chart, "anything")
    assert lands(chart, "x.y.z")


def test_bare_dot_star_matches_every_event() -> None:
    """The descriptor ``.*`` (allowed by the SCXML schema) matches any event name, like ``*``."""
    chart = matcher(".*")
    assert lands(chart, "anything")
    assert lands(chart, "x.y.z")
    assert lands(chart, "error.execution")


def test_error_dot_star_matches_error_and_its_descendants() -> None:
    """``error.*`` matches ``error`` and ``error.execution`` but neither ``errors`` nor ``my.error``."""
    chart = matcher("error.*")
    assert lands(chart, "error")
    assert lands(chart, "error.execution")
    assert lands(chart, "error.communication.x")
    assert not lands(chart, "errors")
    assert not lands(chart, "my.error")


def test_every_schema_descriptor_form_in_one_transition() -> None:
    """A list mixing plain, ``.*``-suffixed and wildcard descriptors is accepted and matches as SCXML says."""
    chart = matcher("order.paid refund.* .*")
    assert lands(chart, "order.paid")
    assert lands(chart, "refund")
    assert lands(chart, "unrelated")


def test_several_descriptors_in_one_string_or_list() -> None:
    """A space-separated string or a list of descriptors matches any one of them."""
    for chart in (matcher("a b.c"), matcher("a  b.c")):
        assert lands(chart, "a")
        assert lands(chart, "b.c.d")
        assert not lands(chart, "b")
    listed = Chart("listed", state("idle", on=[transition(["a", "b c"], "hit")]), state("hit"))
    assert [lands(listed, name) for name in ("a", "b", "c", "d")] == [True, True, True, False]


def test_transition_requires_an_event_descriptor() -> None:
    """``transition('')`` is refused: an eventless transition is written with ``always()``."""
    with pytest.raises(ValueError, match="always"):
        transition("", "x")
    with pytest.raises(ValueError, match="always"):
        transition([], "x")


def test_unmatched_event_changes_only_the_step_count() -> None:
    """An event no transition matches leaves configuration and context alone; its only effect reports it."""
    chart = matcher("go")
    snapshot, _ = start(chart)
    after, effects = step(chart, snapshot, Event("other"))
    assert effects == (Ignored("other"),)
    assert after.configuration == snapshot.configuration
    assert after.steps == snapshot.steps + 1


# -------------------------------------------------------------------- guards


def test_guard_false_falls_through_to_next_transition_in_document_order() -> None:
    """When the first matching transition's guard is false, the next one in document order is taken."""
    chart = Chart(
        "guards",
        state("idle", on=[transition("go", "open", guard=is_open), transition("go", "shut")]),
        state("open"),
        state("shut"),
        context=Gate,
    )
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("go"))[0].configuration == ("shut",)
    snapshot, _ = start(chart, Gate(open=True))
    assert step(chart, snapshot, Event("go"))[0].configuration == ("open",)


def test_guard_sees_the_event() -> None:
    """A guard receives the event being processed, with its data."""

    def wants_yes(context: NoContext, event: Event) -> bool:
        return event.data == "yes"

    chart = Chart("sees", state("idle", on=[transition("ask", "hit", guard=wants_yes)]), state("hit"))
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("ask", "no"))[0].configuration == ("idle",)
    assert step(chart, snapshot, Event("ask", "yes"))[0].configuration == ("hit",)


def test_in_state_guard_tests_the_configuration() -> None:
    """``in_state`` holds only while the named state is active (SCXML ``In()``)."""
    chart = Chart(
        "instate",
        parallel(
            "p",
            state("light", state("off", on=[transition("flip", "on")]), state("on")),
            state("door", state("closed", on=[transition("open", "opened", guard=in_state("on"))])),
            state("opened_region", state("opened")),
        ),
    )
    snapshot, _ = start(chart)
    refused, _ = step(chart, snapshot, Event("open"))
    assert refused.active("closed")
    snapshot, _ = step(chart, snapshot, Event("flip"))
    snapshot, _ = step(chart, snapshot, Event("open"))
    assert snapshot.active("opened")


def test_raising_guard_is_false_and_raises_error_execution() -> None:
    """A raising guard counts as false, yields ActionFailed and queues ``error.execution`` (SCXML 5.9)."""
    chart = Chart(
        "bad_guard",
        state(
            "idle",
            on=[
                transition("go", "never", guard=broken_guard, id="risky"),
                transition("error.execution", "broken"),
            ],
        ),
        state("never"),
        state("broken"),
        context=Gate,
        allow_unreachable=["never"],
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("broken",)
    (failure,) = of_type(effects, ActionFailed)
    assert failure == ActionFailed("idle", "guard of risky", "ZeroDivisionError", "guard blew up", "risky")


def test_raising_guard_lets_a_later_transition_be_taken() -> None:
    """After a guard raises, selection goes on with the next transition in document order."""
    chart = Chart(
        "bad_then_good",
        state("idle", on=[transition("go", "never", guard=broken_guard), transition("go", "good")]),
        state("never"),
        state("good", on=[transition("error.execution", "seen")]),
        state("seen"),
        context=Gate,
        allow_unreachable=["never"],
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    # the error event is processed after the transition, from the new state
    assert snapshot.configuration == ("seen",)


def test_error_execution_event_carries_details() -> None:
    """The ``error.execution`` platform event names the state, the transition, the action and the error."""
    seen: list[Event] = []

    def record(context: Gate, event: Event) -> None:
        seen.append(event)

    chart = Chart(
        "details",
        state(
            "idle",
            on=[
                transition("go", "idle", guard=broken_guard, id="risky"),
                transition("error", actions=[assign(record)]),
            ],
        ),
        context=Gate,
    )
    snapshot, _ = start(chart)
    step(chart, snapshot, Event("go"))
    assert seen == [
        Event(
            "error.execution",
            {
                "state": "idle",
                "transition": "risky",
                "action": "guard of risky",
                "error": "ZeroDivisionError",
                "message": "guard blew up",
            },
            EventKind.PLATFORM,
        )
    ]


# ------------------------------------------------------------------- targets


def test_targetless_transition_runs_actions_without_exit_or_entry() -> None:
    """A targetless transition runs its actions and neither exits nor enters any state."""
    chart = Chart(
        "targetless",
        traced("outer", traced("inner", on=[transition("poke", actions=[log("poked")])])),
    )
    snapshot, _ = start(chart)
    after, effects = step(chart, snapshot, Event("poke"))
    assert labels(effects) == ["poked"]
    assert after.configuration == snapshot.configuration


def test_external_self_transition_exits_and_reenters() -> None:
    """A transition from a state to itself exits and re-enters it."""
    chart = Chart("self", traced("a", on=[transition("again", "a", actions=[log("t")])]))
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("again"))
    assert labels(effects) == ["exit:a", "t", "enter:a"]


def test_external_transition_to_child_exits_the_source() -> None:
    """An external transition from a compound state to its child exits and re-enters the source."""
    chart = Chart(
        "external",
        traced("p", traced("c1"), traced("c2"), on=[transition("go", "c2")]),
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == ["exit:c1", "exit:p", "enter:p", "enter:c2"]
    assert snapshot.configuration == ("p", "c2")


def test_internal_transition_to_child_keeps_the_source() -> None:
    """An internal transition from a compound state to a descendant keeps the source (SCXML 3.13)."""
    chart = Chart(
        "internal",
        traced("p", traced("c1"), traced("c2"), on=[transition("go", "c2", internal=True)]),
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == ["exit:c1", "enter:c2"]
    assert snapshot.configuration == ("p", "c2")


def test_internal_transition_to_non_descendant_behaves_externally() -> None:
    """``internal=True`` has no effect when a target lies outside the source."""
    chart = Chart(
        "internal_out",
        traced("p", traced("c1"), on=[transition("go", "q", internal=True)]),
        traced("q"),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == ["exit:c1", "exit:p", "enter:q"]


def test_internal_transition_from_parallel_source_is_external() -> None:
    """A parallel source is exited even by an internal transition: only compound sources stay (SCXML 3.13)."""
    chart = Chart(
        "internal_par",
        traced_parallel(
            "p",
            traced("r1", traced("a1"), traced("a2")),
            traced("r2", traced("b1")),
            on=[transition("go", "a2", internal=True)],
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("go"))
    assert labels(effects)[:5] == ["exit:b1", "exit:r2", "exit:a1", "exit:r1", "exit:p"]
    assert labels(effects)[5:] == ["enter:p", "enter:r1", "enter:a2", "enter:r2", "enter:b1"]


def test_multiple_targets_enter_several_regions() -> None:
    """A transition with several targets in distinct regions enters all of them."""
    chart = Chart(
        "multi",
        state("start", on=[transition("go", ["a2", "b2"])]),
        parallel("p", state("r1", state("a1"), state("a2")), state("r2", state("b1"), state("b2"))),
        allow_unreachable=["a1", "b1"],
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert chart.atomic(snapshot.configuration) == ("a2", "b2")


def test_transition_into_a_deep_state_enters_intermediate_ancestors() -> None:
    """Targeting a nested state enters its ancestors outermost first, without their default children."""
    chart = Chart(
        "deep_target",
        traced("a", on=[transition("go", "x2")]),
        traced("x", traced("x1"), traced("x2")),
        allow_unreachable=["x1"],
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == ["exit:a", "enter:x", "enter:x2"]


# -------------------------------------------------------------------- always


def test_eventless_transition_is_taken_on_start() -> None:
    """An ``always()`` transition is taken as soon as its source is active, within the same macrostep."""
    chart = Chart("eventless", state("a", on=[always("b")]), state("b", on=[always("c")]), state("c"))
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("c",)


def test_guarded_eventless_transition_waits_for_its_guard() -> None:
    """A guarded eventless transition fires in the first macrostep after its guard becomes true."""
    chart = Chart(
        "waits",
        state("a", on=[always("b", guard=is_open), transition("open", actions=[assign(opened)])]),
        state("b"),
        context=Gate,
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("a",)
    snapshot, _ = step(chart, snapshot, Event("open"))
    assert snapshot.configuration == ("b",)


def test_targetless_eventless_loop_runs_while_its_guard_holds() -> None:
    """A targetless eventless transition repeats within one macrostep until its guard fails."""
    chart = Chart(
        "loop",
        state("a", on=[always(guard=below_three, actions=[assign(counted)])]),
        context=Gate,
    )
    snapshot, _ = start(chart)
    assert snapshot.context.count == 3


def test_eventless_transitions_run_before_internal_events() -> None:
    """After a microstep, eventless transitions are taken before the internal queue is read."""
    chart = Chart(
        "priority",
        state("a", on=[transition("go", "b", actions=[raise_event("ping")])]),
        state("b", on=[always("c"), transition("ping", "wrong")]),
        state("c", on=[transition("ping", "right")]),
        state("wrong"),
        state("right"),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("right",)


# ------------------------------------------------------------------ conflicts


def test_first_matching_transition_in_document_order_wins() -> None:
    """Of two enabled transitions on the same state, the first in document order is taken."""
    chart = Chart(
        "doc_order",
        state("a", on=[transition("go", "first"), transition("go", "second")]),
        state("first"),
        state("second"),
        allow_unreachable=["second"],
    )
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("go"))[0].configuration == ("first",)


def test_child_transition_preempts_ancestor_transition() -> None:
    """A transition on a descendant is selected before one on its ancestor for the same event."""
    chart = Chart(
        "child_first",
        state("p", state("c", on=[transition("go", "child_won")]), on=[transition("go", "parent_won")]),
        state("child_won"),
        state("parent_won"),
        allow_unreachable=["parent_won"],
    )
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("go"))[0].configuration == ("child_won",)


def test_ancestor_transition_taken_when_child_has_none() -> None:
    """When the atomic state has no matching transition, its nearest ancestor's is taken."""
    chart = Chart(
        "ancestor",
        state("p", state("c"), on=[transition("go", "done")]),
        state("done"),
    )
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("go"))[0].configuration == ("done",)


def test_parallel_regions_take_non_conflicting_transitions_together() -> None:
    """Transitions in different regions whose exit sets are disjoint are all taken in one microstep."""
    chart = Chart(
        "both",
        parallel(
            "p",
            state("r1", state("a1", on=[transition("e", "a2")]), state("a2")),
            state("r2", state("b1", on=[transition("e", "b2")]), state("b2")),
        ),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("e"))
    assert chart.atomic(snapshot.configuration) == ("a2", "b2")


def test_conflicting_region_transitions_resolve_in_document_order() -> None:
    """When two regions' transitions both leave the parallel state, the earlier region's wins."""
    chart = Chart(
        "conflict",
        parallel(
            "p",
            state("r1", state("a1", on=[transition("e", "out1")])),
            state("r2", state("b1", on=[transition("e", "out2")])),
        ),
        state("out1"),
        state("out2"),
        allow_unreachable=["out2"],
    )
    snapshot, _ = start(chart)
    assert step(chart, snapshot, Event("e"))[0].configuration == ("out1",)


def test_descendant_transition_preempts_conflicting_ancestor_transition() -> None:
    """A region's own transition preempts a conflicting one on the parallel ancestor (SCXML D.2)."""
    chart = Chart(
        "preempt",
        parallel(
            "p",
            state("r1", state("a1")),
            state("r2", state("b1", on=[transition("e", "b2")]), state("b2")),
            on=[transition("e", "out")],
        ),
        state("out"),
        allow_unreachable=["out"],
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("e"))
    # a1 selects p's transition, b1 its own; b1's is the descendant and wins
    assert chart.atomic(snapshot.configuration) == ("a1", "b2")


def test_targetless_transitions_never_conflict() -> None:
    """Targetless transitions in several regions all run, in document order of their states."""
    chart = Chart(
        "targetless_par",
        parallel(
            "p",
            state("r1", on=[transition("e", actions=[log("r1")])]),
            state("r2", on=[transition("e", actions=[log("r2")])]),
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("e"))
    assert labels(effects) == ["r1", "r2"]


# ---------------------------------------------------------------- action order


def test_exit_then_transition_then_entry_actions() -> None:
    """A microstep runs exits innermost first, then transition actions, then entries outermost first."""
    chart = Chart(
        "order",
        traced(
            "root",
            traced("a", traced("a1", on=[transition("go", "b1", actions=[log("t1"), log("t2")])])),
            traced("b", traced("b1")),
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == ["exit:a1", "exit:a", "t1", "t2", "enter:b", "enter:b1"]


def test_exit_order_in_parallel_is_reverse_document_order() -> None:
    """Leaving a parallel state exits later regions first, each from the inside out."""
    chart = Chart(
        "par_exit",
        traced_parallel(
            "p",
            traced("r1", traced("a")),
            traced("r2", traced("b")),
            on=[transition("out", "z")],
        ),
        traced("z"),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("out"))
    assert labels(effects) == ["exit:b", "exit:r2", "exit:a", "exit:r1", "exit:p", "enter:z"]


def test_transition_actions_see_the_triggering_event() -> None:
    """Actions of a transition receive the event that triggered it."""

    def keep(context: Gate, event: Event) -> Gate:
        return attrs.evolve(context, count=int(str(event.data)))

    chart = Chart("sees_event", state("a", on=[transition("set", actions=[assign(keep)])]), context=Gate)
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("set", "42"))
    assert snapshot.context.count == 42


def test_step_does_not_mutate_the_input_snapshot() -> None:
    """``step`` returns a new snapshot and leaves the one it was given unchanged."""
    chart = Chart("pure", state("a", on=[transition("go", "b")]), state("b"))
    snapshot, _ = start(chart)
    frozen: Snapshot[NoContext] = attrs.evolve(snapshot)
    after, _ = step(chart, snapshot, Event("go"))
    assert snapshot == frozen
    assert after.configuration == ("b",)


def test_step_refuses_a_snapshot_of_another_chart() -> None:
    """Stepping a snapshot with a chart of another name raises InvalidEvent."""
    first = Chart("first", state("a", on=[transition("go", "a")]))
    second = Chart("second", state("a", on=[transition("go", "a")]))
    snapshot, _ = start(first)
    with pytest.raises(InvalidEvent, match="'first'"):
        step(second, snapshot, Event("go"))


def test_step_refuses_what_is_not_a_named_event() -> None:
    """A non-Event or an event without a name raises InvalidEvent."""
    chart = matcher("go")
    snapshot, _ = start(chart)
    with pytest.raises(InvalidEvent):
        step(chart, snapshot, "go")  # type: ignore[arg-type]
    with pytest.raises(InvalidEvent):
        step(chart, snapshot, Event(""))
