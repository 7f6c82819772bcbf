"""Executable content beyond single actions: ``if``, ``foreach``, computed sends, targets, initial content.

Each test names the section of SCXML 1.0 it follows.
"""

from __future__ import annotations

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    assign,
    block,
    cancel,
    current,
    final,
    foreach,
    if_,
    in_state,
    invoke,
    log,
    raise_event,
    send,
    start,
    state,
    step,
    transition,
)
from statechart import fire as fire_timer
from statechart.effects import ActionFailed, ArmTimer, SendToChild, SendToParent
from statechart.errors import ChartInvalid, InvalidDefinition
from statechart.event import EventKind, child_message_event
from statechart.model import Assign


@attrs.frozen
class Ctx:
    n: int = 0
    trail: tuple[str, ...] = ()
    item: object = None
    index: int = -1
    items: tuple[int, ...] = (1, 2, 3)
    sid: str = ""


def mark(label: str) -> Assign[Ctx]:
    return assign(lambda c, e: attrs.evolve(c, trail=(*c.trail, label)), name=f"mark {label}")


def boom(c: Ctx, e: Event) -> Ctx:
    raise RuntimeError("boom")


def errors_seen(c: Ctx, e: Event) -> Ctx:
    assert isinstance(e.data, dict)
    return attrs.evolve(c, trail=(*c.trail, f"error:{e.data['action']}"))


# ------------------------------------------------------------------ 4.3 <if>


def test_if_runs_the_first_branch_whose_condition_holds() -> None:
    """SCXML 4.3: conditions are tried in document order; only the first true branch runs."""
    chart = Chart(
        "if",
        state(
            "a",
            entry=[
                if_(
                    lambda c, e: c.n > 5,
                    [mark("big")],
                    elif_=[(lambda c, e: c.n > 0, [mark("small")]), (lambda c, e: True, [mark("also")])],
                    else_=[mark("none")],
                )
            ],
        ),
        context=Ctx,
    )
    assert start(chart, Ctx(n=9))[0].context.trail == ("big",)
    assert start(chart, Ctx(n=1))[0].context.trail == ("small",)
    assert start(chart, Ctx(n=0))[0].context.trail == ("also",)


def test_if_with_no_true_branch_and_no_else_does_nothing() -> None:
    """SCXML 4.3: with no true condition and no ``else``, no content runs."""
    chart = Chart("if", state("a", entry=[if_(lambda c, e: False, [mark("x")]), mark("after")]), context=Ctx)
    assert start(chart, Ctx())[0].context.trail == ("after",)


def test_if_branches_nest_and_hold_every_kind_of_action() -> None:
    """SCXML 4.3: a branch holds any executable content, including another ``if``."""
    chart = Chart(
        "nested",
        state(
            "a",
            on=[
                transition(
                    "go",
                    actions=[
                        if_(
                            lambda c, e: True,
                            [
                                raise_event("inner"),
                                log("seen", lambda c, e: c.n),
                                if_(lambda c, e: c.n == 0, [mark("deep")], else_=[mark("shallow")]),
                                send("later", delay=5, id="s1"),
                                cancel("s1"),
                            ],
                        )
                    ],
                ),
                transition("inner", actions=[mark("inner")]),
            ],
        ),
        context=Ctx,
    )
    snapshot, _ = start(chart, Ctx())
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.context.trail == ("deep", "inner")
    assert snapshot.timers == ()
    assert [type(e).__name__ for e in effects] == ["Logged", "ArmTimer", "CancelTimer"]


def test_a_raising_condition_is_false_and_raises_error_execution() -> None:
    """SCXML 5.9: a condition that cannot be evaluated is false and queues ``error.execution``."""

    def bad(c: Ctx, e: Event) -> bool:
        raise ValueError("no")

    chart = Chart(
        "badcond",
        state(
            "a",
            entry=[if_(bad, [mark("then")], else_=[mark("else")])],
            on=[transition("error.execution", actions=[errors_seen])],
        ),
        context=Ctx,
    )
    assert start(chart, Ctx())[0].context.trail == ("else", "error:if condition")


def test_an_error_inside_a_branch_stops_the_whole_block_and_keeps_what_ran() -> None:
    """SCXML 4.9 / 5.12.2: an error stops the rest of the block, nested or not; earlier effects stay."""
    chart = Chart(
        "stops",
        state(
            "a",
            entry=[
                mark("before"),
                if_(lambda c, e: True, [mark("in-branch"), assign(boom), mark("never")]),
                mark("never-either"),
            ],
            on=[transition("error.execution", actions=[errors_seen])],
        ),
        context=Ctx,
    )
    trail = start(chart, Ctx())[0].context.trail
    assert trail == ("before", "in-branch", "error:assign boom")


def test_if_conditions_may_test_the_configuration() -> None:
    """SCXML 5.9.1: ``In()`` in a condition tests the active configuration."""
    chart = Chart(
        "in",
        state(
            "p",
            state(
                "x",
                on=[transition("check", actions=[if_(in_state("x"), [mark("in-x")], else_=[mark("no")])])],
            ),
        ),
        context=Ctx,
    )
    snapshot, _ = start(chart, Ctx())
    assert step(chart, snapshot, Event("check"))[0].context.trail == ("in-x",)


# ------------------------------------------------------------- 4.6 <foreach>


def test_foreach_runs_once_per_item_with_item_and_index_set() -> None:
    """SCXML 4.6: item and index are set before each pass and keep their last values."""
    seen = assign(lambda c, e: attrs.evolve(c, trail=(*c.trail, f"{c.index}:{c.item}")), name="seen")
    chart = Chart(
        "each",
        state("a", entry=[foreach(lambda c, e: c.items, [seen], item="item", index="index")]),
        context=Ctx,
    )
    context = start(chart, Ctx())[0].context
    assert context.trail == ("0:1", "1:2", "2:3")
    assert (context.item, context.index) == (3, 2)


def test_foreach_iterates_over_a_copy_of_the_collection() -> None:
    """SCXML 4.6: changing the collection inside the loop does not change the iteration."""
    grow = assign(lambda c, e: attrs.evolve(c, items=(*c.items, 9), n=c.n + 1), name="grow")
    chart = Chart("copy", state("a", entry=[foreach(lambda c, e: c.items, [grow], item="item")]), context=Ctx)
    context = start(chart, Ctx())[0].context
    assert context.n == 3 and context.items == (1, 2, 3, 9, 9, 9)


def test_foreach_over_something_not_iterable_raises_error_execution() -> None:
    """SCXML 4.6: an ``array`` that is not a collection raises ``error.execution``; the block stops."""
    chart = Chart(
        "bad",
        state(
            "a",
            entry=[foreach(lambda c, e: 42, [mark("x")], item="item"), mark("after")],
            on=[transition("error.execution", actions=[errors_seen])],
        ),
        context=Ctx,
    )
    assert start(chart, Ctx())[0].context.trail == ("error:foreach",)


def test_an_error_inside_foreach_stops_the_loop_and_the_block() -> None:
    """SCXML 4.6: an error in the loop body ends the foreach and the rest of the block."""
    step_or_fail = if_(lambda c, e: c.item == 2, [assign(boom)], else_=[mark("ok")])
    chart = Chart(
        "stop",
        state(
            "a",
            entry=[foreach(lambda c, e: c.items, [step_or_fail], item="item"), mark("after")],
            on=[transition("error.execution", actions=[errors_seen])],
        ),
        context=Ctx,
    )
    assert start(chart, Ctx())[0].context.trail == ("ok", "error:assign boom")


def test_foreach_with_a_context_it_cannot_set_says_how_to_fix_it() -> None:
    """SCXML 4.6: an item that is not a legal location is an error; the message names ``bind``."""
    chart = Chart(
        "nobind",
        state("a", entry=[foreach(lambda c, e: [1], [], item="missing")]),
        context=Ctx,
    )
    _, effects = start(chart, Ctx())
    failure = next(e for e in effects if isinstance(e, ActionFailed))
    assert "missing" in failure.message


# ------------------------------------------------------------------ 6.2 <send>


def test_send_attributes_may_be_computed() -> None:
    """SCXML 6.2: ``eventexpr`` and ``delayexpr`` are evaluated when the send runs."""
    chart = Chart(
        "computed",
        state(
            "a",
            entry=[send(lambda c, e: f"tick.{c.n}", lambda c, e: {"n": c.n}, delay=lambda c, e: c.n * 2.0)],
        ),
        context=Ctx,
    )
    _, effects = start(chart, Ctx(n=3), now=10.0)
    (armed,) = [e for e in effects if isinstance(e, ArmTimer)]
    assert armed.timer.event.name == "tick.3"
    assert armed.timer.event.data == {"n": 3}
    assert armed.timer.deadline == 16.0


def test_idlocation_stores_the_generated_send_id() -> None:
    """SCXML 6.2.1: ``idlocation`` receives the id the processor generated; ``cancel`` may compute it."""
    chart = Chart(
        "idloc",
        state(
            "a",
            entry=[send("later", delay=5, id_location=lambda c, e, sid: attrs.evolve(c, sid=sid))],
            on=[transition("stop", actions=[cancel(lambda c, e: c.sid)])],
        ),
        context=Ctx,
    )
    snapshot, _ = start(chart, Ctx())
    assert snapshot.context.sid and [t.id for t in snapshot.timers] == [snapshot.context.sid]
    snapshot, _ = step(chart, snapshot, Event("stop"))
    assert snapshot.timers == ()


def test_id_and_idlocation_together_are_refused() -> None:
    """SCXML 6.2.1: ``id`` and ``idlocation`` are mutually exclusive."""
    with pytest.raises(ValueError, match="not both"):
        send("x", id="a", id_location=lambda c, e, s: c)


def test_sendid_is_blank_without_an_author_id_and_the_origin_is_this_session() -> None:
    """SCXML 5.10.1: ``_event.sendid`` only when the author gave one; ``origin`` replies to the sender."""
    chart = Chart("origin", state("a", entry=[send("ping"), send("pong", id="mine")]))
    snapshot, _ = start(chart, session="S1")
    ping, pong = (t.event for t in snapshot.timers)
    assert (ping.send_id, ping.origin) == (None, "#_scxml_S1")
    assert (pong.send_id, pong.origin) == ("mine", "#_scxml_S1")


def test_send_to_internal_joins_the_internal_queue() -> None:
    """SCXML 6.2.4: ``#_internal`` puts the event on the internal queue, typed internal."""
    chart = Chart(
        "internal",
        state("a", entry=[send("hop", target="#_internal")], on=[transition("hop", "b")]),
        state("b"),
    )
    snapshot, effects = start(chart)
    assert snapshot.configuration == ("b",)
    assert not [e for e in effects if isinstance(e, ArmTimer)]


def test_send_to_own_session_is_a_send_to_this_instance() -> None:
    """SCXML 6.2.4: ``#_scxml_<sessionid>`` of this session reaches this instance's external queue."""
    chart = Chart("own", state("a", entry=[send("me", target=lambda c, e: "#_scxml_S9")]))
    snapshot, _ = start(chart, session="S9")
    assert [t.event.name for t in snapshot.timers] == ["me"]


def test_send_to_parent_now_and_later() -> None:
    """SCXML 6.2.4: ``#_parent`` delivers to the invoking parent, at once or after the delay."""
    chart = Chart(
        "kid", state("a", entry=[send("now", target="#_parent"), send("later", target="#_parent", delay=3)])
    )
    snapshot, effects = start(chart, now=0.0)
    assert [e.event.name for e in effects if isinstance(e, SendToParent)] == ["now"]
    (timer,) = snapshot.timers
    assert timer.target == "#_parent" and timer.deadline == 3.0
    snapshot, effects = fire_timer(chart, snapshot, timer.id, now=3.0)
    assert [e.event.name for e in effects if isinstance(e, SendToParent)] == ["later"]
    assert snapshot.timers == () and snapshot.configuration == ("a",)


def test_send_to_an_invoked_child_by_its_invoke_id() -> None:
    """SCXML 6.2.4: ``#_<invokeid>`` reaches the invoked child; its origin is ``#_parent``."""
    chart = Chart(
        "parent",
        state(
            "a",
            invoke=[invoke("kid", task="t")],
            on=[transition("poke", actions=[send("hi", target="#_kid")])],
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("poke"))
    (sent,) = [e for e in effects if isinstance(e, SendToChild)]
    assert sent.event.name == "hi" and sent.event.origin == "#_parent"


def test_unreachable_targets_raise_error_communication() -> None:
    """SCXML 6.2.4: a target the processor cannot reach queues ``error.communication``."""

    def got(c: Ctx, e: Event) -> Ctx:
        assert isinstance(e.data, dict)
        return attrs.evolve(c, trail=(*c.trail, e.name, str(e.data["target"])))

    chart = Chart(
        "unreachable",
        state(
            "a",
            entry=[send("x", target="#_scxml_other"), send("y", target="#_nobody")],
            on=[transition("error.communication", actions=[got])],
        ),
        context=Ctx,
    )
    trail = start(chart, Ctx(), session="me")[0].context.trail
    assert trail == ("error.communication", "#_scxml_other", "error.communication", "#_nobody")


def test_invalid_targets_and_unsupported_types_raise_error_execution() -> None:
    """SCXML 6.2.4: an invalid target or unsupported type is ``error.execution``; nothing is sent."""
    bad_sends = [
        send("x", target="http://example.com/"),
        send("x", type="http://example.org/#CarrierPigeonProcessor"),
        send(lambda c, e: ""),
    ]
    messages = []
    for bad in bad_sends:
        chart = Chart(
            "invalid",
            state("a", entry=[bad, mark("never")], on=[transition("error.execution", actions=[errors_seen])]),
            context=Ctx,
        )
        snapshot, effects = start(chart, Ctx())
        assert snapshot.timers == () and snapshot.context.trail == ("error:send",)
        (failure,) = [e for e in effects if isinstance(e, ActionFailed)]
        messages.append(failure.message)
    assert "not supported" in messages[0] and "#_internal" in messages[0]
    assert "CarrierPigeon" in messages[1] and "basichttp" in messages[1]
    assert "event name" in messages[2]


def test_the_scxml_type_is_accepted_by_uri_and_short_name() -> None:
    """SCXML 6.2.4 / C.1: the SCXML event I/O processor is the supported ``type``."""
    chart = Chart(
        "types",
        state(
            "a",
            entry=[
                send("u", type="http://www.w3.org/TR/scxml/#SCXMLEventProcessor"),
                send("s", type="scxml"),
            ],
        ),
    )
    assert [t.event.name for t in start(chart)[0].timers] == ["u", "s"]


# ------------------------------------------------------------ 3.6 <initial>


def test_initial_transition_content_runs_after_entry_and_before_the_children() -> None:
    """SCXML 3.6 / D (enterStates): the ``<initial>`` transition's content runs after the parent's onentry."""
    chart = Chart(
        "initial",
        state(
            "p",
            state("c1", entry=[mark("c1")], on=[transition("next", "c2")]),
            state("c2", entry=[mark("c2")]),
            initial="c2",
            entry=[mark("p")],
            initial_actions=[mark("initial")],
        ),
        context=Ctx,
        allow_unreachable=("c1",),
    )
    snapshot, _ = start(chart, Ctx())
    assert snapshot.context.trail == ("p", "initial", "c2")
    assert snapshot.configuration == ("p", "c2")


def test_initial_content_runs_only_on_default_entry() -> None:
    """SCXML 3.6: a transition that targets a child directly does not take the ``<initial>`` transition."""
    chart = Chart(
        "default-only",
        state("p", state("c1"), state("c2"), initial_actions=[mark("initial")], on=[transition("out", "o")]),
        state("o", on=[transition("back", "p"), transition("direct", "c2")]),
        context=Ctx,
    )
    snapshot, _ = start(chart, Ctx())
    assert snapshot.context.trail == ("initial",)
    snapshot, _ = step(chart, snapshot, Event("out"))
    snapshot, _ = step(chart, snapshot, Event("direct"))
    assert snapshot.context.trail == ("initial",)
    assert snapshot.configuration == ("p", "c2")
    snapshot, _ = step(chart, snapshot, Event("out"))
    snapshot, _ = step(chart, snapshot, Event("back"))
    assert snapshot.context.trail == ("initial", "initial")
    assert snapshot.configuration == ("p", "c1")


def test_initial_actions_on_an_atomic_state_are_refused() -> None:
    """SCXML 3.6: only a compound state has an ``<initial>``; the error names the fix."""
    with pytest.raises(ChartInvalid) as caught:
        Chart("bad", state("a", initial_actions=[log("x")]))
    (problem,) = caught.value.exceptions
    assert isinstance(problem, InvalidDefinition) and "initial_actions" in str(problem)


def test_raise_inside_initial_content_is_seen_after_the_macrostep_settles() -> None:
    """SCXML 3.6: events raised by ``<initial>`` content are internal events like any other."""
    chart = Chart(
        "raised",
        state(
            "p",
            state("c", on=[transition("ready", "done")]),
            final("done"),
            initial_actions=[raise_event("ready")],
        ),
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("p", "done")
    assert EventKind.INTERNAL.value == "internal"


# ------------------------------------------------ blocks, setup, scope, invoke


def test_a_block_stops_alone_and_the_actions_after_it_run() -> None:
    """Each block is executed on its own: an error stops that block only (4.9, 3.8 several <onentry>)."""
    chart = Chart(
        "blocks",
        state("a", entry=[block([mark("1"), boom, mark("never")]), mark("2")]),
        context=Ctx,
    )
    snapshot, effects = start(chart)
    assert snapshot.context.trail == ("1", "2")
    assert [e.action for e in effects if isinstance(e, ActionFailed)] == ["assign boom"]


def test_setup_runs_once_before_the_initial_states_are_entered() -> None:
    """Chart(setup=) is the top-level datamodel and script: run at start, before any entry (5.2.2, 5.8)."""
    chart = Chart("setup", state("a", entry=[mark("entry a")]), context=Ctx, setup=[mark("setup")])
    snapshot, _ = start(chart)
    assert snapshot.context.trail == ("setup", "entry a")
    snapshot, _ = step(chart, snapshot, Event("anything"))
    assert snapshot.context.trail == ("setup", "entry a")


def test_an_error_in_setup_raises_error_execution_after_the_initial_configuration() -> None:
    """A failing setup action raises error.execution, processed once the initial states are entered (5.3)."""
    chart = Chart(
        "failing-setup",
        state("a", on=[transition("error.execution", "b")]),
        state("b"),
        context=Ctx,
        setup=[boom],
    )
    snapshot, _ = start(chart)
    assert snapshot.configuration == ("b",)


def test_current_exposes_the_session_the_chart_and_the_live_configuration() -> None:
    """statechart.current(): _sessionid, _name and In() for Python callables (5.10, 5.9.1)."""
    seen: list[object] = []

    def look(c: Ctx, e: Event) -> None:
        scope = current()
        seen.append((scope.session, scope.chart, scope.active("p"), scope.active("a"), scope.configuration))

    chart = Chart("scoped", state("p", state("a", entry=[assign(look)])), context=Ctx)
    start(chart, session="sess-1")
    # on a's entry, p (entered first) and a itself are already in the configuration
    assert seen == [("sess-1", "scoped", True, True, ("p", "a"))]
    with pytest.raises(LookupError, match="only available while"):
        current()


def test_finalize_runs_on_every_child_event_and_autoforward_forwards_external_events() -> None:
    """invoke(finalize=) runs on each event from the child (6.5); autoforward=True forwards the rest (6.4)."""
    chart = Chart(
        "parent",
        state(
            "waiting",
            invoke=[invoke("kid", chart="kid", finalize=[mark("finalize")], autoforward=True)],
            on=[transition("note", "noted", guard=lambda c, e: c.trail == ("finalize",))],
        ),
        state("noted"),
        context=Ctx,
    )
    snapshot, _ = start(chart)
    slot = snapshot.children[0]
    snapshot, effects = step(chart, snapshot, Event("outside", 1))
    assert [(e.invoke_id.site, e.event.name) for e in effects if isinstance(e, SendToChild)] == [
        ("kid", "outside")
    ]
    snapshot, effects = step(chart, snapshot, child_message_event(slot.invoke_id, "note"))
    assert snapshot.configuration == ("noted",)
    forwarded = [(e.invoke_id.site, e.event.name) for e in effects if isinstance(e, SendToChild)]
    assert forwarded == [("kid", "note")], "sent back to the child it came from too (6.4, W3C 229)"
