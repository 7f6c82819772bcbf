"""Child sites: births, outcomes, stale evidence, retries, fan-out and bounded recursion (SCXML 6.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import attrs
import pytest

from statechart import (
    Chart,
    Event,
    JsonValue,
    RetryPolicy,
    always,
    assign,
    fire,
    invoke,
    send_child,
    start,
    state,
    step,
    transition,
)
from statechart.effects import (
    ActionFailed,
    ArmTimer,
    BirthChild,
    CancelChild,
    CancelTimer,
    RejectedEvent,
    ResumeChild,
    RetryChild,
    SendToChild,
)
from statechart.errors import InvalidEvent
from statechart.event import (
    EventKind,
    InvokeId,
    Timer,
    child_message_event,
    done_invoke_event,
    error_invoke_event,
)
from statechart.snapshot import ChildSlot, SlotStatus, Snapshot
from tests.unit.statechart.support import of_type

C = TypeVar("C")


@attrs.frozen
class Job:
    """A parent context: member keys for fan-out, a result, and the events transitions saw."""

    keys: tuple[str, ...] = ()
    result: JsonValue = None
    seen: tuple[Event, ...] = ()


def record(job: Job, event: Event) -> Job:
    return attrs.evolve(job, seen=(*job.seen, event))


def take_output(job: Job, event: Event) -> Job:
    return attrs.evolve(job, result=event.data)


def set_keys(job: Job, event: Event) -> Job:
    assert isinstance(event.data, list)
    return attrs.evolve(job, keys=tuple(str(key) for key in event.data))


def members(job: Job) -> Mapping[str, JsonValue]:
    return {key: {"item": key} for key in job.keys}


def job_input(job: Job) -> JsonValue:
    return {"keys": list(job.keys)}


def single(retry: RetryPolicy | None = None, *, state_id: str = "working") -> Chart[Job]:
    """One task child on ``working``; ``done``/``error.invoke`` leave it, ``leave`` abandons it."""
    return Chart(
        "single",
        state(
            state_id,
            invoke=[invoke("work", task="crunch", input=job_input, output=take_output, retry=retry)],
            on=[
                transition("done.invoke.work", "finished", actions=[assign(record)]),
                transition("error.invoke.work", "failed", actions=[assign(record)]),
                transition("leave", "abandoned"),
                transition("progress", actions=[assign(record)]),
            ],
        ),
        state("finished"),
        state("failed"),
        state("abandoned"),
        context=Job,
    )


def fan_out(*, on_done: str = "finished") -> Chart[Job]:
    """A fan-out site over ``keys``; ``set`` changes the keys while the state stays active."""
    return Chart(
        "fan_out",
        state(
            "working",
            invoke=[invoke("each", task="crunch", map=members, retry=RetryPolicy(max_attempts=2, backoff=1))],
            on=[
                transition("done.invoke.each", on_done, actions=[assign(record)]),
                transition("error.invoke.each", "failed", actions=[assign(record)]),
                transition("set", actions=[assign(set_keys)]),
                transition("leave", "abandoned"),
            ],
        ),
        state("finished"),
        state("failed"),
        state("abandoned"),
        context=Job,
    )


def slot(snapshot: Snapshot[C], site: str, key: str = "") -> ChildSlot:
    found = snapshot.slot(site, key)
    assert found is not None, f"no slot {site}[{key}]"
    return found


# -------------------------------------------------------------------- births


def test_entering_a_state_births_its_child_with_input() -> None:
    """Entering a site's state returns BirthChild with a fresh generation, attempt 1 and the mapped input."""
    chart = single()
    snapshot, effects = start(chart, Job(keys=("a",)))
    assert effects == (
        BirthChild(InvokeId("work", "", 1), None, "crunch", {"keys": ["a"]}, 1, (), "working"),
    )
    assert snapshot.children == (
        ChildSlot("work", "", 1, 1, SlotStatus.RUNNING, "working", {"keys": ["a"]}, 0),
    )
    assert snapshot.next_generation == 2
    assert snapshot.live_children() == snapshot.children


def test_chart_site_names_its_child_chart() -> None:
    """A site with ``chart=`` births a child chart with the constant input."""
    chart = Chart("parent", state("a", invoke=[invoke("sub", chart="child_chart", input=[1, 2])]))
    _, effects = start(chart)
    assert effects == (BirthChild(InvokeId("sub", "", 1), "child_chart", None, [1, 2], 1, (), "a"),)


def test_generations_are_allocated_in_document_order_and_never_reused() -> None:
    """Each birth takes the next generation; re-entering a state births a new one and cancels the old."""
    chart = Chart(
        "gens",
        state(
            "a",
            invoke=[invoke("first", task="t"), invoke("second", task="t")],
            on=[transition("again", "a")],
        ),
    )
    snapshot, effects = start(chart)
    assert [e.invoke_id for e in of_type(effects, BirthChild)] == [
        InvokeId("first", "", 1),
        InvokeId("second", "", 2),
    ]
    snapshot, effects = step(chart, snapshot, Event("again"))
    assert of_type(effects, CancelChild) == [
        CancelChild(InvokeId("first", "", 1)),
        CancelChild(InvokeId("second", "", 2)),
    ]
    assert [e.invoke_id.generation for e in of_type(effects, BirthChild)] == [3, 4]
    assert snapshot.next_generation == 5


def test_state_entered_and_left_in_one_macrostep_births_nothing() -> None:
    """Sites start only for states still active when the macrostep settles."""
    chart = Chart(
        "transient",
        state("a", invoke=[invoke("w", task="t")], on=[always("b")]),
        state("b"),
    )
    snapshot, effects = start(chart)
    assert effects == ()
    assert snapshot.children == ()


def test_failing_input_mapper_is_an_execution_error_and_births_nothing() -> None:
    """An input function that raises yields ActionFailed and a failed slot, with no birth."""

    def broken(job: Job) -> JsonValue:
        raise ValueError("no input")

    chart = Chart("bad_input", state("a", invoke=[invoke("w", task="t", input=broken)]), context=Job)
    snapshot, effects = start(chart)
    assert of_type(effects, BirthChild) == []
    (failure,) = of_type(effects, ActionFailed)
    assert failure.action == "input of site w"
    assert slot(snapshot, "w").status is SlotStatus.FAILED


# ------------------------------------------------------------------ outcomes


def test_done_invoke_maps_output_before_transitions() -> None:
    """``done.invoke.<site>`` runs the site's output mapping before selecting transitions."""

    def mapped(job: Job, event: Event) -> bool:
        return job.result == {"total": 3}

    chart = Chart(
        "mapped",
        state(
            "working",
            invoke=[invoke("work", task="t", output=take_output)],
            on=[transition("done.invoke.work", "finished", guard=mapped)],
        ),
        state("finished"),
        context=Job,
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, done_invoke_event(InvokeId("work", "", 1), {"total": 3}))
    assert snapshot.configuration == ("finished",)
    assert snapshot.context.result == {"total": 3}
    assert effects == ()


def test_done_invoke_marks_the_slot_done_while_the_state_stays() -> None:
    """A finished single child leaves a DONE slot with its output, and is not born again."""
    chart = Chart(
        "stays",
        state("a", invoke=[invoke("w", task="t")], on=[transition("done.invoke.w"), transition("poke")]),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("w", "", 1), "out"))
    assert slot(snapshot, "w") == ChildSlot("w", "", 1, 1, SlotStatus.DONE, "a", None, 0, output="out")
    assert snapshot.live_children() == ()
    _, effects = step(chart, snapshot, Event("poke"))
    assert effects == ()


def test_done_invoke_event_reaches_the_chart_with_the_raw_output() -> None:
    """The chart's transitions see the child's output as the event data, tagged with its invoke id."""
    chart = single()
    snapshot, _ = start(chart)
    event = done_invoke_event(InvokeId("work", "", 1), {"n": 1})
    snapshot, _ = step(chart, snapshot, event)
    assert snapshot.context.seen == (event,)
    assert event.kind is EventKind.PLATFORM


def test_output_mapping_of_wrong_type_is_an_execution_error() -> None:
    """An output mapping returning another class yields ActionFailed; the done event still applies."""

    def wrong(job: Job, event: Event) -> int:
        return 1

    chart = Chart(
        "wrong_output",
        # mypy rejects the mapping; the run-time check is what this test pins
        state("a", invoke=[invoke("w", task="t", output=wrong)], on=[transition("done.invoke.w", "b")]),  # type: ignore[arg-type]
        state("b"),
        context=Job,
    )
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, done_invoke_event(InvokeId("w", "", 1)))
    (failure,) = of_type(effects, ActionFailed)
    assert failure.action == "output of site w"
    assert snapshot.configuration == ("b",)


def test_message_from_the_running_child_is_delivered() -> None:
    """An event sent by the current incarnation (``send_parent``) is processed by the chart."""
    chart = single()
    snapshot, _ = start(chart)
    message = child_message_event(InvokeId("work", "", 1), "progress", 50)
    snapshot, _ = step(chart, snapshot, message)
    assert snapshot.context.seen == (message,)


def test_stale_generation_is_rejected_and_the_snapshot_returned_unchanged() -> None:
    """An outcome from an older generation returns RejectedEvent and the very same snapshot object."""
    chart = single(RetryPolicy(max_attempts=2))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1), "boom"))
    assert slot(snapshot, "work").generation == 2
    stale = done_invoke_event(InvokeId("work", "", 1), "late")
    after, effects = step(chart, snapshot, stale)
    assert after is snapshot
    (rejected,) = effects
    assert isinstance(rejected, RejectedEvent)
    assert rejected.event == stale
    assert "stale" in rejected.reason and "generation 1" in rejected.reason


def test_stale_message_is_rejected() -> None:
    """A message from a superseded incarnation is rejected like a stale outcome."""
    chart = single(RetryPolicy(max_attempts=2))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)))
    after, effects = step(chart, snapshot, child_message_event(InvokeId("work", "", 1), "progress"))
    assert after is snapshot
    assert [type(e) for e in effects] == [RejectedEvent]


def test_outcome_for_an_unknown_site_or_slot_is_rejected() -> None:
    """Outcomes naming no site of the chart, or a slot that is gone, are rejected."""
    chart = single()
    snapshot, _ = start(chart)
    after, effects = step(chart, snapshot, done_invoke_event(InvokeId("nope", "", 1)))
    assert after is snapshot
    assert "no site" in of_type(effects, RejectedEvent)[0].reason
    left, _ = step(chart, snapshot, Event("leave"))
    after, effects = step(chart, left, done_invoke_event(InvokeId("work", "", 1)))
    assert after is left
    assert "no live slot" in of_type(effects, RejectedEvent)[0].reason


def test_message_from_a_finished_child_is_rejected() -> None:
    """Once a child's completion was consumed, further events from it are rejected."""
    chart = Chart(
        "finished_child",
        state("a", invoke=[invoke("w", task="t")], on=[transition("done.invoke.w"), transition("late", "b")]),
        state("b"),
    )
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("w", "", 1)))
    after, effects = step(chart, snapshot, child_message_event(InvokeId("w", "", 1), "late"))
    assert after is snapshot
    assert "not running" in of_type(effects, RejectedEvent)[0].reason


def test_child_outcome_without_invoke_id_is_invalid() -> None:
    """An event named ``done.invoke.*`` without an invoke id is refused as malformed."""
    chart = single()
    snapshot, _ = start(chart)
    with pytest.raises(InvalidEvent, match="invoke_id"):
        step(chart, snapshot, Event("done.invoke.work"))
    with pytest.raises(InvalidEvent):
        step(chart, snapshot, Event(""))


def test_leaving_the_state_cancels_the_running_child() -> None:
    """Exiting a site's state returns CancelChild for the live incarnation and forgets the slot."""
    chart = single()
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, Event("leave"))
    assert effects == (CancelChild(InvokeId("work", "", 1)),)
    assert snapshot.children == ()


def test_send_child_to_a_finished_child_raises_error_communication() -> None:
    """Only running children receive ``send_child``; a finished one yields ``error.communication``."""
    chart = Chart(
        "talk",
        state(
            "a",
            invoke=[invoke("w", task="t")],
            on=[
                transition("done.invoke.w"),
                transition("talk", actions=[send_child("w", "hello")]),
                transition("error.communication", "b"),
            ],
        ),
        state("b"),
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("talk"))
    assert effects == (SendToChild(InvokeId("w", "", 1), Event("hello")),)
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("w", "", 1)))
    snapshot, effects = step(chart, snapshot, Event("talk"))
    assert effects == ()
    assert snapshot.configuration == ("b",)


# ------------------------------------------------------------------- retries


def test_retry_policy_delays() -> None:
    """The wait before attempt n is ``backoff * multiplier ** (n - 2)``, capped at ``max_backoff``."""
    policy = RetryPolicy(max_attempts=5, backoff=2, multiplier=3, max_backoff=10)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.0, 2.0, 6.0, 10.0]


def test_error_with_attempts_left_schedules_a_retry() -> None:
    """``error.invoke`` with attempts left returns RetryChild and arms a timer; the chart never sees it."""
    chart = single(RetryPolicy(max_attempts=3, backoff=2, multiplier=3))
    snapshot, _ = start(chart, now=10.0)
    failed = InvokeId("work", "", 1)
    snapshot, effects = step(chart, snapshot, error_invoke_event(failed, "boom"), now=11.0)
    timer = Timer(
        "retry.work", 13.0, 0, Event("retry.invoke.work", None, EventKind.PLATFORM, invoke_id=failed)
    )
    assert effects == (RetryChild(failed, 2, 13.0, "boom"), ArmTimer(timer))
    assert snapshot.configuration == ("working",)
    assert snapshot.context.seen == ()
    retrying = slot(snapshot, "work")
    assert (retrying.status, retrying.generation, retrying.retry_deadline) == (SlotStatus.RETRYING, 1, 13.0)
    assert snapshot.live_children() == (retrying,)


def test_firing_the_retry_timer_resumes_with_a_fresh_generation() -> None:
    """The retry timer resumes the slot: a new generation, attempt + 1, the same input."""
    chart = single(RetryPolicy(max_attempts=3, backoff=2, multiplier=3))
    snapshot, _ = start(chart, Job(keys=("k",)))
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)))
    snapshot, effects = fire(chart, snapshot, "retry.work", now=2.0)
    assert effects == (
        ResumeChild(
            InvokeId("work", "", 2),
            InvokeId("work", "", 1),
            None,
            "crunch",
            {"keys": ["k"]},
            2,
            (),
            "working",
        ),
    )
    resumed = slot(snapshot, "work")
    assert (resumed.status, resumed.generation, resumed.attempt) == (SlotStatus.RUNNING, 2, 2)
    assert snapshot.timers == ()


def test_backoff_grows_with_each_attempt() -> None:
    """The second retry waits ``backoff * multiplier`` after the second failure."""
    chart = single(RetryPolicy(max_attempts=3, backoff=2, multiplier=3))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)), now=0.0)
    snapshot, _ = fire(chart, snapshot, "retry.work", now=2.0)
    snapshot, effects = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 2)), now=5.0)
    assert of_type(effects, RetryChild) == [RetryChild(InvokeId("work", "", 2), 3, 11.0, None)]


def test_zero_backoff_resumes_in_the_same_step() -> None:
    """With no backoff, the failure returns RetryChild and ResumeChild together and arms no timer."""
    chart = single(RetryPolicy(max_attempts=2))
    snapshot, _ = start(chart)
    snapshot, effects = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1), "x"))
    assert [type(e) for e in effects] == [RetryChild, ResumeChild]
    assert snapshot.timers == ()
    assert (slot(snapshot, "work").generation, slot(snapshot, "work").attempt) == (2, 2)


def test_exhausted_retries_deliver_error_invoke_to_the_chart() -> None:
    """When the last attempt fails the slot is FAILED and the chart sees ``error.invoke.<site>``."""
    chart = single(RetryPolicy(max_attempts=2))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)))
    last = error_invoke_event(InvokeId("work", "", 2), {"why": "again"})
    snapshot, effects = step(chart, snapshot, last)
    assert snapshot.configuration == ("failed",)
    assert snapshot.context.seen == (last,)
    assert of_type(effects, RetryChild) == []


def test_without_retry_the_first_error_reaches_the_chart() -> None:
    """The default policy (one attempt) delivers the first ``error.invoke`` to the chart."""
    chart = single()
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)))
    assert snapshot.configuration == ("failed",)


def test_leaving_a_retrying_state_cancels_the_retry_timer() -> None:
    """Exiting while a retry is pending cancels the retry timer and ends the slot's activation."""
    chart = single(RetryPolicy(max_attempts=3, backoff=5))
    snapshot, _ = start(chart)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("work", "", 1)))
    snapshot, effects = step(chart, snapshot, Event("leave"))
    assert effects == (CancelTimer("retry.work"), CancelChild(InvokeId("work", "", 1)))
    assert snapshot.timers == ()
    assert snapshot.children == ()


def test_retry_event_for_a_running_slot_is_rejected() -> None:
    """A ``retry.invoke`` event for a slot that is not retrying is rejected."""
    chart = single(RetryPolicy(max_attempts=3, backoff=5))
    snapshot, _ = start(chart)
    retry = Event("retry.invoke.work", None, EventKind.PLATFORM, invoke_id=InvokeId("work", "", 1))
    after, effects = step(chart, snapshot, retry)
    assert after is snapshot
    assert "not retrying" in of_type(effects, RejectedEvent)[0].reason


# ------------------------------------------------------------------- fan-out


def test_fan_out_births_one_child_per_key() -> None:
    """A ``map`` site births one child per member key with that member's input."""
    snapshot, effects = start(fan_out(), Job(keys=("x", "y")))
    births = of_type(effects, BirthChild)
    assert [(b.invoke_id, b.input) for b in births] == [
        (InvokeId("each", "x", 1), {"item": "x"}),
        (InvokeId("each", "y", 2), {"item": "y"}),
    ]
    assert [(s.key, s.status) for s in snapshot.children] == [
        ("x", SlotStatus.RUNNING),
        ("y", SlotStatus.RUNNING),
    ]


def test_fan_out_done_fires_once_when_every_member_is_done() -> None:
    """Member completions are absorbed until the last, then ``done.invoke.<site>`` has ``{key: output}``."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x", "y")))
    snapshot, effects = step(chart, snapshot, done_invoke_event(InvokeId("each", "y", 2), "Y"))
    assert snapshot.configuration == ("working",)
    assert effects == ()
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("each", "x", 1), "X"))
    assert snapshot.configuration == ("finished",)
    (done,) = snapshot.context.seen
    assert done.name == "done.invoke.each"
    assert done.data == {"x": "X", "y": "Y"}


def test_fan_out_output_mapping_runs_per_member() -> None:
    """A fan-out site's output mapping runs for each member's completion."""

    def count(job: Job, event: Event) -> Job:
        return attrs.evolve(job, result=(job.result if isinstance(job.result, int) else 0) + 1)

    chart = Chart(
        "per_member",
        state(
            "a",
            invoke=[invoke("each", task="t", map=members, output=count)],
            on=[transition("done.invoke.each", "b")],
        ),
        state("b"),
        context=Job,
    )
    snapshot, _ = start(chart, Job(keys=("x", "y")))
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("each", "x", 1)))
    assert snapshot.context.result == 1
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("each", "y", 2)))
    assert snapshot.context.result == 2
    assert snapshot.configuration == ("b",)


def test_empty_fan_out_is_done_at_once() -> None:
    """A ``map`` returning no members raises ``done.invoke.<site>`` with ``{}`` on entry."""
    snapshot, effects = start(fan_out(), Job(keys=()))
    assert of_type(effects, BirthChild) == []
    assert snapshot.configuration == ("finished",)
    assert [(e.name, e.data) for e in snapshot.context.seen] == [("done.invoke.each", {})]


def test_fan_out_member_failure_retries_by_key() -> None:
    """A member's failure retries that member only, with a per-key retry timer."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x", "y")))
    snapshot, effects = step(chart, snapshot, error_invoke_event(InvokeId("each", "y", 2)))
    (armed,) = of_type(effects, ArmTimer)
    assert armed.timer.id == "retry.each.y"
    snapshot, effects = fire(chart, snapshot, "retry.each.y", now=1.0)
    (resumed,) = of_type(effects, ResumeChild)
    assert resumed.invoke_id == InvokeId("each", "y", 3)
    assert slot(snapshot, "each", "x").generation == 1


def test_fan_out_member_exhausted_failure_reaches_the_chart() -> None:
    """A member failing its last attempt delivers ``error.invoke.<site>`` to the chart."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x",)))
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("each", "x", 1)))
    snapshot, _ = fire(chart, snapshot, "retry.each.x", now=1.0)
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("each", "x", 2)))
    assert snapshot.configuration == ("failed",)


def test_fan_out_follows_membership_when_the_context_changes() -> None:
    """A new key is born, a removed key is cancelled, while the state stays active."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x", "y")))
    snapshot, effects = step(chart, snapshot, Event("set", ["y", "z"]))
    assert effects == (
        CancelChild(InvokeId("each", "x", 1)),
        BirthChild(InvokeId("each", "z", 3), None, "crunch", {"item": "z"}, 1, (), "working"),
    )
    assert sorted(s.key for s in snapshot.children) == ["y", "z"]


def test_readded_key_gets_a_fresh_generation_at_attempt_one() -> None:
    """A key removed and added back is a new incarnation: fresh generation, attempt 1."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x",)))
    snapshot, _ = step(chart, snapshot, error_invoke_event(InvokeId("each", "x", 1)))
    snapshot, _ = fire(chart, snapshot, "retry.each.x", now=1.0)
    assert (slot(snapshot, "each", "x").generation, slot(snapshot, "each", "x").attempt) == (2, 2)
    snapshot, _ = step(chart, snapshot, Event("set", ["y"]))
    snapshot, effects = step(chart, snapshot, Event("set", ["x", "y"]))
    (born,) = of_type(effects, BirthChild)
    assert (born.invoke_id, born.attempt) == (InvokeId("each", "x", 4), 1)
    after, rejected = step(chart, snapshot, done_invoke_event(InvokeId("each", "x", 2)))
    assert after is snapshot
    assert [type(e) for e in rejected] == [RejectedEvent]


def test_membership_is_not_recomputed_when_the_context_is_unchanged() -> None:
    """Events that leave the context alone do not call ``map`` again or touch members."""
    calls: list[Job] = []

    def counted(job: Job) -> Mapping[str, JsonValue]:
        calls.append(job)
        return {"only": None}

    chart = Chart(
        "stable",
        state("a", invoke=[invoke("each", task="t", map=counted)], on=[transition("poke")]),
        context=Job,
    )
    snapshot, _ = start(chart)
    _, effects = step(chart, snapshot, Event("poke"))
    assert effects == ()
    assert len(calls) == 1


def test_failing_map_is_an_execution_error() -> None:
    """A ``map`` that raises or returns a non-mapping yields ActionFailed and births nothing."""

    def broken(job: Job) -> Mapping[str, JsonValue]:
        return ["x"]  # type: ignore[return-value]

    chart = Chart("bad_map", state("a", invoke=[invoke("each", task="t", map=broken)]), context=Job)
    snapshot, effects = start(chart)
    (failure,) = of_type(effects, ActionFailed)
    assert (failure.action, failure.error) == ("map of site each", "TypeError")
    assert snapshot.children == ()


def test_leaving_a_fan_out_state_cancels_every_live_member() -> None:
    """Exiting the site's state cancels running members and forgets finished ones."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x", "y", "z")))
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("each", "x", 1)))
    snapshot, effects = step(chart, snapshot, Event("leave"))
    assert effects == (CancelChild(InvokeId("each", "y", 2)), CancelChild(InvokeId("each", "z", 3)))
    assert snapshot.children == ()


def test_fan_out_done_when_removing_the_last_running_member() -> None:
    """Removing the only unfinished member leaves every member done, so ``done.invoke.<site>`` follows."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x", "y")))
    snapshot, _ = step(chart, snapshot, done_invoke_event(InvokeId("each", "x", 1), "X"))
    snapshot, _ = step(chart, snapshot, Event("set", ["x"]))
    assert snapshot.configuration == ("finished",)
    assert [(e.name, e.data) for e in snapshot.context.seen] == [("done.invoke.each", {"x": "X"})]


def test_fan_out_done_when_membership_becomes_empty() -> None:
    """A membership emptied while the state is active completes the site with ``{}``, as on entry."""
    chart = fan_out()
    snapshot, _ = start(chart, Job(keys=("x",)))
    snapshot, _ = step(chart, snapshot, Event("set", []))
    assert snapshot.configuration == ("finished",)
    assert [(e.name, e.data) for e in snapshot.context.seen] == [("done.invoke.each", {})]


# ----------------------------------------------------------------- recursion


def recursive(max_depth: int) -> Chart[Job]:
    """A chart that invokes itself through a recursive group ``tree``."""
    return Chart(
        "tree",
        state(
            "branch",
            invoke=[invoke("sub", chart="tree", group="tree", max_depth=max_depth)],
            on=[transition("error.invoke.sub", "leaf", actions=[assign(record)])],
        ),
        state("leaf"),
        context=Job,
    )


def test_recursive_birth_extends_the_lineage() -> None:
    """A site in a recursive group births its child with the group appended to the lineage."""
    chart = recursive(3)
    _, effects = start(chart, lineage=("tree",))
    (born,) = of_type(effects, BirthChild)
    assert born.lineage == ("tree", "tree")
    snapshot, _ = start(chart)
    assert snapshot.lineage == ()


def test_max_depth_refuses_the_birth_with_error_invoke() -> None:
    """Past ``max_depth`` no child is born; the chart sees ``error.invoke.<site>`` with reason max_depth."""
    chart = recursive(2)
    snapshot, effects = start(chart, lineage=("tree", "tree"))
    assert of_type(effects, BirthChild) == []
    assert snapshot.configuration == ("leaf",)
    (refusal,) = snapshot.context.seen
    assert refusal.name == "error.invoke.sub"
    assert refusal.data == {"reason": "max_depth", "group": "tree", "depth": 3, "max_depth": 2, "key": ""}
    assert refusal.invoke_id == InvokeId("sub", "", 0)


def test_depth_at_the_bound_is_still_born() -> None:
    """A birth whose depth equals ``max_depth`` is allowed."""
    chart = recursive(2)
    _, effects = start(chart, lineage=("tree",))
    assert len(of_type(effects, BirthChild)) == 1


def test_other_groups_do_not_count_towards_depth() -> None:
    """Only frames of the site's own group count towards its depth."""
    chart = recursive(1)
    _, effects = start(chart, lineage=("other", "other"))
    (born,) = of_type(effects, BirthChild)
    assert born.lineage == ("other", "other", "tree")


# ------------------------------------------------------------------ identities


def test_invoke_id_reads_as_site_key_and_generation() -> None:
    """An invoke id prints as ``site#generation``, with ``[key]`` for fan-out members."""
    assert str(InvokeId("work", "", 3)) == "work#3"
    assert str(InvokeId("each", "x", 4)) == "each[x]#4"


def test_child_event_helpers_tag_the_incarnation() -> None:
    """The helpers build child outcomes as platform events and messages as external ones."""
    who = InvokeId("work", "", 2)
    assert done_invoke_event(who, 1) == Event("done.invoke.work", 1, EventKind.PLATFORM, invoke_id=who)
    assert error_invoke_event(who, "x") == Event("error.invoke.work", "x", EventKind.PLATFORM, invoke_id=who)
    assert child_message_event(who, "hi", [1]) == Event("hi", [1], EventKind.EXTERNAL, invoke_id=who)


def test_snapshot_slot_lookup() -> None:
    """``Snapshot.slot`` finds a slot by site and key and returns None for unknown ones."""
    snapshot, _ = start(fan_out(), Job(keys=("x",)))
    assert slot(snapshot, "each", "x").generation == 1
    assert snapshot.slot("each", "y") is None
    assert snapshot.slot("ghost") is None
    assert snapshot.next_deadline() is None
