"""The approval chart and its task, run by ``incarnate worker``.

An approval first notifies its reviewer (the task ``notify_reviewer``, a
task child), then waits at a human gate for ``approve`` or ``reject``. The
gate is the compound state ``open``, so a decision is taken while the
notification is still being sent, too; nobody deciding within
``DECISION_TIMEOUT`` seconds expires it.

Run the worker from the repository root::

    incarnate worker --charts docs.examples.approval.charts:CHARTS \\
        --tasks docs.examples.approval.charts:TASKS --db approvals.db
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import attrs

from incarnate import TaskCall
from statechart import Chart, Event, JsonValue, after, assign, final, invoke, state, transition

DECISION_TIMEOUT = 3 * 24 * 3600.0
"""Seconds a reviewer has to decide before the approval expires."""

OUTBOX_VARIABLE = "APPROVAL_OUTBOX"
"""The environment variable naming the file the reviewer notices are appended to."""


@attrs.frozen
class Approval:
    """What is asked, of whom, and what has happened so far."""

    title: str = ""
    amount: float = 0.0
    reviewer: str = ""
    notice: JsonValue = None
    """What ``notify_reviewer`` returned (None until the reviewer has been notified)."""


def notice_input(approval: Approval) -> JsonValue:
    """What the notification task needs: who to tell, about what."""
    return {"reviewer": approval.reviewer, "title": approval.title, "amount": approval.amount}


def keep_notice(approval: Approval, event: Event) -> Approval:
    """Remember the notice the task sent."""
    return attrs.evolve(approval, notice=event.data)


def decided(decision: str) -> Callable[[Approval, Event], JsonValue]:
    """The output of a decided approval: the decision, who made it, and the notice."""

    def output(approval: Approval, event: Event) -> JsonValue:
        data = event.data if isinstance(event.data, dict) else {}
        return {
            "decision": decision,
            "by": data.get("by"),
            "comment": data.get("comment"),
            "title": approval.title,
            "amount": approval.amount,
            "notice": approval.notice,
        }

    return output


def expired(approval: Approval, event: Event) -> JsonValue:
    """The output of an approval nobody decided in time."""
    return {"decision": "expired", "title": approval.title, "amount": approval.amount}


APPROVAL = Chart(
    "approval",
    state(
        "open",
        state(
            "notifying",
            invoke=[invoke("notify", task="notify_reviewer", input=notice_input)],
            on=[transition("done.invoke.notify", "waiting", actions=[assign(keep_notice)])],
        ),
        state("waiting"),
        on=[
            transition("approve", "approved"),
            transition("reject", "rejected"),
            after(DECISION_TIMEOUT, "expired"),
        ],
    ),
    final("approved", done_data=decided("approved")),
    final("rejected", done_data=decided("rejected")),
    final("expired", done_data=expired),
    context=Approval,
)
"""``open`` (``notifying``, then ``waiting``) until ``approve``, ``reject`` or the timeout."""

CHARTS = [APPROVAL]


def notify_reviewer(call: TaskCall) -> JsonValue:
    """Tell the reviewer there is something to decide; returns the notice sent.

    A task may run again after a crash (at least once per incarnation), so
    the notice carries the call's idempotency key: a real mail or chat
    service would use it to drop the duplicate.
    """
    assert isinstance(call.input, dict)
    notice: dict[str, JsonValue] = {
        "to": call.input["reviewer"],
        "subject": f"Please decide: {call.input['title']} ({call.input['amount']})",
        "key": call.idempotency_key,
    }
    path = os.environ.get(OUTBOX_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as outbox:
            outbox.write(json.dumps(notice) + "\n")
    return notice


TASKS = {"notify_reviewer": notify_reviewer}
