"""The chart the fault suite loads its fleet with: a call tree that needs every kind of work.

``job`` fans out to two ``part`` children, then waits on a short timer, then
collects the ``ping`` events a client sends it from another process. A ping
is recorded in any state, so one accepted early waits in nothing but the
inbox; the job completes once its parts are done, its timer has fired and it
has collected ``expected`` pings, with every ping key and every part's
output in its output. Processing a ping twice would record its key twice.

A ``part`` runs the task ``effect`` (``chaos_charts``: it logs its side
effects by idempotency key), then rests through ``TICKS`` timers of
``TICK`` seconds each before it completes. No event from outside ever
reaches a part: if a unit of its work is lost (a timer that fired while the
store was down, a task outcome that could not be committed), nothing but the
engine's own liveness brings it back, and its tree strands.

Workers serve it with ``incarnate worker --charts
tests.integration.fault_charts:CHARTS --tasks
tests.integration.fault_charts:TASKS``.
"""

from __future__ import annotations

from typing import Any

import attrs

from statechart import Chart, Event, JsonValue, after, always, assign, final, invoke, state, transition
from tests.integration.chaos_charts import effect

PAUSE = 0.5
"""Seconds a job waits on its timer once its items are done."""
TICK = 0.6
"""Seconds of each of a part's timers."""
TICKS = 6
"""How many timers a part waits through after its task."""
PING = "ping"
"""The event a client sends a job; its data is ``{"key": <the send's idempotency key>}``."""


@attrs.frozen
class Part:
    """A part's name, its task's output, and how many of its timers fired."""

    name: str = ""
    output: JsonValue = None
    ticks: int = 0


def keep_output(part: Part, event: Event) -> Part:
    """Store the task's output."""
    return attrs.evolve(part, output=event.data)


def tick(part: Part, event: Event) -> Part:
    """Count one timer."""
    return attrs.evolve(part, ticks=part.ticks + 1)


def rested(part: Part, event: Event) -> bool:
    """Whether every timer fired."""
    return part.ticks >= TICKS


def part_output(part: Part, event: Event) -> JsonValue:
    """The task's output and the timers counted."""
    return {"task": part.output, "ticks": part.ticks}


PART = Chart(
    "part",
    state(
        "working",
        invoke=[invoke("effect", task="effect", input=lambda part: {"name": part.name})],
        on=[transition("done.invoke.effect", "resting", actions=[assign(keep_output)])],
    ),
    state("resting", on=[always("rested", guard=rested), after(TICK, "resting", actions=[assign(tick)])]),
    final("rested", done_data=part_output),
    context=Part,
)
"""A child: a task, then ``TICKS`` timers one after the other (re-entering ``resting`` arms the next)."""


@attrs.frozen
class Job:
    """How many pings a job waits for, and what it gathered."""

    expected: int = 3
    parts: dict[str, JsonValue] = attrs.field(factory=dict)
    pings: tuple[str, ...] = ()


def members(job: Job) -> dict[str, JsonValue]:
    """Two parts, ``a`` and ``b``."""
    return {name: {"name": name} for name in ("a", "b")}


def keep_parts(job: Job, event: Event) -> Job:
    """Store every part's output (the fan-out's ``{member: output}``)."""
    assert isinstance(event.data, dict)
    return attrs.evolve(job, parts=event.data)


def keep_ping(job: Job, event: Event) -> Job:
    """Record one ping by its key (a ping processed twice shows twice)."""
    assert isinstance(event.data, dict)
    key = event.data["key"]
    assert isinstance(key, str)
    return attrs.evolve(job, pings=(*job.pings, key))


def enough(job: Job, event: Event) -> bool:
    """Whether every expected ping arrived."""
    return len(job.pings) >= job.expected


def summary(job: Job, event: Event) -> JsonValue:
    """The job's output: its parts' outputs and the pings it collected, in order."""
    return {"parts": job.parts, "pings": list(job.pings)}


JOB = Chart(
    "job",
    state(
        "running",
        state(
            "fanning",
            invoke=[invoke("parts", chart="part", map=members)],
            on=[transition("done.invoke.parts", "pausing", actions=[assign(keep_parts)])],
        ),
        state("pausing", on=[after(PAUSE, "collecting")]),
        state("collecting", on=[always("finished", guard=enough)]),
        on=[transition(PING, actions=[assign(keep_ping)])],
    ),
    final("finished", done_data=summary),
    context=Job,
)
"""A call tree: two children with a task and timers each, a timer, and pings from another process."""

CHARTS: list[Chart[Any]] = [PART, JOB]
TASKS = {"effect": effect}
INSTANCES_PER_TREE = 5
"""A job, its two parts and their two ``effect`` task instances."""
