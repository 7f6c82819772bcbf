"""Executable content: assign, raise, send/cancel, timers, parent/child messages, log (SCXML 4, 6)."""

from __future__ import annotations

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    JsonValue,
    NoContext,
    after,
    assign,
    cancel,
    due_timers,
    final,
    fire,
    invoke,
    log,
    raise_event,
    send,
    send_child,
    send_parent,
    start,
    state,
    step,
    transition,
)
from statechart.effects import ActionFailed, ArmTimer, CancelTimer, Logged, SendToChild, SendToParent
from statechart.errors import InstanceFinished, StepError, UnknownTimer
from statechart.event import EventKind, InvokeId, Timer
from statechart.model import Assign
from tests.unit.statechart.support import labels, of_type


@attrs.frozen
class Counter:
    """A context with one number and a record of events seen."""

    n: int = 0
    seen: tuple[str, ...] = ()


@attrs.frozen
class Other:
    """A context class no chart here declares."""


def increment(counter: Counter, event: Event) -> Counter:
    return attrs.evolve(counter, n=counter.n + 1)


def keep(counter: Counter, event: Event) -> None:
    return None


def wrong_type(counter: Counter, event: Event) -> Other:
    return Other()


def note(counter: Counter, event: Event) -> Counter:
    return attrs.evolve(counter, seen=(*counter.seen, event.name))


def failing(counter: Counter, event: Event) -> Counter:
    raise KeyError("missing")


# -------------------------------------------------------------------- assign


def test_assign_replaces_the_context() -> None:
    """``assign(fn)`` replaces the context with what ``fn(context, event)`` returns."""
    chart = Chart("assign", state("a", on=[transition("inc", actions=[assign(increment)])]), context=Counter)
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("inc"))
    snapshot, _ = step(chart, snapshot, Event("inc"))
    assert snapshot.context == Counter(n=2)


def test_bare_callable_is_an_assign() -> None:
    """A plain callable in an action list is wrapped as an assign named after the function."""
    (action,) = transition("x", actions=[increment]).actions
    assert action == Assign(increment, "increment")
    assert assign(increment, name="bump").name == "bump"


def test_non_action_in_an_action_list_is_refused() -> None:
    """An action list entry that is neither an action value nor callable raises TypeError."""
    with pytest.raises(TypeError, match="action"):
        transition("x", actions=["not an action"])  # type: ignore[list-item]


def test_assign_returning_none_keeps_the_context() -> None:
    """An assigner that returns None leaves the context as it was."""
    chart = Chart(
        "keep",
        state("a", on=[transition("go", actions=[assign(increment), assign(keep)])]),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.context == Counter(n=1)
    assert of_type(effects, ActionFailed) == []


def test_assign_of_wrong_type_is_an_execution_error() -> None:
    """An assigner returning another class raises ``error.execution`` and skips the rest of its block."""
    chart = Chart(
        "wrong",
        state(
            "a",
            on=[
                # mypy rejects the assigner; the run-time check is what this test pins
                transition("go", actions=[assign(wrong_type), assign(increment)]),  # type: ignore[arg-type]
                transition("error.execution", "failed", actions=[assign(note)]),
            ],
        ),
        state("failed"),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("failed",)
    assert snapshot.context == Counter(n=0, seen=("error.execution",))
    (failure,) = of_type(effects, ActionFailed)
    assert failure.state == "a"
    assert failure.action == "assign wrong_type"
    assert failure.error == "TypeError"
    assert "Counter" in failure.message and "Other" in failure.message


def test_assign_of_wrong_type_raises_error_execution_naming_everything() -> None:
    """A wrong-type assign's ``error.execution`` names state, transition, action, exception and message."""
    seen: list[Event] = []

    def record(counter: Counter, event: Event) -> None:
        seen.append(event)

    chart = Chart(
        "wrong_data",
        state(
            "a",
            on=[
                # mypy rejects the assigner; the run-time check is what this test pins
                transition("go", actions=[assign(wrong_type)], id="bump"),  # type: ignore[arg-type]
                transition("error.execution", actions=[assign(record)]),
            ],
            entry=[assign(wrong_type, name="seed")],  # type: ignore[arg-type]
        ),
        context=Counter,
    )
    snapshot, effects = start(chart)
    (on_entry,) = of_type(effects, ActionFailed)
    assert on_entry.transition is None
    assert on_entry.describe().startswith("error.execution in state 'a': assign seed raised TypeError: ")
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.context == Counter()
    message = "assign wrong_type returned Other, expected Counter (or None to keep the context)"
    assert effects == (ActionFailed("a", "assign wrong_type", "TypeError", message, "bump"),)
    assert seen[-1] == Event(
        "error.execution",
        {
            "state": "a",
            "transition": "bump",
            "action": "assign wrong_type",
            "error": "TypeError",
            "message": message,
        },
        EventKind.PLATFORM,
    )
    assert effects[0].describe() == (
        f"error.execution in transition 'bump' of state 'a': assign wrong_type raised TypeError: {message}"
    )


def test_failing_action_stops_only_its_own_block() -> None:
    """An error in one state's entry block skips the rest of that block but not other states' blocks."""
    chart = Chart(
        "blocks",
        state(
            "outer",
            state("inner", entry=[log("inner")]),
            entry=[assign(failing), log("skipped")],
        ),
        context=Counter,
    )
    _, effects = start(chart)
    assert labels(effects) == ["inner"]
    (failure,) = of_type(effects, ActionFailed)
    assert (failure.state, failure.action, failure.error) == ("outer", "assign failing", "KeyError")


# --------------------------------------------------------------------- raise


def test_raised_events_are_processed_in_order_within_the_step() -> None:
    """Raised events join the internal queue and are processed first in, first out, before the step ends."""
    chart = Chart(
        "raise",
        state(
            "a",
            on=[
                transition("go", actions=[raise_event("first"), raise_event("second")]),
                transition("first second", actions=[assign(note)]),
            ],
        ),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert snapshot.context.seen == ("first", "second")
    assert snapshot.internal_queue == ()


def test_raised_event_is_handled_after_the_current_microstep() -> None:
    """An event raised by a transition is seen from the state that transition entered."""
    chart = Chart(
        "after_micro",
        state("a", on=[transition("go", "b", actions=[raise_event("next")]), transition("next", "wrong")]),
        state("b", on=[transition("next", "right")]),
        state("wrong"),
        state("right"),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert snapshot.configuration == ("right",)


def test_raised_event_data_is_constant_or_computed() -> None:
    """``raise_event`` data may be a JSON value or a function of (context, event); the event is internal."""
    seen: list[Event] = []

    def record(counter: Counter, event: Event) -> None:
        seen.append(event)

    def doubled(counter: Counter, event: Event) -> int:
        return counter.n * 2

    chart = Chart(
        "raise_data",
        state(
            "a",
            on=[
                transition("go", actions=[raise_event("one", {"k": 1}), raise_event("two", doubled)]),
                transition("one two", actions=[assign(record)]),
            ],
        ),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter(n=5))
    step(chart, snapshot, Event("go"))
    assert seen == [Event("one", {"k": 1}, EventKind.INTERNAL), Event("two", 10, EventKind.INTERNAL)]


# ---------------------------------------------------------------------- send


def test_send_with_delay_arms_a_timer_at_now_plus_delay() -> None:
    """``send(delay=d)`` arms a timer with the absolute deadline ``now + d`` and the event to deliver."""
    chart = Chart("send", state("a", on=[transition("go", actions=[send("ping", {"x": 1}, delay=5)])]))
    snapshot, _ = start(chart, now=100.0)
    snapshot, effects = step(chart, snapshot, Event("go"), now=110.0)
    timer = Timer("send.0", 115.0, 0, Event("ping", {"x": 1}, EventKind.EXTERNAL))
    assert effects == (ArmTimer(timer),)
    assert snapshot.timers == (timer,)
    assert snapshot.time == 110.0
    assert snapshot.next_deadline() == 115.0


def test_step_clock_defaults_to_the_snapshot_time() -> None:
    """Without ``now``, a step measures delays from the snapshot's ``time``."""
    chart = Chart("clock", state("a", on=[transition("go", actions=[send("ping", delay=2)])]))
    snapshot, _ = start(chart, now=7.0)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert snapshot.timers[0].deadline == 9.0


def test_send_delay_may_be_computed() -> None:
    """A callable delay is evaluated with (context, event) when the send runs."""

    def seconds(counter: Counter, event: Event) -> float:
        return float(counter.n)

    chart = Chart(
        "computed",
        state("a", on=[transition("go", actions=[send("ping", delay=seconds, id="t")])]),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter(n=3))
    snapshot, _ = step(chart, snapshot, Event("go"), now=1.0)
    assert snapshot.timers[0].deadline == 4.0
    assert snapshot.timers[0].id == "t"


def test_send_with_negative_delay_is_an_execution_error() -> None:
    """A negative delay arms nothing and raises ``error.execution``."""

    def negative(context: NoContext, event: Event) -> float:
        return -1.0

    chart = Chart(
        "negative",
        state("a", on=[transition("go", actions=[send("ping", delay=negative)]), transition("error", "bad")]),
        state("bad"),
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("go"))
    assert snapshot.timers == ()
    assert snapshot.configuration == ("bad",)
    assert of_type(effects, ActionFailed)[0].action == "send"


def test_send_ids_default_to_a_sequence() -> None:
    """Sends without an id get distinct ids from the snapshot's sequence counter."""
    chart = Chart("ids", state("a", on=[transition("go", actions=[send("x", delay=1), send("y", delay=1)])]))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert [t.id for t in snapshot.timers] == ["send.0", "send.1"]
    assert [t.sequence for t in snapshot.timers] == [0, 1]
    assert snapshot.sequence == 2


def record_event(counter: Counter, event: Event) -> Counter:
    return attrs.evolve(counter, seen=(*counter.seen, f"{event.name}:{event.send_id}"))


def test_send_without_id_delivers_a_blank_sendid() -> None:
    """An event from a send without an id has no ``send_id`` (SCXML 6.2); only its timer has an id."""
    chart = Chart(
        "blank",
        state(
            "a",
            on=[
                transition("go", actions=[send("ping", delay=1)]),
                transition("ping", actions=[record_event]),
            ],
        ),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    (timer,) = snapshot.timers
    assert timer.id == "send.0"
    assert timer.event.send_id is None
    snapshot, _ = fire(chart, snapshot, timer.id, now=1.0)
    assert snapshot.context.seen == ("ping:None",)


def test_send_with_an_id_delivers_that_sendid() -> None:
    """An event from a send with an author's id carries that id as ``send_id``."""
    chart = Chart(
        "named",
        state(
            "a",
            on=[
                transition("go", actions=[send("ping", delay=1, id="reminder")]),
                transition("ping", actions=[record_event]),
            ],
        ),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    snapshot, _ = fire(chart, snapshot, "reminder", now=1.0)
    assert snapshot.context.seen == ("ping:reminder",)


def test_after_event_has_a_blank_sendid() -> None:
    """The event an ``after`` timer delivers has no ``send_id``: the timer id stays bookkeeping."""
    chart = Chart(
        "after_blank",
        state("a", on=[transition("*", "b", actions=[record_event]), after(1, "c")]),
        state("b"),
        state("c"),
        context=Counter,
    )
    snapshot, _ = start(chart)
    snapshot, _ = fire(chart, snapshot, "after.a.1", now=1.0)
    # ``*`` comes first in document order, so it takes the timer's event
    assert snapshot.configuration == ("b",)
    assert snapshot.context.seen == ("after.a.1:None",)


def test_an_event_named_like_an_after_timer_does_not_take_it() -> None:
    """Only the ``after`` timer itself takes its delayed transition, not an event that shares its name."""
    chart = Chart("after_only", state("a", on=[after(1, "b")]), state("b"))
    snapshot, _ = start(chart)
    for sendid in (None, "after.a.0"):
        moved, _ = step(chart, snapshot, Event("after.a.0", send_id=sendid))
        assert moved.configuration == ("a",)
    raised = Chart(
        "after_raised",
        state("a", on=[after(1, "b"), transition("poke", actions=[raise_event("after.a.0")])]),
        state("b"),
    )
    snapshot, _ = start(raised)
    moved, _ = step(raised, snapshot, Event("poke"))
    assert moved.configuration == ("a",)


def test_cancel_withdraws_a_pending_send() -> None:
    """``cancel(id)`` removes the armed timer and returns CancelTimer."""
    chart = Chart(
        "cancel",
        state(
            "a",
            on=[
                transition("arm", actions=[send("ping", delay=10, id="reminder")]),
                transition("disarm", actions=[cancel("reminder")]),
            ],
        ),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("arm"))
    snapshot, effects = step(chart, snapshot, Event("disarm"))
    assert effects == (CancelTimer("reminder"),)
    assert snapshot.timers == ()


def test_cancel_of_an_unknown_id_does_nothing() -> None:
    """Cancelling an id that is not armed returns no effect and raises no error."""
    chart = Chart("cancel_none", state("a", on=[transition("disarm", actions=[cancel("nothing")])]))
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("disarm"))
    assert effects == ()


def test_resending_an_id_replaces_the_timer() -> None:
    """A send reusing an armed id cancels the old timer before arming the new one."""
    chart = Chart("replace", state("a", on=[transition("arm", actions=[send("ping", delay=10, id="r")])]))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("arm"), now=0.0)
    snapshot, effects = step(chart, snapshot, Event("arm"), now=5.0)
    assert [type(e) for e in effects] == [CancelTimer, ArmTimer]
    assert [(t.id, t.deadline) for t in snapshot.timers] == [("r", 15.0)]


def test_fire_delivers_the_timer_event_and_disarms_it() -> None:
    """``fire`` processes the armed timer's event as a macrostep and removes the timer."""
    chart = Chart(
        "fire",
        state("a", on=[transition("go", actions=[send("ping", delay=1)]), transition("ping", "b")]),
        state("b"),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    snapshot, effects = fire(chart, snapshot, "send.0", now=1.0)
    assert snapshot.configuration == ("b",)
    assert snapshot.timers == ()
    assert effects == ()
    assert snapshot.time == 1.0


def test_fire_of_an_unknown_timer_is_refused() -> None:
    """Firing a timer that is not armed raises UnknownTimer listing the armed ones."""
    chart = Chart("unknown", state("a", on=[transition("go", actions=[send("ping", delay=1, id="known")])]))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    with pytest.raises(UnknownTimer) as caught:
        fire(chart, snapshot, "nope")
    assert caught.value.armed == ("known",)
    assert "nope" in str(caught.value)
    assert isinstance(caught.value, StepError)
    assert isinstance(caught.value, LookupError)


def test_due_timers_orders_by_deadline_then_arming_sequence() -> None:
    """``due_timers`` returns the timers due at ``now``, earliest deadline first, ties in arming order."""
    chart = Chart(
        "due",
        state(
            "a",
            on=[
                transition(
                    "go",
                    actions=[
                        send("late", delay=3, id="late"),
                        send("tie1", delay=1, id="tie1"),
                        send("early", delay=0.5, id="early"),
                        send("tie2", delay=1, id="tie2"),
                        send("future", delay=9, id="future"),
                    ],
                )
            ],
        ),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, Event("go"))
    assert [t.id for t in due_timers(snapshot, 3.0)] == ["early", "tie1", "tie2", "late"]
    assert [t.id for t in due_timers(snapshot, 0.9)] == ["early"]
    assert due_timers(snapshot, 0.1) == ()


def test_finished_instance_has_no_timers_and_refuses_events() -> None:
    """Completion disarms pending sends, so nothing is left to fire, and further events are refused."""
    chart = Chart(
        "finished",
        state("a", on=[transition("go", "end", actions=[send("late", delay=1, id="t")])]),
        final("end"),
    )
    snapshot, _ = start(chart)
    done, effects = step(chart, snapshot, Event("go"))
    assert CancelTimer("t") in effects
    assert done.timers == ()
    with pytest.raises(UnknownTimer):
        fire(chart, done, "t")
    with pytest.raises(InstanceFinished):
        step(chart, done, Event("go"))


# --------------------------------------------------------------------- after


def test_after_arms_a_timer_on_entry() -> None:
    """Entering a state with ``after(s)`` arms a platform timer due ``s`` seconds later."""
    chart = Chart("after", state("a", on=[after(30, "b")]), state("b"))
    snapshot, effects = start(chart, now=10.0)
    timer = Timer("after.a.0", 40.0, 0, Event("after.a.0", None, EventKind.PLATFORM))
    assert effects == (ArmTimer(timer),)
    assert snapshot.timers == (timer,)


def test_after_timer_takes_its_transition_when_fired() -> None:
    """Firing an ``after`` timer takes the delayed transition."""
    chart = Chart("after_fire", state("a", on=[after(1, "b")]), state("b"))
    snapshot, _ = start(chart)
    (due,) = due_timers(snapshot, 1.0)
    snapshot, _ = fire(chart, snapshot, due.id, now=1.0)
    assert snapshot.configuration == ("b",)
    assert snapshot.timers == ()


def test_leaving_a_state_cancels_its_after_timer() -> None:
    """Exiting a state before its delay elapses cancels the armed ``after`` timer."""
    chart = Chart(
        "after_cancel", state("a", on=[after(60, "c"), transition("skip", "b")]), state("b"), state("c")
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("skip"))
    assert effects == (CancelTimer("after.a.0"),)
    assert snapshot.timers == ()


def test_reentering_a_state_rearms_its_after_timer() -> None:
    """A self-transition cancels the old ``after`` timer and arms a new deadline."""
    chart = Chart("after_again", state("a", on=[after(10, "b"), transition("poke", "a")]), state("b"))
    snapshot, _ = start(chart, now=0.0)
    snapshot, effects = step(chart, snapshot, Event("poke"), now=4.0)
    assert [type(e) for e in effects] == [CancelTimer, ArmTimer]
    assert snapshot.timers[0].deadline == 14.0


def test_guarded_after_is_ignored_when_its_guard_fails() -> None:
    """A delayed transition whose guard is false when the timer fires is not taken."""

    def never(context: NoContext, event: Event) -> bool:
        return False

    chart = Chart("after_guard", state("a", on=[after(1, "b", guard=never)]), state("b"))
    snapshot, _ = start(chart)
    snapshot, _ = fire(chart, snapshot, "after.a.0", now=1.0)
    assert snapshot.configuration == ("a",)


def test_after_refuses_a_negative_delay() -> None:
    """``after()`` needs a delay of zero or more seconds."""
    with pytest.raises(ValueError, match=">= 0"):
        after(-1, "b")


# ------------------------------------------------------------ parent / child


def test_send_parent_returns_a_send_to_parent_effect() -> None:
    """``send_parent`` returns SendToParent with the event and its data."""

    def report(counter: Counter, event: Event) -> int:
        return counter.n

    chart = Chart(
        "child",
        state("a", on=[transition("go", actions=[send_parent("progress", report)])]),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter(n=4))
    _, effects = step(chart, snapshot, Event("go"))
    assert effects == (SendToParent(Event("progress", 4)),)


def test_send_child_reaches_the_running_child() -> None:
    """``send_child`` returns SendToChild addressed to the site's current incarnation."""
    chart = Chart(
        "parent",
        state(
            "a",
            invoke=[invoke("worker", task="job")],
            on=[transition("nudge", actions=[send_child("worker", "wake", {"k": 1})])],
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("nudge"))
    assert effects == (SendToChild(InvokeId("worker", "", 1), Event("wake", {"k": 1})),)


def test_send_child_without_a_running_child_raises_error_communication() -> None:
    """``send_child`` to a site with no running child queues ``error.communication`` instead."""
    chart = Chart(
        "lonely",
        state(
            "a",
            on=[
                transition("nudge", actions=[send_child("worker", "wake")]),
                transition("error.communication", "complained"),
            ],
        ),
        state("complained"),
        state("b", invoke=[invoke("worker", task="job")]),
        allow_unreachable=["b"],
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("nudge"))
    assert of_type(effects, SendToChild) == []
    assert snapshot.configuration == ("complained",)


def test_send_child_by_key_reaches_one_member() -> None:
    """``send_child(key=...)`` addresses one member of a fan-out site."""

    def two(context: NoContext) -> dict[str, None]:
        return {"x": None, "y": None}

    chart = Chart(
        "members",
        state(
            "a",
            invoke=[invoke("w", task="job", map=two)],
            on=[
                transition("one", actions=[send_child("w", "ping", key="y")]),
                transition("all", actions=[send_child("w", "ping")]),
            ],
        ),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("one"))
    assert [e.invoke_id.key for e in of_type(effects, SendToChild)] == ["y"]
    _, effects = step(chart, snapshot, Event("all"))
    assert [e.invoke_id.key for e in of_type(effects, SendToChild)] == ["x", "y"]


# ----------------------------------------------------------------------- log


def test_log_returns_a_logged_effect_with_data() -> None:
    """``log`` returns Logged with its label and constant or computed data."""

    def value(counter: Counter, event: Event) -> JsonValue:
        return {"n": counter.n}

    chart = Chart(
        "log",
        state("a", on=[transition("go", actions=[log("plain"), log("const", [1]), log("calc", value)])]),
        context=Counter,
    )
    snapshot, _ = start(chart, Counter(n=2))
    _, effects = step(chart, snapshot, Event("go"))
    assert effects == (Logged("plain", None), Logged("const", [1]), Logged("calc", {"n": 2}))


def test_failing_data_expression_is_an_execution_error() -> None:
    """A data function that raises stops the block and raises ``error.execution``."""

    def boom(context: NoContext, event: Event) -> int:
        raise RuntimeError("no data")

    chart = Chart("bad_data", state("a", on=[transition("go", actions=[log("x", boom), log("after")])]))
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("go"))
    assert labels(effects) == []
    (failure,) = of_type(effects, ActionFailed)
    assert (failure.action, failure.error, failure.message) == ("log", "RuntimeError", "no data")


def test_child_after_timer_does_not_take_the_parents_delayed_transition() -> None:
    """A delayed transition is taken only by its own timer, never by a dotted child state's timer."""

    def never(context: NoContext, event: Event) -> bool:
        return False

    chart = Chart(
        "dotted",
        state(
            "a",
            state("a.1", on=[after(1, "early", guard=never)]),
            on=[transition("noop"), after(100, "late")],
        ),
        state("early"),
        state("late"),
        allow_unreachable=["early"],
    )
    snapshot, _ = start(chart)
    assert [t.id for t in snapshot.timers] == ["after.a.1.0", "after.a.1"]
    snapshot, _ = fire(chart, snapshot, "after.a.1.0", now=1.0)
    assert snapshot.configuration == ("a", "a.1")
