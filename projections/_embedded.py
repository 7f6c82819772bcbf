"""Embedded task children as instances of their own, rebuilt from their parent's events.

A task child may be *embedded* in its parent (stored format 2 of
``Birth``): it has no event stream of its own. Its birth is the parent's
``Birth`` (or ``ChildResume``) marked ``embedded``, and its outcome is the
message its parent accepted from it (``done.invoke`` or ``error.invoke``,
whose source is the task's instance id). Everything an instance with a
stream would have recorded is in those facts, so this projection rebuilds
it: the ``Instance`` events the task would have stored, as real event
objects with the task's id, its own versions from 1 and the times of the
parent's events they come from. Folding them (``event.mutate``, or
:func:`projections.instance_at`) gives the task's instance; reads, time
travel and the timeline use them as they use a stored stream.

Which fact of the parent ends the task:

- the message it sent (its outcome): ``Completed`` with the output, or
  ``Failed`` with the error (and the traceback the message carries out of
  the chart's sight, ``Message.trace``); an ``error.invoke`` that reports a cancel
  requested by someone other than the parent (``{"reason": "cancelled",
  "detail": …}``) is ``Cancelled`` with that detail;
- without an outcome, the parent settling its activation as cancelled (it
  left the site's state): ``Cancelled``;
- without either, the parent ending (a macrostep that failed, an orphan):
  ``Cancelled``, naming the caller and its status, as recovery finishes a
  terminal caller's cancel cascade (FR-6).

A retry always follows an outcome (``ChildRetry`` records what the parent
did with a failure it heard), so it ends nothing of its own.

While it runs, its owner is its parent's: each ``Claimed`` of the parent
is a ``Claimed`` of the task, with the task's own incarnation count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from aggregates import BirthFacts, Instance, InstanceStatus, Message, Settlement

_ENDED = {
    "Completed": InstanceStatus.DONE.value,
    "Failed": InstanceStatus.FAILED.value,
    "Cancelled": InstanceStatus.CANCELLED.value,
    "Orphaned": InstanceStatus.ORPHAN.value,
}
"""The parent's endings, by event class name, and the status each leaves it in."""


class _Task:
    """One embedded task being rebuilt: its birth facts and its events so far."""

    __slots__ = ("events", "facts", "incarnation", "live", "owner")

    def __init__(self, facts: BirthFacts, owner: str, at: Any, traceparent: str | None) -> None:
        self.facts = facts
        self.owner = owner
        self.incarnation = 1
        self.live = True
        self.events: list[Any] = [
            Instance.started_by_birth(
                facts, fingerprint="", owner=owner, timestamp=at, traceparent=traceparent
            )
        ]

    def add(self, event_class: type[Any], at: Any, **fields: Any) -> None:
        self.events.append(
            event_class(
                originator_id=self.facts.child_id,
                originator_version=len(self.events) + 1,
                timestamp=at,
                **fields,
            )
        )

    def end(self, event_class: type[Any], at: Any, **fields: Any) -> None:
        self.add(event_class, at, **fields)
        self.live = False

    def claimed(self, owner: str, reason: str, at: Any) -> None:
        self.add(
            Instance.Claimed,
            at,
            owner=owner,
            incarnation=self.incarnation + 1,
            previous=self.owner,
            reason=reason,
        )
        self.owner = owner
        self.incarnation += 1

    def heard(self, message: Message, at: Any) -> None:
        """The parent accepted ``message``: the task's outcome when it came from this incarnation."""
        event = message.event
        if event.invoke_id != self.facts.ref.invoke_id:
            return
        data = event.data
        status = outcome_status(event.name, data)
        if status is InstanceStatus.DONE:
            self.end(Instance.Completed, at, output=data)
        elif status is InstanceStatus.CANCELLED:
            self.end(Instance.Cancelled, at, reason=str(data["detail"]))  # type: ignore[index,call-overload]
        elif status is InstanceStatus.FAILED:
            if message.trace is not None and isinstance(data, dict):
                self.end(Instance.Failed, at, error={**data, "traceback": message.trace})
            else:
                self.end(Instance.Failed, at, error=data)


def embedded_tasks(parent_events: Iterable[Any]) -> dict[UUID, list[Any]]:
    """The events of every task embedded in a parent, by task id, in the order they were born.

    ``parent_events`` are the parent's events from its creation (version
    1), in version order; an ``eventsourcing`` snapshot holds no births, so
    a history that starts from one misses the tasks born before it.
    """
    tasks: dict[UUID, _Task] = {}
    live: dict[UUID, _Task] = {}
    owner = ""
    parent_id: UUID | None = None
    for event in parent_events:
        name = type(event).__name__
        at = event.timestamp
        if name == "Started":
            owner, parent_id = event.owner, event.originator_id
        elif name in ("Birth", "ChildResume"):
            if event.embedded:
                task = _Task(event.facts, owner, at, event.traceparent)
                tasks[event.facts.child_id] = live[event.facts.child_id] = task
        elif name == "Accepted":
            _heard(live, event.message, at)
        elif name == "Stepped":
            if event.received is not None:
                _heard(live, event.received, at)
            for ref, settlement in event.settled:
                _settled(live, ref.child_id, settlement, at)
        elif name == "ChildSettled":
            _settled(live, event.ref.child_id, event.settlement, at)
        elif name == "Claimed":
            owner = event.owner
            for task in live.values():
                task.claimed(event.owner, event.reason, at)
        elif name in _ENDED:
            for task in live.values():
                task.end(Instance.Cancelled, at, reason=f"caller {parent_id} is {_ENDED[name]}")
            live.clear()
    return {task_id: task.events for task_id, task in tasks.items()}


def embedded_history(parent_events: Iterable[Any], task_id: UUID) -> list[Any]:
    """The events of the task ``task_id`` embedded in the parent of ``parent_events`` ([] if none is)."""
    return embedded_tasks(parent_events).get(task_id, [])


def _heard(live: dict[UUID, _Task], message: Message, at: Any) -> None:
    source = message.source
    task = live.get(source) if source is not None else None
    if task is not None:
        task.heard(message, at)
        if not task.live:
            del live[task.facts.child_id]


def _settled(live: dict[UUID, _Task], task_id: UUID, settlement: Settlement, at: Any) -> None:
    task = live.get(task_id)
    if task is not None and settlement is Settlement.CANCELLED:
        task.end(Instance.Cancelled, at, reason=f"parent left state {task.facts.state!r}")
        del live[task_id]


def cancel_report(data: Any) -> bool:
    """Whether an ``error.invoke``'s data reports a cancel someone other than the parent requested."""
    return isinstance(data, dict) and data.keys() == {"reason", "detail"} and data["reason"] == "cancelled"


def outcome_status(name: str, data: Any) -> InstanceStatus | None:
    """How a child's outcome message (``name`` and ``data``) ends it; None for any other message.

    ``done.invoke`` is done; ``error.invoke`` is failed, or cancelled when it
    reports a cancel someone other than the parent requested.
    """
    if name.startswith("done.invoke."):
        return InstanceStatus.DONE
    if name.startswith("error.invoke."):
        return InstanceStatus.CANCELLED if cancel_report(data) else InstanceStatus.FAILED
    return None
