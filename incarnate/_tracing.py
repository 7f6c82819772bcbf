"""Optional OpenTelemetry tracing: one span per macrostep and per task run, linked over the call tree.

When ``opentelemetry-api`` is installed (``pip install incarnate[otel]``),
the engine reports to the global tracer provider the application set up:

- ``incarnate.step``: one span per committed macrostep (or ending) of a
  chart instance, from the decision to its commit;
- ``incarnate.task``: one span per run of a task's body.

A child's birth stores the W3C ``traceparent`` of the step span that
decided it, with the child's first event (``Started``); every span of the
child, on whichever engine or process runs it, later or after a restart,
takes that stored context as its parent. A call tree is thus one trace: a
step's spans hold the spans of the children it gave birth to.

Without the package nothing of it is imported and every function here is a
cheap no-op; it is imported on the first macrostep, not when ``incarnate``
is. A step span is started lazily: an instance that turns out to have
nothing to do produces no span.

Only this module imports OpenTelemetry; the engine calls the functions
below around ``decide`` and the commit.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any
from uuid import UUID

from aggregates import Instance, InstanceRecord, Ref
from statechart.effects import ActionFailed

TRACER_NAME = "incarnate"
STEP_SPAN = "incarnate.step"
TASK_SPAN = "incarnate.task"

_api: Any = None
"""The ``opentelemetry.trace`` module once imported; False when it is not installed."""
_tracer: Any = None
"""The engine's tracer (it follows the global provider, even one set after it was made)."""


def _trace() -> Any:
    """``opentelemetry.trace``, imported on first use; None when the package is absent."""
    global _api  # noqa: PLW0603 - one import attempt per process
    if _api is None:
        try:
            from opentelemetry import trace
        except ImportError:
            _api = False
        else:
            _api = trace
    return _api or None


def _get_tracer() -> Any:
    global _tracer  # noqa: PLW0603 - one tracer per process, like the global provider
    if _tracer is None:
        _tracer = _trace().get_tracer(TRACER_NAME)
    return _tracer


def enabled() -> bool:
    """Whether OpenTelemetry's API is installed (spans go to whatever provider is set)."""
    return _trace() is not None


@functools.cache
def _named_by_environment() -> bool:
    """Whether ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider, read once: the API reads it on every
    ``get_tracer_provider()`` call, and a lookup of an absent variable raises and catches a KeyError."""
    return "OTEL_PYTHON_TRACER_PROVIDER" in os.environ


def _recording() -> bool:
    """Whether an application has set a tracer provider (without one every span is a no-op: skip them)."""
    trace = _trace()
    if trace is None:
        return False
    # None set in code (the API's global) and none named by the environment: spans would be no-ops.
    if getattr(trace, "_TRACER_PROVIDER", True) is None and not _named_by_environment():
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider | trace.NoOpTracerProvider)


def traceparent_of(span: Any) -> str | None:
    """The W3C ``traceparent`` header value of a span; None for a span that records nothing."""
    context = span.get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def _parent(traceparent: str | None) -> Any:
    """The OpenTelemetry context a stored ``traceparent`` names (None: the current context)."""
    if not traceparent:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _attributes(
    instance_id: UUID, record: InstanceRecord, engine_id: str, attempt: int | None = None
) -> dict[str, Any]:
    """A span's attributes; a child's without its birth facts (an embedded task) take its Ref from
    ``record.parent`` and ``attempt`` as given."""
    attributes: dict[str, Any] = {
        "incarnate.instance_id": str(instance_id),
        "incarnate.root_id": str(record.root),
        "incarnate.engine_id": engine_id,
        ("incarnate.chart" if record.kind.value == "chart" else "incarnate.task"): record.name,
    }
    birth = record.birth
    ref: Ref | None = None
    if birth is not None:
        ref, attempt = birth.ref, birth.attempt
    elif isinstance(record.parent, Ref):
        ref = record.parent
    if ref is not None:
        attributes.update(
            {
                "incarnate.parent_id": str(ref.parent),
                "incarnate.ref": str(ref),
                "incarnate.site": ref.site,
                "incarnate.key": ref.key,
                "incarnate.generation": ref.generation,
                "incarnate.attempt": attempt,
            }
        )
    return attributes


class _Step:
    """A macrostep being decided; its span starts when first needed (a birth) or once decided."""

    def __init__(self, tracer: Any, instance_id: UUID, record: InstanceRecord, engine_id: str) -> None:
        self.tracer = tracer
        self.instance_id = instance_id
        self.record = record
        self.engine_id = engine_id
        self.started_at = time.time_ns()
        self.span: Any = None

    def ensure(self) -> Any:
        if self.span is None:
            self.span = self.tracer.start_span(
                STEP_SPAN,
                context=_parent(self.record.traceparent),
                attributes=_attributes(self.instance_id, self.record, self.engine_id),
                start_time=self.started_at,
            )
        return self.span

    def end(self) -> None:
        if self.span is not None:
            self.span.end()
            self.span = None


_step: ContextVar[_Step | None] = ContextVar("incarnate_step", default=None)


def begin_step(instance_id: UUID, record: InstanceRecord, engine_id: str) -> None:
    """A macrostep of ``instance_id`` is being decided on this thread (no span yet)."""
    if not _recording():
        return
    _end_pending()
    _step.set(_Step(_get_tracer(), instance_id, record, engine_id))


def traceparent() -> str | None:
    """The ``traceparent`` of the step being decided, for a birth it decides (None without tracing)."""
    step = _step.get()
    if step is None:
        return None
    return traceparent_of(step.ensure())


def decided(kind: str, detail: str, events: Sequence[object]) -> None:
    """The step was decided (``kind`` as in :class:`~incarnate._process.Decision`); its commit follows.

    ``events`` are the instance's pending events: the ``Stepped`` one names
    the statechart event, and a failing action or guard in its effects is an
    ``exception`` event on the span, whose status is then ERROR, as it is
    for a macrostep that failed the instance.
    """
    step = _step.get()
    if step is None:
        return
    span = step.ensure()
    span.set_attribute("incarnate.decision", kind)
    failures: list[ActionFailed] = []
    for event in events:
        if isinstance(event, Instance.Stepped):
            if event.trigger is not None:
                span.set_attribute("incarnate.event", event.trigger.name)
            failures.extend(e for e in event.effects if isinstance(e, ActionFailed))
    for failure in failures:
        span.add_event(
            "exception",
            {
                "exception.type": failure.error,
                "exception.message": failure.message,
                "incarnate.state": failure.state,
                "incarnate.action": failure.action,
                "incarnate.transition": failure.transition or "",
            },
        )
    if kind == "failed" or failures:
        description = detail if kind == "failed" else failures[0].describe()
        trace = _trace()
        span.set_status(trace.Status(trace.StatusCode.ERROR, description))


def idle() -> None:
    """The instance had nothing to do: no span."""
    _end_pending()


def abandoned(error: BaseException) -> None:
    """Deciding or committing raised: the span (if started) records the exception and ends."""
    step = _step.get()
    if step is None:
        return
    _step.set(None)
    if step.span is not None:
        step.span.record_exception(error)
        trace = _trace()
        step.span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        step.end()


def conflicted() -> None:
    """The commit lost a race with another writer: the step is decided again (a new span)."""
    step = _step.get()
    if step is None:
        return
    _step.set(None)
    if step.span is not None:
        step.span.set_attribute("incarnate.conflict", True)
        step.end()


def committed() -> None:
    """The step's unit of work is saved: its span ends."""
    _end_pending()


def _end_pending() -> None:
    step = _step.get()
    if step is not None:
        _step.set(None)
        step.end()


def task_run(
    instance_id: UUID, record: InstanceRecord | Callable[[], InstanceRecord], engine_id: str, attempt: int
) -> contextlib.AbstractContextManager[None]:
    """A span around one run (``attempt``) of a task's body; an exception is recorded on it and propagates.

    ``record`` may be given as a function that makes it: it is called only
    when spans are recorded (an embedded task has no record of its own).
    """
    if not _recording():
        return _NOTHING
    return _task_span(instance_id, record, engine_id, attempt)


_NOTHING = contextlib.nullcontext()


@contextlib.contextmanager
def _task_span(
    instance_id: UUID, record: InstanceRecord | Callable[[], InstanceRecord], engine_id: str, attempt: int
) -> Iterator[None]:
    if callable(record):
        record = record()
    with _get_tracer().start_as_current_span(
        TASK_SPAN,
        context=_parent(record.traceparent),
        attributes=_attributes(instance_id, record, engine_id, attempt),
        record_exception=True,
        set_status_on_exception=True,
    ):
        yield
