"""Structured log records of committed facts: steps, births, retries, failures, incidents, claims.

A fact is only true once it is stored: a birth, a retry or an incident of a
unit of work that loses a race is decided again, and a fenced write never
happened. So the engine logs them from its save, after it succeeded, with
the events it wrote (:func:`committed`). Every record carries its fields as
attributes (``extra=``): ``instance_id``, ``chart`` (the chart or task
name), ``kind``, ``root_id``, ``owner``, ``engine_id`` (the engine that
wrote it), ``fact`` (the stored event's name) and, for a child,
``parent_id``, ``ref``, ``generation`` and ``attempt``; others where
relevant (``event``, ``incident``, ``parked``, ``error``, ``failure``,
``incarnation``).

Loggers and levels (see ``docs/how-to/observe.md``):

- ``incarnate.engine.step``: DEBUG per committed macrostep and completion,
  INFO for a rejected message or a cancellation;
- ``incarnate.engine.birth``: INFO per instance created (a root started, a
  child born or resumed for a retry);
- ``incarnate.engine.retry``: INFO per failed child attempt that is retried;
- ``incarnate.engine.failure``: WARNING per chart instance that failed
  (a task's failure is logged by ``incarnate.tasks``, with its traceback);
- ``incarnate.engine.action``: WARNING per action, guard or mapper that
  raised (the chart saw ``error.execution``);
- ``incarnate.engine.ignored``: WARNING per event that took no transition
  (no transition of the configuration matches its name, or every guard was
  false): it was consumed and changed nothing;
- ``incarnate.engine.incident``: WARNING per incident, ERROR when it parks
  the instance (nothing of its call tree runs until an operator acts), INFO
  when an operator resolves it;
- ``incarnate.ownership``: DEBUG per instance claimed (each take-over is
  summarised at INFO).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any

from aggregates import Instance
from statechart.effects import ActionFailed, Ignored

STEP = logging.getLogger("incarnate.engine.step")
BIRTH = logging.getLogger("incarnate.engine.birth")
RETRY = logging.getLogger("incarnate.engine.retry")
FAILURE = logging.getLogger("incarnate.engine.failure")
ACTION = logging.getLogger("incarnate.engine.action")
IGNORED = logging.getLogger("incarnate.engine.ignored")
INCIDENT = logging.getLogger("incarnate.engine.incident")
CLAIM = logging.getLogger("incarnate.ownership")

_LOWEST = (
    (STEP, logging.DEBUG),
    (BIRTH, logging.INFO),
    (RETRY, logging.INFO),
    (FAILURE, logging.WARNING),
    (ACTION, logging.WARNING),
    (IGNORED, logging.WARNING),
    (INCIDENT, logging.INFO),
    (CLAIM, logging.DEBUG),
)

Written = Sequence[tuple[Instance, Sequence[Any]]]
"""What one save wrote: each instance (as saved) with its events."""


def wanted() -> bool:
    """Whether any of these loggers would emit a record (else the save does not collect its events)."""
    return any(logger.isEnabledFor(level) for logger, level in _LOWEST)


def fields(instance: Instance, engine_id: str, fact: str, **more: Any) -> dict[str, Any]:
    """The structured fields of a record about ``instance``."""
    record = instance.record
    out: dict[str, Any] = {
        "instance_id": str(instance.id),
        "chart": record.name,
        "kind": record.kind.value,
        "root_id": str(record.root),
        "owner": record.owner,
        "engine_id": engine_id,
        "fact": fact,
    }
    birth = record.birth
    if birth is not None:
        out.update(
            parent_id=str(birth.ref.parent),
            ref=str(birth.ref),
            generation=birth.ref.generation,
            attempt=birth.attempt,
        )
    out.update(more)
    return out


def committed(engine_id: str, written: Written) -> None:
    """Log the facts one save of ``engine_id`` stored.

    The save has happened: a record that cannot be built is reported, never
    raised into the engine, which still has to enact what it committed.
    """
    for instance, events in written:
        for event in events:
            try:
                _log(engine_id, instance, event)
            except Exception:
                logging.getLogger("incarnate.engine").warning(
                    "could not log %s of %s", type(event).__name__, instance.id, exc_info=True
                )


def _log(engine_id: str, instance: Instance, event: Any) -> None:
    name = type(event).__name__
    record = instance.record
    if name == "Stepped":
        _stepped(engine_id, instance, event)
    elif name == "Started":
        if BIRTH.isEnabledFor(logging.INFO):
            _started(engine_id, instance)
    elif name in ("Birth", "ChildResume"):
        if event.embedded and BIRTH.isEnabledFor(logging.INFO):
            _embedded(engine_id, instance, event.facts, name)
    elif name == "ChildRetry":
        if RETRY.isEnabledFor(logging.INFO):
            ref = event.ref
            activation = record.activation(ref.site, ref.key)
            RETRY.info(
                "child %s of %s failed attempt %d; attempt %d is due at %s: %s",
                ref.child_id,
                instance.id,
                event.attempt - 1,
                event.attempt,
                event.deadline,
                event.error,
                extra={
                    "instance_id": str(ref.child_id),
                    "chart": activation.name if activation is not None else "",
                    "root_id": str(record.root),
                    "parent_id": str(instance.id),
                    "ref": str(ref),
                    "generation": ref.generation,
                    "attempt": event.attempt,
                    "owner": record.owner,
                    "engine_id": engine_id,
                    "fact": name,
                    "error": event.error,
                },
            )
    elif name == "Failed":
        if record.kind.value == "chart" and FAILURE.isEnabledFor(logging.WARNING):
            FAILURE.warning(
                "instance %s of chart %r failed: %s",
                instance.id,
                record.name,
                event.error,
                extra=fields(instance, engine_id, name, error=event.error),
            )
    elif name == "IncidentRecorded":
        incident = event.incident
        level = logging.ERROR if incident.parked else logging.WARNING
        if INCIDENT.isEnabledFor(level):
            INCIDENT.log(
                level,
                "incident %s on %s (%r)%s: %s",
                incident.kind,
                instance.id,
                record.name,
                "; parked: an operator resolves, migrates or terminates it" if incident.parked else "",
                incident.detail,
                extra=fields(instance, engine_id, name, incident=incident.kind, parked=incident.parked),
            )
    elif name == "Resolved":
        if INCIDENT.isEnabledFor(logging.INFO):
            INCIDENT.info(
                "%s (%r) resolved: %s",
                instance.id,
                record.name,
                event.resolution,
                extra=fields(instance, engine_id, name),
            )
    elif name == "Claimed":
        if CLAIM.isEnabledFor(logging.DEBUG):
            CLAIM.debug(
                "%s (%r) claimed by %s at incarnation %d (was %s): %s",
                instance.id,
                record.name,
                event.owner,
                event.incarnation,
                event.previous or "nobody",
                event.reason,
                extra=fields(instance, engine_id, name, incarnation=event.incarnation),
            )
    elif name in ("Completed", "Cancelled", "EvidenceRejected"):
        _ended(engine_id, instance, event)


def _stepped(engine_id: str, instance: Instance, event: Any) -> None:
    record = instance.record
    trigger = event.trigger.name if event.trigger is not None else None
    failures: Iterable[ActionFailed] = (e for e in event.effects if isinstance(e, ActionFailed))
    if ACTION.isEnabledFor(logging.WARNING):
        for failure in failures:
            ACTION.warning(
                "instance %s of chart %r: %s",
                instance.id,
                record.name,
                failure.describe(),
                extra=fields(instance, engine_id, "Stepped", event=trigger, failure=failure),
            )
    if IGNORED.isEnabledFor(logging.WARNING):
        for ignored in event.effects:
            if isinstance(ignored, Ignored):
                IGNORED.warning(
                    "instance %s of chart %r ignored event %r: no transition of %s takes it "
                    "(no matching event name, or every guard was false); it was consumed and changed nothing",
                    instance.id,
                    record.name,
                    ignored.event,
                    ", ".join(map(str, (record.snapshot_parts or {}).get("configuration", ()))) or "no state",
                    extra=fields(instance, engine_id, "Stepped", event=ignored.event),
                )
    if STEP.isEnabledFor(logging.DEBUG):
        STEP.debug(
            "step of %s (%r) on %s, now version %d",
            instance.id,
            record.name,
            trigger or (f"timer {event.timer}" if event.timer else "start"),
            event.originator_version,
            extra=fields(instance, engine_id, "Stepped", event=trigger, version=event.originator_version),
        )


def _started(engine_id: str, instance: Instance) -> None:
    record = instance.record
    birth = record.birth
    if birth is None:
        BIRTH.info(
            "started %s of chart %r", instance.id, record.name, extra=fields(instance, engine_id, "Started")
        )
        return
    BIRTH.info(
        "%s %s %s %r as %s, attempt %d",
        "resumed" if birth.previous is not None else "born",
        record.kind.value,
        instance.id,
        record.name,
        birth.ref,
        birth.attempt,
        extra=fields(instance, engine_id, "Started", provenance=birth.provenance.value),
    )


def _embedded(engine_id: str, parent: Instance, facts: Any, name: str) -> None:
    """The birth of an embedded task: logged as a task with a stream logs its ``Started``."""
    ref = facts.ref
    BIRTH.info(
        "%s task %s %r as %s, attempt %d (embedded in its parent)",
        "resumed" if facts.previous is not None else "born",
        ref.child_id,
        facts.name,
        ref,
        facts.attempt,
        extra={
            "instance_id": str(ref.child_id),
            "chart": facts.name,
            "kind": "task",
            "root_id": str(facts.root),
            "owner": parent.record.owner,
            "engine_id": engine_id,
            "fact": name,
            "parent_id": str(ref.parent),
            "ref": str(ref),
            "generation": ref.generation,
            "attempt": facts.attempt,
            "provenance": facts.provenance.value,
        },
    )


def _ended(engine_id: str, instance: Instance, event: Any) -> None:
    name = type(event).__name__
    record = instance.record
    if name == "Completed":
        if STEP.isEnabledFor(logging.DEBUG):
            STEP.debug("%s (%r) completed", instance.id, record.name, extra=fields(instance, engine_id, name))
    elif name == "Cancelled":
        if STEP.isEnabledFor(logging.INFO):
            STEP.info(
                "%s (%r) cancelled: %s",
                instance.id,
                record.name,
                event.reason,
                extra=fields(instance, engine_id, name),
            )
    elif STEP.isEnabledFor(logging.INFO):
        STEP.info(
            "%s (%r) rejected %s: %s",
            instance.id,
            record.name,
            event.event.name,
            event.reason,
            extra=fields(instance, engine_id, name, event=event.event.name),
        )
