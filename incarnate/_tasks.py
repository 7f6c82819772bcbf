"""Tasks: named Python callables run as child instances.

A task child has the same identity, retry and exactly-once-consumption
rules as a chart child. Its body runs at least once per incarnation (again
after a crash before its outcome was committed, or on the new owner when
another engine took the instance over while it ran: the old owner's outcome
is then fenced), so it receives an idempotency key — the Ref and the
attempt — to deduplicate side effects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Literal, Protocol, TypeAlias
from uuid import UUID

import attrs

from aggregates import (
    Activation,
    ActivationState,
    Instance,
    InstanceKind,
    InstanceRecord,
    InstanceStatus,
    Ref,
)
from incarnate import _tracing
from incarnate._process import Decision, traceback_text
from incarnate._work import UnitOfWork, Workshop
from incarnate.errors import EngineError, LoopGone
from statechart import JsonValue
from statechart.codec import check_json
from statechart.event import done_invoke_event, error_invoke_event

log = logging.getLogger("incarnate.tasks")


@attrs.frozen
class TaskCall:
    """What a task receives: its input and the identity of this incarnation."""

    instance_id: UUID
    ref: Ref
    attempt: int
    input: JsonValue

    @property
    def idempotency_key(self) -> str:
        """Stable across re-runs of this incarnation, different for every retry."""
        return (
            f"{self.ref.parent}/{self.ref.site}/{self.ref.key}/{self.ref.generation}/attempt-{self.attempt}"
        )


TaskFunction: TypeAlias = Callable[[TaskCall], JsonValue | Awaitable[JsonValue]]


class TaskHost(Workshop, Protocol):
    """What running a task and committing its outcome use of the commit path, and nothing more."""

    @property
    def tasks(self) -> Mapping[str, TaskFunction]:
        """The registered task functions by name."""
        ...

    @property
    def task_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop async task bodies run on, if any."""
        ...

    def instance(self, instance_id: UUID, *, fresh: bool = True) -> Instance:
        """A private copy of a stored instance (``fresh=False``: the copy last committed here)."""
        ...

    def save_instances(self, *instances: Instance) -> None:
        """Save the instances' pending events in one atomic save."""
        ...

    def commit_along(
        self, uow: UnitOfWork, instance_id: UUID | None, *, along: bool, careful: bool
    ) -> Literal["committed", "conflict", "alone"]:
        """Commit and enact ``uow``, with the next macrostep of ``instance_id`` when it may be taken."""
        ...


class EmbeddingHost(TaskHost, Protocol):
    """What running an embedded task uses besides: the tasks due here and their Refs."""

    @property
    def embedded(self) -> dict[UUID, Ref]:
        """The embedded tasks whose bodies are due on this engine, by id (see ``CommitPath.embedded``)."""
        ...


def _call(fn: TaskFunction, call: TaskCall, loop: asyncio.AbstractEventLoop | None = None) -> JsonValue:
    """Run ``fn``; an awaitable result runs on ``loop`` when it is running, else on a fresh loop.

    On ``loop`` the coroutine runs as that loop's task while this runner
    thread waits for it. If the loop stops first (its application shut
    down), :class:`LoopGone` is raised and nothing is committed: like a crash
    before the outcome, the incarnation runs again later (at least once).
    """
    result = fn(call)
    if inspect.isawaitable(result):
        if loop is not None and loop.is_running() and not _on(loop):
            future = asyncio.run_coroutine_threadsafe(_await(result), loop)
            try:
                result = future.result()
            except concurrent.futures.CancelledError as error:
                raise LoopGone(f"the event loop stopped while task {call.idempotency_key} ran") from error
        else:
            result = asyncio.run(_await(result))
    return check_json(result, "task output")


def _on(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread runs ``loop`` (waiting on it here would deadlock)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


async def _await(awaitable: Awaitable[JsonValue]) -> JsonValue:
    return await awaitable


_Ran = tuple[JsonValue, dict[str, JsonValue] | None, str, Exception | None]
"""A body's run: its output, or its failure (error type and message), traceback and exception."""


def _run_body(
    engine: TaskHost,
    fn: TaskFunction,
    call: TaskCall,
    name: str,
    record: InstanceRecord | Callable[[], InstanceRecord],
) -> _Ran | None:
    """Run a task's body in its span; None when its event loop stopped first (it runs again later).

    An exception is the failure its parent is told of, logged once that is
    committed (a fenced outcome is no fact).
    """
    try:
        with _tracing.task_run(call.instance_id, record, engine.engine_id, call.attempt):
            return _call(fn, call, engine.task_loop), None, "", None
    except LoopGone as gone:
        log.info("task %s not finished: %s; it runs again later", name, gone)
        return None
    except Exception as error:  # noqa: BLE001 - a task's failure is data for its parent
        return None, {"error": type(error).__name__, "message": str(error)}, traceback_text(error), error


def run_task(engine: TaskHost, instance_id: UUID) -> Decision | None:
    """Run a born task child and commit its outcome with the parent's notification.

    The task is read from the store before its body runs, so a task another
    engine has taken over since this one last wrote it is never run here.
    When this engine also runs the parent, the parent's next macrostep — the
    one that hears of the outcome — commits in the same transaction.
    """
    instance = engine.instance(instance_id)  # the copy last committed here, if the store has nothing newer
    record = instance.record
    facts = record.birth
    if record.status is not InstanceStatus.BORN or facts is None:
        return None
    engine.check_holds(instance)  # never run a task this engine does not own
    fn = engine.tasks.get(record.name)
    if fn is None:
        instance.record_incident(
            "unknown-task",
            f"task {record.name!r} is not registered with this engine; register it and resolve the incident",
            park=True,
        )
        engine.save_instances(instance)
        return Decision("parked", f"unknown task {record.name!r}")
    call = TaskCall(instance_id, facts.ref, facts.attempt, record.input)
    ran = _run_body(engine, fn, call, record.name, record)
    if ran is None:
        return None
    output, failure, trace, raised = ran
    fresh = False  # this engine's last copies of the task and its parent; a stale one conflicts
    along = True  # step the parent in the same commit (not after that failed or was refused)
    for _ in range(20):
        uow = UnitOfWork(engine, fresh=fresh)
        task = uow.load(instance_id)
        if task is None or task.record.status is not InstanceStatus.BORN:
            return None
        # Taken over while the body ran: the outcome is not committed (Fenced); the new
        # owner runs this incarnation again (at least once, with the same idempotency key).
        uow.fence(task)
        now = engine.clock.now()
        if task.record.cancel is not None:
            uow.end_cancelled(task, now)
            kind = "cancelled"
        elif failure is not None:
            task.fail({**failure, "traceback": trace})  # the task keeps it; the parent is told what failed
            uow.tell_parent(task, now, error_invoke_event, failure)
            kind = "failed"
        else:
            task.complete(output)
            uow.tell_parent(task, now, done_invoke_event, output)
            kind = "completed"
        parent_id = task.record.parent.parent if task.record.parent is not None else None
        outcome = engine.commit_along(uow, parent_id, along=along, careful=fresh)
        if outcome == "conflict":
            fresh = True
            continue
        if outcome == "alone":
            along = False  # the parent's step is refused or fails on its own, later; the outcome stands
            continue
        if kind == "failed":
            _log_failure(
                engine, task.id, record.name, task.record.owner, call, raised, retried=_retried(engine, call)
            )
        return Decision(f"task-{kind}", record.name)
    return None


def run_embedded_task(engine: EmbeddingHost, task_id: UUID) -> Decision | None:
    """Run the body of an embedded task and commit its outcome as its parent's message.

    An embedded task has no stream of its own: its parent is read before
    the body runs (this engine must own it, and its activation must still
    hold this incarnation, running), and the outcome is a ``done.invoke``
    or ``error.invoke`` message from the task's id in its parent's inbox —
    consumed in the same commit when this engine steps the parent. A run
    whose activation has gone (the parent left the state, or a first run's
    outcome was committed) commits nothing; so does one fenced by a new
    owner, which runs the incarnation again (at least once, with the same
    idempotency key). A failure's traceback rides with the message
    (``Message.trace``), out of the chart's sight.
    """
    ref = engine.embedded.get(task_id)
    if ref is None:
        return None
    parent = engine.instance(ref.parent)  # the pre-body read: the store's copy, if newer than ours
    activation = _running(parent, ref)
    if activation is None or parent.record.status is InstanceStatus.PARKED or _told(parent, task_id):
        engine.embedded.pop(task_id, None)  # settled, or its outcome (a cancel, say) already waits
        return None
    engine.check_holds(parent)  # never run a task of a parent this engine does not own
    fn = engine.tasks.get(activation.name)
    if fn is None:
        parent.record_incident(
            "unknown-task",
            f"task {activation.name!r} (child {task_id}) is not registered with this engine; "
            "register it and resolve the incident",
            park=True,
        )
        engine.save_instances(parent)
        engine.embedded.pop(task_id, None)
        return Decision("parked", f"unknown task {activation.name!r}")
    slot = parent.record.slots.get((ref.site, ref.key))
    call = TaskCall(task_id, ref, activation.attempt, slot.get("input") if slot is not None else None)
    owner, root, ancestry, traceparent = (
        parent.record.owner,
        parent.record.root,
        parent.record.ancestry,
        activation.traceparent,  # the span of the step that decided this incarnation
    )

    def record() -> InstanceRecord:  # what its span says of it, made only when spans are recorded
        return InstanceRecord(
            InstanceKind.TASK,
            activation.name,
            "",
            call.input,
            owner,
            root,
            ref,
            None,
            ancestry,
            traceparent=traceparent,
        )

    ran = _run_body(engine, fn, call, activation.name, record)
    if ran is None:
        return None
    output, failure, trace, raised = ran
    fresh = False
    along = True
    for _ in range(20):
        uow = UnitOfWork(engine, fresh=fresh)
        parent = uow.load(ref.parent)  # type: ignore[assignment]  # None: gone, handled below
        if (
            parent is None
            or parent.record.status.finished
            or _running(parent, ref) is None
            or _told(parent, task_id)
        ):
            engine.embedded.pop(task_id, None)  # settled, cancelled, or its outcome already told
            return None
        uow.fence(parent)  # the task's owner is its parent's: a stale owner's outcome is refused
        now = engine.clock.now()
        if failure is not None:
            event = error_invoke_event(ref.invoke_id, failure)
            kind = "failed"
        else:
            event = done_invoke_event(ref.invoke_id, output)
            kind = "completed"
        parent.accept(event, source=task_id, sent_at=now, trace=trace if failure is not None else None)
        uow.follow(parent.id)
        outcome = engine.commit_along(uow, parent.id, along=along, careful=fresh)
        if outcome == "conflict":
            fresh = True
            continue
        if outcome == "alone":
            along = False
            continue
        engine.embedded.pop(task_id, None)
        if kind == "failed":
            _log_failure(
                engine, task_id, activation.name, owner, call, raised, retried=_retried(engine, call)
            )
        return Decision(f"task-{kind}", activation.name)
    return None


def _told(parent: Instance, task_id: UUID) -> bool:
    """Whether the parent's inbox holds an outcome of the task already (a cancel, or a first run's)."""
    return any(message.source == task_id for message in parent.record.inbox)


def _running(parent: Instance, ref: Ref) -> Activation | None:
    """The parent's running embedded activation of ``ref``, if it still holds it."""
    activation = parent.record.activation(ref.site, ref.key)
    if (
        activation is None
        or activation.ref != ref
        or activation.state is not ActivationState.RUNNING
        or not activation.embedded
    ):
        return None
    return activation


def _retried(engine: TaskHost, call: TaskCall) -> bool:
    """Whether the site's retry policy has an attempt left after this one (the failure is then expected)."""
    try:
        parent = engine.instance(call.ref.parent, fresh=False)
    except EngineError:  # gone, or the store failed: log the failure in full
        return False
    chart = engine.charts.get(parent.record.name)
    site = chart.site_by_id.get(call.ref.site) if chart is not None else None
    return site is not None and call.attempt < site.retry.max_attempts


def _log_failure(
    engine: TaskHost,
    task_id: UUID,
    name: str,
    owner: str,
    call: TaskCall,
    error: Exception | None,
    *,
    retried: bool,
) -> None:
    """The committed failure of a task run (WARNING, ``incarnate.tasks``).

    A failure its parent retries is expected: one line, and its traceback
    at DEBUG. A failure that is not retried carries its traceback.
    """
    if not log.isEnabledFor(logging.WARNING):
        return
    fields = {
        "instance_id": str(task_id),
        "chart": name,
        "ref": str(call.ref),
        "parent_id": str(call.ref.parent),
        "generation": call.ref.generation,
        "attempt": call.attempt,
        "owner": owner,
        "engine_id": engine.engine_id,
        "fact": "Failed",
    }
    if retried and log.isEnabledFor(logging.DEBUG):
        log.debug(
            "traceback of attempt %d of %s", call.attempt, call.idempotency_key, exc_info=error, extra=fields
        )
    log.warning(
        "task %s (%s) failed%s: %s",
        name,
        call.idempotency_key,
        f" on attempt {call.attempt}; it is retried" if retried else "",
        error,
        exc_info=None if retried else error,
        extra=fields,
    )
