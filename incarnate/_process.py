"""Deciding one unit of work for one instance: the macrostep and everything it commits.

``decide`` reads the instance, computes exactly one macrostep with the pure
interpreter (or one ending), and turns its effects into events on the
instance, on its new children, on the instances it cancels or messages and
on its parent — all pending in one :class:`UnitOfWork`, not yet saved. It
needs of the engine only what :class:`~incarnate._work.Workshop` names.
"""

from __future__ import annotations

import traceback
from typing import assert_never

from aggregates import (
    AncestryFrame,
    BirthFacts,
    Instance,
    InstanceKind,
    InstanceStatus,
    Message,
    Provenance,
    Ref,
    Settlement,
)
from aggregates.errors import InputMismatch
from incarnate import _tracing
from incarnate._work import UnitOfWork, Workshop
from statechart import Chart, Event, JsonValue, fire, start, step, stop
from statechart.effects import (
    ActionFailed,
    ArmTimer,
    BirthChild,
    CancelChild,
    CancelTimer,
    Completed,
    Effect,
    Ignored,
    Logged,
    RejectedEvent,
    ResumeChild,
    RetryChild,
    SendHttp,
    SendToChild,
    SendToParent,
    Stopped,
)
from statechart.errors import CodecError, StepError
from statechart.event import (
    EventKind,
    InvokeId,
    child_message_event,
    detach,
    done_invoke_event,
    error_invoke_event,
)
from statechart.snapshot import SlotChanges, SlotStatus, Snapshot, Status, slot_changes

PARENT_TYPE = "Instance"


class Decision:
    """What ``decide`` did: a summary for logs, tests and the timeline."""

    def __init__(self, kind: str, detail: str = "") -> None:
        self.kind = kind
        self.detail = detail

    def __repr__(self) -> str:
        return f"<Decision {self.kind} {self.detail}>"


def decide(workshop: Workshop, uow: UnitOfWork, instance: Instance, *, careful: bool) -> Decision | None:
    """Put the next macrostep (or ending) of ``instance`` into ``uow``; None when idle.

    ``careful`` re-checks that children about to be born do not exist yet
    (used after a commit conflict, so a re-delivered birth is recognised).
    With tracing, the step's span (``incarnate.step``) ends when the
    engine's commit of ``uow`` does.
    """
    _tracing.begin_step(instance.id, instance.record, workshop.engine_id)
    try:
        decision = _decide(workshop, uow, instance, careful=careful)
    except BaseException as error:
        _tracing.abandoned(error)
        raise
    if decision is None:
        _tracing.idle()
    else:
        _tracing.decided(decision.kind, decision.detail, instance.pending_events)
    return decision


def _decide(workshop: Workshop, uow: UnitOfWork, instance: Instance, *, careful: bool) -> Decision | None:
    record = instance.record
    if record.status.finished or record.status is InstanceStatus.PARKED:
        return None
    if record.kind is InstanceKind.TASK:
        if record.cancel is not None:
            uow.end_cancelled(instance, workshop.clock.now())
            return Decision("cancelled", record.cancel.reason)
        return None  # tasks are run by the runner, see incarnate._tasks
    chart = workshop.charts.get(record.name)
    if chart is None:
        instance.record_incident(
            "unknown-chart",
            f"chart {record.name!r} is not registered with this engine; register it and resolve the incident",
            park=True,
        )
        return Decision("parked", f"unknown chart {record.name!r}")
    now = workshop.clock.now()
    if record.cancel is not None:
        return _cancel(workshop, uow, instance, chart, now)
    try:
        if record.status is InstanceStatus.BORN:
            lineage = tuple(frame.group for frame in record.ancestry)
            snapshot, effects = start(
                chart, input=record.input, now=now, lineage=lineage, **_session(workshop, instance)
            )
            instance.record_step(
                trigger=None,
                consumed=None,
                timer=None,
                delta=workshop.encode_delta(chart, None, snapshot),
                effects=effects,
                now=now,
            )
            _apply(workshop, uow, instance, chart, None, snapshot, effects, now, careful=careful)
            return Decision("started")
        current = workshop.decode(chart, instance)
        due = next((t for t in current.timers if t.deadline <= now), None)
        message = record.inbox[0] if record.inbox else None
        if due is not None and (message is None or due.deadline <= message.sent_at):
            snapshot, effects = fire(chart, current, due.id, now=now, **_session(workshop, instance))
            instance.record_step(
                trigger=due.event,
                consumed=None,
                timer=due.id,
                delta=workshop.encode_delta(chart, current, snapshot),
                effects=effects,
                now=now,
            )
            _apply(
                workshop,
                uow,
                instance,
                chart,
                current,
                snapshot,
                effects,
                now,
                careful=careful,
                trigger=due.event,
            )
            return Decision("timer", due.id)
        if message is None:
            return None
        event = _received(chart, current, message)
        snapshot, effects = step(chart, current, event, now=now, **_session(workshop, instance))
        if snapshot is current and len(effects) == 1 and isinstance(effects[0], RejectedEvent):
            instance.reject(message, effects[0].reason)
            return Decision("rejected", effects[0].reason)
        instance.record_step(
            trigger=event,
            consumed=message.seq,
            timer=None,
            delta=workshop.encode_delta(chart, current, snapshot),
            effects=effects,
            now=now,
        )
        _apply(
            workshop,
            uow,
            instance,
            chart,
            current,
            snapshot,
            effects,
            now,
            careful=careful,
            trigger=event,
        )
        return Decision("stepped", event.name)
    except (StepError, CodecError) as error:
        _fail_on_error(workshop, uow, instance, error, now)
        return Decision("failed", str(error))


MAX_TRACEBACK_CHARS = 8_000
"""The most of a failure's traceback stored with it: the end of it, where the error was raised."""


def traceback_text(error: BaseException) -> str:
    """``error``'s traceback as Python prints it, with its causes; at most :data:`MAX_TRACEBACK_CHARS`.

    A longer one keeps its end (the innermost frames and the error itself),
    after a first line saying how much was left out.
    """
    text = "".join(traceback.format_exception(error))
    if len(text) <= MAX_TRACEBACK_CHARS:
        return text
    tail = text[-MAX_TRACEBACK_CHARS:]
    return f"[the first {len(text) - len(tail)} characters of this traceback were left out]\n{tail}"


def _received(chart: Chart[object], current: Snapshot[object], message: Message) -> Event:
    """The event a macrostep processes for ``message``.

    A message from a child whose invocation this instance cancelled after
    accepting it (``detached``) is processed as an ordinary event (SCXML
    6.4: only the events that arrive after the cancellation are ignored),
    unless the slot holds another incarnation by now: evidence from an
    older generation than the slot's current one is stale, and goes to the
    interpreter as evidence, which rejects it (invariant 5). An event that
    arrives after the cancellation is never marked: it is rejected too.
    """
    event = message.event
    invoke_id = event.invoke_id
    if not message.detached or invoke_id is None or current.slot(invoke_id.site, invoke_id.key) is not None:
        return event
    return detach(chart, event)


def _fail_on_error(
    workshop: Workshop, uow: UnitOfWork, instance: Instance, error: Exception, now: float
) -> None:
    """A macrostep that cannot be computed fails the instance, loudly, with an incident.

    The instance's ``Failed`` keeps the traceback (an action's exception is
    the step error's cause); the parent is told the error and message only.
    """
    kind = "runaway-macrostep" if type(error).__name__ == "RunawayMacrostep" else "step-error"
    instance.record_incident(kind, str(error), park=False)
    detail: dict[str, JsonValue] = {"error": type(error).__name__, "message": str(error)}
    instance.fail({**detail, "traceback": traceback_text(error)})
    uow.tell_parent(instance, now, error_invoke_event, detail)


def _cancel(
    workshop: Workshop, uow: UnitOfWork, instance: Instance, chart: Chart[object], now: float
) -> Decision:
    record = instance.record
    request = record.cancel
    assert request is not None
    if record.status is not InstanceStatus.BORN:
        current = workshop.decode(chart, instance)
        if current.status is Status.RUNNING:
            snapshot, effects = stop(
                chart, current, now=now, reason=request.reason, **_session(workshop, instance)
            )
            instance.record_step(
                trigger=Event("cancel", request.reason, EventKind.PLATFORM),
                consumed=None,
                timer=None,
                delta=workshop.encode_delta(chart, current, snapshot),
                effects=effects,
                now=now,
            )
            _apply(workshop, uow, instance, chart, current, snapshot, effects, now, careful=False)
    uow.end_cancelled(instance, now)
    return Decision("cancelled", request.reason)


def _ref(instance: Instance, invoke_id: InvokeId) -> Ref:
    """The durable Ref of one of this instance's incarnations."""
    return Ref(instance.id, invoke_id.site, invoke_id.key, invoke_id.generation)


def _facts(
    instance: Instance, chart: Chart[object], effect: BirthChild | ResumeChild, armed_step: int
) -> BirthFacts:
    """The immutable birth facts of the incarnation a BirthChild or ResumeChild decided."""
    ref = _ref(instance, effect.invoke_id)
    site = chart.site_by_id[ref.site]
    ancestry = instance.record.ancestry
    if site.group is not None:
        ancestry = (*ancestry, AncestryFrame(site.group, ref))
    kind = InstanceKind.CHART if effect.chart is not None else InstanceKind.TASK
    name = effect.chart if effect.chart is not None else effect.task
    assert name is not None
    resumed = isinstance(effect, ResumeChild)
    return BirthFacts(
        PARENT_TYPE,
        ref,
        instance.record.root,
        kind,
        name,
        effect.state,
        effect.attempt,
        effect.input,
        ancestry,
        armed_step,
        Provenance.RETRY if resumed else Provenance.BIRTH,
        _ref(instance, effect.previous) if isinstance(effect, ResumeChild) else None,
    )


def _create_child(workshop: Workshop, uow: UnitOfWork, facts: BirthFacts, *, careful: bool) -> None:
    """Create the child of ``facts`` in the commit; a matching existing child is a no-op."""
    if careful:
        existing = uow.load(facts.child_id)
        if existing is not None:
            if existing.record.birth != facts:
                theirs = existing.record.birth
                raise InputMismatch(
                    facts.child_id,
                    facts.differences(theirs) if theirs is not None else ("the existing instance is a root",),
                )
            uow.follow(existing.id)
            return
    fingerprint = ""
    if facts.kind is InstanceKind.CHART:
        child_chart = workshop.charts.get(facts.name)
        fingerprint = child_chart.fingerprint if child_chart is not None else ""
    traceparent = _tracing.traceparent()  # the deciding step's span: the child's spans continue it
    uow.create(
        Instance.born(facts, fingerprint=fingerprint, owner=workshop.engine_id, traceparent=traceparent)
    )


def _incarnate(
    workshop: Workshop, uow: UnitOfWork, instance: Instance, facts: BirthFacts, *, careful: bool
) -> None:
    """Record a first incarnation (``Birth``) or a retry's (``ChildResume``) and create the child.

    A task child is embedded in ``instance`` when the engine embeds tasks:
    nothing is created, and its body is handed to the runner after the commit.
    """
    embedded = facts.kind is InstanceKind.TASK and workshop.embed_tasks
    # The deciding step's span, which an embedded task's spans continue (one with a stream keeps
    # it on its Started).
    traceparent = _tracing.traceparent() if embedded else None
    if facts.previous is None:
        instance.record_birth(facts, embedded=embedded, traceparent=traceparent)
    else:
        instance.record_resume(facts, embedded=embedded, traceparent=traceparent)
    if embedded:
        uow.embed(facts.ref)
    else:
        _create_child(workshop, uow, facts, careful=careful)


def _apply(
    workshop: Workshop,
    uow: UnitOfWork,
    instance: Instance,
    chart: Chart[object],
    before: Snapshot[object] | None,
    snapshot: Snapshot[object],
    effects: tuple[Effect, ...],
    now: float,
    *,
    careful: bool,
    trigger: Event | None = None,
) -> None:
    """Turn a macrostep's effects into events on this and the other instances.

    Activations that this macrostep ended are settled first, so that a slot
    re-entered in the same macrostep (a loop) can take its new Birth.
    ``before`` is the snapshot the macrostep started from (None for the first).
    """
    armed_step = snapshot.steps - 1
    retried = {effect.failed for effect in effects if isinstance(effect, RetryChild)}
    retried.update(effect.previous for effect in effects if isinstance(effect, ResumeChild))
    _settle(instance, snapshot, slot_changes(before, snapshot), trigger, retried)
    for effect in effects:
        match effect:
            case BirthChild():
                _incarnate(
                    workshop, uow, instance, _facts(instance, chart, effect, armed_step), careful=careful
                )
            case RetryChild():
                instance.record_retry(
                    _ref(instance, effect.failed), effect.attempt, effect.deadline, effect.error
                )
                uow.watch(effect.deadline, instance.id)
            case ResumeChild():
                _incarnate(
                    workshop, uow, instance, _facts(instance, chart, effect, armed_step), careful=careful
                )
            case CancelChild():
                ref = _ref(instance, effect.invoke_id)
                activation = instance.record.activation(ref.site, ref.key)
                if activation is not None and activation.ref == ref:
                    instance.record_settled(ref, Settlement.CANCELLED)
                    if activation.embedded:
                        continue  # nothing to tell: its outcome, if its body ends, finds no activation
                child = uow.load(ref.child_id)
                if child is not None and child.request_cancel(
                    instance.id, f"parent left state {snapshot_state(chart, ref.site)!r}"
                ):
                    uow.follow(child.id)
            case SendToChild():
                invoke_id = effect.invoke_id
                slot = instance.record.activation(invoke_id.site, invoke_id.key)
                if slot is not None and slot.embedded:
                    continue  # a task takes no events (one with a stream ignores them)
                child = uow.load(_ref(instance, invoke_id).child_id)
                if child is not None and not child.record.status.finished:
                    child.accept(effect.event, source=instance.id, sent_at=now)
                    uow.follow(child.id)
            case SendToParent():
                uow.tell_parent(instance, now, child_message_event, effect.event.name, effect.event.data)
            case SendHttp():
                uow.follow(instance.id)  # in the outbox with the macrostep; posted after the commit
            case ArmTimer():
                uow.watch(effect.timer.deadline, instance.id)
            case Completed():
                pass  # after every other effect: the parent hears of the children first (below)
            case CancelTimer() | Logged() | ActionFailed() | RejectedEvent() | Ignored() | Stopped():
                pass  # stored with the macrostep's snapshot and effects; nothing to enact
            case _:
                assert_never(effect)
    for effect in effects:
        if isinstance(effect, Completed):
            instance.complete(effect.output)
            uow.tell_parent(instance, now, done_invoke_event, effect.output)
    uow.decoded[instance.id] = snapshot


def _session(workshop: Workshop, instance: Instance) -> dict[str, str | None]:
    """What a macrostep knows of its instance's session: its id and its Basic HTTP location."""
    return {"session": str(instance.id), "http_location": workshop.http_location(instance.id)}


def snapshot_state(chart: Chart[object], site_id: str) -> str:
    """The state a site sits on."""
    return chart.ids[chart.site_state[site_id]]


def _settle(
    instance: Instance,
    snapshot: Snapshot[object],
    changes: SlotChanges,
    trigger: Event | None,
    retried: set[InvokeId],
) -> None:
    """Drop the activations whose slots ended in this macrostep.

    A slot whose outcome this macrostep consumed settles as done (or failed,
    for an exhausted ``error.invoke``) even when the chart then left the
    site's state in the same macrostep; any other slot that vanished was
    cancelled. Only the slots the macrostep touched can end (every other
    activation's slot is as live as it was), so this costs O(changed), in
    the activations' order.
    """
    consumed = trigger.invoke_id if trigger is not None else None
    touched = dict.fromkeys(changes.removed)
    touched.update(((slot.site, slot.key), None) for slot in (*changes.changed, *changes.added))
    if consumed is not None:
        touched[(consumed.site, consumed.key)] = None
    retained = instance.record.retained
    candidates = [key for key in touched if key in retained]
    candidates.sort(key=retained.position)
    for key in candidates:
        activation = retained.get(key)
        assert activation is not None
        if activation.ref.invoke_id in retried:
            continue  # ChildRetry / ChildResume carry it on
        slot = snapshot.slot(activation.site, activation.key)
        if consumed is not None and consumed == activation.ref.invoke_id and trigger is not None:
            if trigger.name.startswith("done.invoke."):
                instance.record_settled(activation.ref, Settlement.DONE)
                continue
            if trigger.name.startswith("error.invoke.") and (
                slot is None or slot.generation != activation.generation or slot.status is SlotStatus.FAILED
            ):
                instance.record_settled(activation.ref, Settlement.FAILED)
                continue
        if slot is None or slot.generation != activation.generation:
            instance.record_settled(activation.ref, Settlement.CANCELLED)
        elif slot.status is SlotStatus.DONE:
            instance.record_settled(activation.ref, Settlement.DONE)
        elif slot.status is SlotStatus.FAILED:
            instance.record_settled(activation.ref, Settlement.FAILED)
