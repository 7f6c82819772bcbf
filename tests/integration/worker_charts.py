"""Charts and tasks the worker tests run in separate processes (``--charts``/``--tasks`` import paths).

``gate`` waits for an ``answer`` sent from anywhere. ``job`` runs the task
``work`` once and completes with its output; ``errand`` waits for ``go``
and then runs ``work`` (so the worker that steps it, not the process that
started it, decides the task's birth); ``work`` appends one line per
run to the file named by ``WORKER_TEST_RUNS`` (if set), so a test can count
how often each task ran across processes.
"""

from __future__ import annotations

import os
from typing import Any

import attrs

from incarnate import TaskCall
from statechart import Chart, JsonValue, final, invoke, state, transition

GATE = Chart("gate", state("waiting", on=[transition("answer", "answered")]), final("answered"))


@attrs.frozen
class Job:
    """A job's number."""

    n: int = 0


JOB = Chart(
    "job",
    state(
        "working",
        invoke=[invoke("work", task="work", input=lambda job: {"n": job.n})],
        on=[transition("done.invoke.work", "done")],
    ),
    final("done", done_data=lambda job, event: event.data),
    context=Job,
)

ERRAND = Chart(
    "errand",
    state("waiting", on=[transition("go", "working")]),
    state(
        "working",
        invoke=[invoke("work", task="work", input={"n": 7})],
        on=[transition("done.invoke.work", "done")],
    ),
    final("done", done_data=lambda context, event: event.data),
)

CHARTS: list[Chart[Any]] = [GATE, JOB, ERRAND]

RUNS_VARIABLE = "WORKER_TEST_RUNS"


def work(call: TaskCall) -> JsonValue:
    """Record this run (one line: the task instance id and the process id), and return the input."""
    path = os.environ.get(RUNS_VARIABLE)
    if path:
        with open(path, "a", encoding="utf-8") as runs:
            runs.write(f"{call.instance_id} {os.getpid()}\n")
    return call.input


TASKS = {"work": work}
