"""A correct approval workflow, as a user writes it: mypy --strict accepts all of it."""

from __future__ import annotations

import attrs

from incarnate import Engine, Storage, TaskCall
from statechart import (
    Chart,
    Event,
    JsonValue,
    after,
    always,
    assign,
    final,
    in_state,
    invoke,
    parallel,
    state,
    transition,
)
from statechart.snapshot import Snapshot


@attrs.frozen
class Approval:
    """What is asked, of whom, and what has happened so far."""

    title: str = ""
    amount: float = 0.0
    reviewer: str = ""
    notice: JsonValue = None
    reminders: int = 0


def small(approval: Approval, event: Event) -> bool:
    """Small amounts need no reviewer."""
    return approval.amount < 100


def anything(context: object, event: Event) -> bool:
    """A guard for every chart: it takes ``object``."""
    return event.data is not None


def keep_notice(approval: Approval, event: Event) -> Approval:
    """Remember what the notification task returned."""
    return attrs.evolve(approval, notice=event.data)


def remind(approval: Approval, event: Event) -> Approval:
    """Count a reminder."""
    return attrs.evolve(approval, reminders=approval.reminders + 1)


def note_only(approval: Approval, event: Event) -> None:
    """An assigner may return None to keep the context."""


def notice_input(approval: Approval) -> JsonValue:
    """What the notification task needs."""
    return {"reviewer": approval.reviewer, "title": approval.title}


def outcome(approval: Approval, event: Event) -> JsonValue:
    """The result of a decided approval."""
    return {"title": approval.title, "by": event.data, "notice": approval.notice}


def notify_reviewer(call: TaskCall) -> JsonValue:
    """The task: tell the reviewer (here: echo who would be told)."""
    return call.input


APPROVAL: Chart[Approval] = Chart(
    "approval",
    state("triage", on=[always("approved", guard=small), always("open")]),
    state(
        "open",
        parallel(
            "waiting",
            state(
                "notifying",
                state(
                    "sending",
                    invoke=[invoke("notify", task="notify", input=notice_input, output=keep_notice)],
                ),
                state("sent"),
                on=[transition("done.invoke.notify", "sent")],
            ),
            state(
                "gate",
                on=[
                    transition("approve", "approved", guard=anything),
                    transition("reject", "rejected", guard=in_state("sent")),
                    transition("nudge", actions=[assign(remind), note_only]),
                    transition("touch", actions=[lambda a, e: attrs.evolve(a, reminders=0)]),
                ],
            ),
        ),
        on=[after(3 * 24 * 3600.0, "expired")],
    ),
    final("approved", done_data=outcome),
    final("rejected", done_data=lambda a, e: {"title": a.title, "rejected": True}),
    final("expired", done_data={"expired": True}),
    context=Approval,
)


def typed_use(engine: Engine) -> str:
    """Start by chart object, and read a snapshot typed by the chart's context."""
    handle = engine.start(APPROVAL, {"title": "laptop", "amount": 900.0, "reviewer": "ada"})
    snapshot: Snapshot[Approval] = engine.snapshot(handle, APPROVAL)
    by_name = engine.start("approval", {"title": "desk"})
    loose = engine.snapshot(by_name)
    return snapshot.context.title + str(loose.context)


def main() -> None:
    """Run one approval in memory."""
    with Engine([APPROVAL], {"notify": notify_reviewer}, storage=Storage.popo()) as engine:
        print(typed_use(engine))


if __name__ == "__main__":
    main()
