"""Structured logs and OpenTelemetry spans of a call tree: a parent, a chart child and a failing task.

Spans are captured with the SDK's in-memory exporter on the global tracer
provider (set once for this module, shut down after it); log records with
``caplog``. Every scenario runs on each store.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from aggregates import Instance, InstanceStatus
from aggregates._codec import decode_event, encode_event
from incarnate import Engine, Storage, VirtualClock
from incarnate._tracing import traceparent_of
from projections import Checkpoint
from tests.scenarios.charts import KID
from tests.scenarios.observed import DECLINED, ORDER, charge, engine
from tests.stores import EngineFactory

otel_sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="the test extra installs opentelemetry-sdk")

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def provider() -> Iterator[TracerProvider]:
    """The SDK tracer provider the engine reports to (the global one, set once per process)."""
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        yield current
        return
    created = TracerProvider()
    trace.set_tracer_provider(created)
    yield created
    created.shutdown()  # later tests record nothing


@pytest.fixture
def spans(provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """An exporter that holds the spans finished during one test."""
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    provider.add_span_processor(processor)
    yield exporter
    exporter.shutdown()  # a shut-down exporter keeps nothing more
    exporter.clear()


def run_tree(
    make_engine: EngineFactory, clock: VirtualClock, engine_id: str = "A", *, embed: bool = True
) -> tuple[Engine, UUID]:
    """Start ``order``: its task fails twice (one retry), its kid waits; then an action raises on ``poke``.

    ``embed=False``: the task children have streams of their own.
    """
    a = observed(make_engine, engine_id, embed=embed)
    parent = a.start("order")
    a.run_until_idle()
    clock.advance(2.0)  # the retry's backoff is 1 s
    a.run_until_idle()
    a.send(parent, "poke")
    a.run_until_idle()
    return a, UUID(str(parent))


def observed(make_engine: EngineFactory, engine_id: str, *, embed: bool = True) -> Engine:
    """An engine over the test's store running the observed charts and task."""
    return make_engine([ORDER, KID], {"charge": charge}, engine_id=engine_id, embed_tasks=embed)


def children(a: Engine, parent: UUID) -> dict[str, list[Instance]]:
    """Every instance ever born of ``parent``, by site, in order of generation."""
    out: dict[str, list[Instance]] = {}
    for instance in a.instances():
        birth = instance.record.birth
        if birth is not None and birth.ref.parent == parent:
            out.setdefault(birth.ref.site, []).append(instance)
    for family in out.values():
        family.sort(key=lambda i: i.record.birth.ref.generation if i.record.birth else 0)
    return out


def of(records: list[logging.LogRecord], logger: str) -> list[logging.LogRecord]:
    return [r for r in records if r.name == logger]


def field(record: logging.LogRecord, name: str) -> Any:
    return record.__dict__.get(name)


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    found: int = span.context.span_id
    return found


def attribute(span: ReadableSpan, name: str) -> Any:
    return dict(span.attributes or {}).get(name)


# ------------------------------------------------------------------ logs


def test_births_retries_and_failures_are_logged_with_their_fields(
    make_engine: EngineFactory, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Each committed birth and retry (INFO) and task failure (WARNING, traceback unless retried) logs."""
    caplog.set_level(logging.DEBUG, logger="incarnate")
    a, parent = run_tree(make_engine, clock)
    kids = children(a, parent)
    [kid] = kids["courier"]
    first, second = kids["charge"]

    births = of(caplog.records, "incarnate.engine.birth")
    by_id = {field(r, "instance_id"): r for r in births}
    assert len(births) == 4 and all(r.levelno == logging.INFO for r in births)
    root = by_id[str(parent)]
    assert (field(root, "chart"), field(root, "ref"), field(root, "owner")) == ("order", None, "A")
    for child, attempt, provenance in ((kid, 1, "birth"), (first, 1, "birth"), (second, 2, "retry")):
        record = by_id[str(child.id)]
        birth = child.record.birth
        assert birth is not None
        assert field(record, "parent_id") == str(parent)
        assert field(record, "ref") == str(birth.ref)
        assert field(record, "generation") == birth.ref.generation
        assert (field(record, "attempt"), field(record, "provenance")) == (attempt, provenance)
        assert (field(record, "engine_id"), field(record, "owner"), field(record, "root_id")) == (
            "A",
            "A",
            str(parent),
        )
    assert field(by_id[str(kid.id)], "chart") == "kid"
    assert field(by_id[str(first.id)], "kind") == "task"

    [retry] = of(caplog.records, "incarnate.engine.retry")
    assert retry.levelno == logging.INFO
    assert (field(retry, "instance_id"), field(retry, "attempt"), field(retry, "chart")) == (
        str(first.id),
        2,
        "charge",
    )
    assert field(retry, "error") == {"error": "RuntimeError", "message": DECLINED}

    failures = [r for r in of(caplog.records, "incarnate.tasks") if r.levelno == logging.WARNING]
    assert [field(r, "attempt") for r in failures] == [1, 2]
    assert [field(r, "instance_id") for r in failures] == [str(first.id), str(second.id)]
    assert all(DECLINED in record.getMessage() for record in failures)
    retried, final = failures
    # the retried attempt's failure is expected: one line, its traceback at DEBUG
    assert "it is retried" in retried.getMessage() and retried.exc_info is None
    [traceback] = [r for r in of(caplog.records, "incarnate.tasks") if r.levelno == logging.DEBUG]
    assert traceback.exc_info is not None and traceback.exc_info[0] is RuntimeError
    assert final.exc_info is not None and final.exc_info[0] is RuntimeError


def test_steps_and_a_failing_action_are_logged_after_their_commit(
    make_engine: EngineFactory, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Every committed macrostep is a DEBUG record naming its event; a raising action is one WARNING."""
    caplog.set_level(logging.DEBUG, logger="incarnate")
    a, parent = run_tree(make_engine, clock)
    steps = [r for r in of(caplog.records, "incarnate.engine.step") if field(r, "instance_id") == str(parent)]
    assert all(r.levelno == logging.DEBUG for r in steps)
    assert [field(r, "event") for r in steps] == [
        None,
        "error.invoke.charge",
        "retry.invoke.charge",
        "error.invoke.charge",
        "poke",
    ]
    assert [field(r, "version") for r in steps] == sorted(field(r, "version") for r in steps)
    [action] = of(caplog.records, "incarnate.engine.action")
    assert action.levelno == logging.WARNING
    assert (field(action, "instance_id"), field(action, "chart"), field(action, "event")) == (
        str(parent),
        "order",
        "poke",
    )
    assert "assign explode raised ValueError: the price list is unreachable" in action.getMessage()
    assert a.instance(parent).record.status is InstanceStatus.RUNNING


def test_a_parking_incident_is_an_error_and_a_take_over_is_info(
    make_engine: EngineFactory, clock: VirtualClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A fresh engine logs its take-over (INFO, naming the owners) and a parking incident at ERROR."""
    a, parent = run_tree(make_engine, clock)
    caplog.set_level(logging.DEBUG, logger="incarnate")
    b = make_engine([], engine_id="B")  # the charts are not registered: the tree parks
    b.take_over(parent, reason="A is gone")
    [took] = [r for r in of(caplog.records, "incarnate.ownership") if r.levelno == logging.INFO]
    assert (field(took, "engine_id"), field(took, "instance_id"), field(took, "chart")) == (
        "B",
        str(parent),
        "order",
    )
    assert field(took, "previous_owners") == ["A"] and field(took, "claimed") == 2  # the parent and its kid
    claims = [r for r in of(caplog.records, "incarnate.ownership") if r.levelno == logging.DEBUG]
    assert {field(r, "instance_id") for r in claims} == {
        str(parent),
        str(children(a, parent)["courier"][0].id),
    }
    incidents = of(caplog.records, "incarnate.engine.incident")
    parked = [r for r in incidents if field(r, "parked")]
    assert parked and all(r.levelno == logging.ERROR for r in parked)
    assert {field(r, "incident") for r in parked} == {"unknown-chart"}
    [recovery] = [r for r in of(caplog.records, "incarnate.recovery") if r.levelno == logging.WARNING]
    assert field(recovery, "root_id") == str(parent) and field(recovery, "engine_id") == "B"


def test_a_unit_of_work_that_is_not_committed_logs_no_fact(
    make_engine: EngineFactory, caplog: pytest.LogCaptureFixture, spans: InMemorySpanExporter
) -> None:
    """A crash before the save logs no birth or step, and the step's span ends in error."""
    a = observed(make_engine, "A")

    def crash(point: str, uow: object) -> None:
        if point == "before-commit":
            raise RuntimeError("power cut")

    a.parts.commits.hooks.append(crash)
    caplog.set_level(logging.DEBUG, logger="incarnate")
    with pytest.raises(RuntimeError, match="power cut"):
        a.start("order")
    assert not [r for r in caplog.records if r.name.startswith("incarnate.engine")]
    [step] = spans.get_finished_spans()  # started for the births it decided
    assert step.status.status_code is StatusCode.ERROR and "power cut" in str(step.status.description)


# ----------------------------------------------------------------- spans


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "streams"])
def test_step_and_task_spans_link_parent_to_child(
    make_engine: EngineFactory, clock: VirtualClock, spans: InMemorySpanExporter, embed: bool
) -> None:
    """A child's steps and a task's runs are spans whose parent is the step span that gave them birth.

    An embedded task's birth carries the trace context a task with a stream keeps on its ``Started``.
    """
    a, parent = run_tree(make_engine, clock, embed=embed)
    kids = children(a, parent)
    [kid] = kids["courier"]
    first, second = kids["charge"]
    finished = spans.get_finished_spans()
    steps = [s for s in finished if s.name == "incarnate.step"]
    parent_steps = [s for s in steps if attribute(s, "incarnate.instance_id") == str(parent)]
    assert [attribute(s, "incarnate.event") for s in parent_steps] == [
        None,
        "error.invoke.charge",
        "retry.invoke.charge",
        "error.invoke.charge",
        "poke",
    ]
    birth_step, _, retry_step, _, poke_step = parent_steps
    assert all(attribute(s, "incarnate.chart") == "order" for s in parent_steps)

    # The kid's first step continues the trace of the step that decided its birth.
    [kid_step] = [s for s in steps if attribute(s, "incarnate.instance_id") == str(kid.id)]
    assert kid_step.parent is not None and kid_step.parent.span_id == span_id(birth_step)
    assert kid_step.context is not None and birth_step.context is not None
    assert kid_step.context.trace_id == birth_step.context.trace_id
    assert kid.record.traceparent == traceparent_of(birth_step)
    assert attribute(kid_step, "incarnate.generation") == kid.record.birth.ref.generation  # type: ignore[union-attr]
    assert attribute(kid_step, "incarnate.attempt") == 1

    # Each task run is a span under the step that decided its incarnation, failed with the exception.
    tasks = [s for s in finished if s.name == "incarnate.task"]
    assert [attribute(s, "incarnate.instance_id") for s in tasks] == [str(first.id), str(second.id)]
    assert [attribute(s, "incarnate.attempt") for s in tasks] == [1, 2]
    assert [s.parent.span_id for s in tasks if s.parent is not None] == [
        span_id(birth_step),
        span_id(retry_step),
    ]
    for task in tasks:
        assert task.status.status_code is StatusCode.ERROR
        [exception] = [e for e in task.events if e.name == "exception"]
        assert dict(exception.attributes or {})["exception.message"] == DECLINED

    # The raising action shows on its step's span.
    assert poke_step.status.status_code is StatusCode.ERROR
    [exception] = [e for e in poke_step.events if e.name == "exception"]
    assert dict(exception.attributes or {})["exception.type"] == "ValueError"
    assert "price list" in str(dict(exception.attributes or {})["exception.message"])


def test_an_embedded_tasks_trace_context_is_in_its_parents_checkpoint(
    make_engine: EngineFactory, spans: InMemorySpanExporter
) -> None:
    """Before the task runs, its activation holds the birth step's context, and the plan rebuilds it."""
    a = observed(make_engine, "A")
    parent = a.start("order").id
    [activation] = [x for x in a.instance(parent).record.activations if x.kind.value == "task"]
    [birth_step] = [s for s in spans.get_finished_spans() if s.name == "incarnate.step"]
    assert activation.embedded and activation.traceparent == traceparent_of(birth_step)
    assert a.plan(parent) == Checkpoint.of(a.instance(parent), ORDER)
    assert a.instance(activation.child_id).record.traceparent == activation.traceparent


def test_a_roots_first_step_continues_the_callers_span(
    make_engine: EngineFactory, spans: InMemorySpanExporter
) -> None:
    """``start`` called inside a span (a web request's) makes the root's first step a child of it."""
    a = observed(make_engine, "A")
    with trace.get_tracer("tests").start_as_current_span("request") as request:
        parent = a.start("order")
    first = next(s for s in spans.get_finished_spans() if s.name == "incarnate.step")
    assert attribute(first, "incarnate.instance_id") == str(parent)
    assert first.parent is not None and first.parent.span_id == request.get_span_context().span_id


def test_an_idle_instance_makes_no_span(
    make_engine: EngineFactory, clock: VirtualClock, spans: InMemorySpanExporter
) -> None:
    """Processing an instance with nothing to do records no step span."""
    a, parent = run_tree(make_engine, clock)
    spans.clear()
    assert a.process(parent) is None
    assert spans.get_finished_spans() == ()


def test_a_fresh_engine_continues_the_childs_trace_after_a_restart(
    make_engine: EngineFactory, clock: VirtualClock, spans: InMemorySpanExporter
) -> None:
    """After a restart, the kid's next step (on a fresh engine) is a child of its birth's span."""
    a, parent = run_tree(make_engine, clock)
    [kid] = children(a, parent)["courier"]
    traceparent = kid.record.traceparent
    assert traceparent is not None
    spans.clear()
    b = observed(make_engine, "B")
    b.resume_all()
    b.send(kid.id, "finish")
    b.run_until_idle()
    finished = spans.get_finished_spans()
    [kid_step] = [s for s in finished if attribute(s, "incarnate.instance_id") == str(kid.id)]
    assert kid_step.parent is not None
    assert f"{kid_step.parent.span_id:016x}" == traceparent.split("-")[2]
    assert kid_step.context is not None and f"{kid_step.context.trace_id:032x}" == traceparent.split("-")[1]
    assert attribute(kid_step, "incarnate.engine_id") == "B"
    assert b.instance(parent).record.status is InstanceStatus.DONE


@pytest.mark.slow
def test_another_process_continues_the_childs_trace(tmp_path: Path, spans: InMemorySpanExporter) -> None:
    """A fresh OS process running the kid reports its step span under the birth's span of the first one."""
    database = str(tmp_path / "observed.db")
    clock = VirtualClock(1_700_000_000.0)
    with engine(Storage.sqlite(database), "A", clock) as a:
        parent = a.start("order")
        a.run_until_idle()
        [kid] = [c for c in a.children(parent) if c.record.name == "kid"]
    finished = spans.get_finished_spans()
    birth_step = next(
        s
        for s in finished
        if s.name == "incarnate.step" and attribute(s, "incarnate.instance_id") == str(parent)
    )  # the first one: it decided the kid's birth
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.scenarios.observed", database, str(kid.id)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
        process.wait(timeout=10)
    assert process.returncode == 0, err
    reported = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    [kid_step] = [s for s in reported if s["instance_id"] == str(kid.id) and s["name"] == "incarnate.step"]
    assert birth_step.context is not None
    assert kid_step["parent_span_id"] == f"{span_id(birth_step):016x}" and kid_step["remote_parent"] is True
    assert kid_step["trace_id"] == f"{birth_step.context.trace_id:032x}"


# ------------------------------------------------- without the otel extra


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter from the repository root (bounded in time)."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )


@pytest.mark.slow
def test_nothing_of_opentelemetry_is_imported_with_the_package() -> None:
    """``import incarnate`` imports no OpenTelemetry module (it is imported on the first macrostep)."""
    result = run_python(
        "import sys, incarnate; print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
def test_a_call_tree_runs_without_opentelemetry_installed() -> None:
    """Without OpenTelemetry importable, a parent, its kid and its failing task run as usual, unmarked."""
    result = run_python(
        """
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from incarnate import Storage, VirtualClock
from incarnate._tracing import enabled
from tests.scenarios.observed import engine
clock = VirtualClock(1000.0)
with engine(Storage.popo("no-otel"), "A", clock) as a:
    parent = a.start("order")
    a.run_until_idle()
    clock.advance(2.0)
    a.run_until_idle()
    kids = [c for c in a.instances() if c.record.parent is not None]
    assert not enabled()
    assert len(kids) == 3, kids
    assert all(c.record.traceparent is None for c in kids)
    assert a.snapshot(parent).context.note, "the task's final failure reached the parent"
print("ok")
"""
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_started_event_stored_without_traceparent_still_decodes() -> None:
    """A ``Started`` event stored before traces existed (no ``traceparent`` key) decodes with none."""
    from aggregates import InstanceKind

    instance = Instance.start_root(
        id=UUID(int=7), kind=InstanceKind.CHART, name="order", fingerprint="f", input=None, owner="A"
    )
    [started] = instance.collect_events()
    data = encode_event(started)
    del data["traceparent"]
    decoded = decode_event(data, Instance.Started)
    assert decoded.traceparent is None
    assert decoded.mutate(None).record == instance.record
