"""Properties of embedded task children: their parent's facts rebuild the task a stream would have held.

A task child with a stream of its own records its birth (``Started``) and
its ending (``Completed``, ``Failed``, ``Cancelled``); an embedded one
records nothing of its own, and :func:`projections.embedded_tasks` rebuilds
it from its parent's events. These histories run tasks with streams, then
mark every task ``Birth`` and ``ChildResume`` of each parent ``embedded``
(the one stored difference), and hold the rebuilt task to the stored one:
same birth, input, place in the tree, status, output and error (less the
traceback, which only a stream keeps), for every task and every history.
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

import attrs
from hypothesis import given
from hypothesis import strategies as st

from aggregates import ActivationState, Instance, InstanceKind
from incarnate.testing import memory_engine
from projections import Checkpoint, embedded_history, embedded_tasks, instance_at, resume_plan
from statechart import Chart, RetryPolicy, final, invoke, state, transition
from tests.properties.test_resume_plan import OPERATIONS, PICK, PROPERTY, STARTS, Operation, World
from tests.scenarios import charts

ERRAND = Chart(
    "errand",
    state(
        "waiting",
        invoke=[invoke("charge", task="charge", retry=RetryPolicy(max_attempts=2, backoff=1.0))],
        on=[
            transition("done.invoke.charge", "paid"),
            transition("error.invoke.charge", "declined"),
            transition("leave", "away"),
        ],
    ),
    state("away", on=[transition("back", "waiting")]),
    final("paid"),
    final("declined"),
)
"""A task that its parent may leave (cancelling it) and come back to (a fresh incarnation)."""


class Errands(World):
    """The resume-plan world, with the errand chart beside the others (``embed``: tasks embedded)."""

    def __init__(self, *, embed: bool = False) -> None:
        super().__init__()
        self.engine.close()
        self.engine.storage.forget()
        self.engine = memory_engine(
            [*charts.ALL, ERRAND], {"charge": self.charge}, clock=self.clock, embed_tasks=embed
        )


@attrs.frozen
class Errand:
    """Start an errand, or send ``leave`` or ``back`` to the n-th running one."""

    pick: int
    event: str | None

    def apply(self, world: World) -> None:
        if self.event is None:
            world.engine.start("errand")
            return
        errands = world.running(lambda i: i.record.name == "errand")
        if errands:
            world.engine.send(errands[self.pick % len(errands)].id, self.event)


@attrs.frozen
class CancelTask:
    """An operator cancels the n-th task that has not finished: its parent hears of it as a failure."""

    pick: int

    def apply(self, world: World) -> None:
        tasks = [
            i
            for i in world.engine.instances()
            if i.record.kind is InstanceKind.TASK and not i.record.status.finished
        ]
        if tasks:
            world.engine.cancel(tasks[self.pick % len(tasks)].id, "stopped by an operator")


@attrs.frozen
class Interrupt:
    """Start an errand and, before its task has run, cancel the task, leave, leave and come back, or cancel
    the errand (the cancels an operator's, the others the chart's own); the errand takes its steps at
    once, as a parent does while a slow task runs."""

    how: str

    def apply(self, world: World) -> None:
        errand = world.engine.start("errand")
        task = next(i for i in world.engine.children(errand) if i.record.kind is InstanceKind.TASK)
        if self.how == "cancel task":
            world.engine.cancel(task.id, "stopped by an operator")
            return
        if self.how == "cancel errand":
            world.engine.cancel(errand, "stopped by an operator")
        else:
            world.engine.send(errand, "leave")
            if self.how == "leave and come back":
                world.engine.send(errand, "back")
        while world.engine.process(errand) is not None:  # the errand moves on before its task runs
            pass


ERRANDS = st.one_of(
    st.builds(Errand, PICK, st.sampled_from([None, "leave", "back"])),
    st.builds(Interrupt, st.sampled_from(["cancel task", "cancel errand", "leave", "leave and come back"])),
)
STEPS = st.lists(
    st.tuples(st.one_of(OPERATIONS, ERRANDS, ERRANDS, st.builds(CancelTask, PICK)), st.booleans()),
    max_size=20,
)
"""Operations, each with whether the engine runs until idle after it (tasks born and not yet run
are then cancelled, or see their parent leave or end, as a slow task would)."""


def _embedded(events: list[Any]) -> list[Any]:
    """The parent's events as if each of its task children had been embedded in it."""
    return [
        dataclasses.replace(event, embedded=True)
        if type(event) in (Instance.Birth, Instance.ChildResume) and event.facts.kind is InstanceKind.TASK
        else event
        for event in events
    ]


def _without_traceback(error: Any) -> Any:
    if isinstance(error, dict):
        return {key: value for key, value in error.items() if key != "traceback"}
    return error


@PROPERTY
@given(first=STARTS, steps=STEPS)
def test_a_rebuilt_embedded_task_is_the_task_its_stream_holds(
    first: Operation, steps: list[tuple[Operation, bool]]
) -> None:
    world = Errands()
    try:
        first.apply(world)
        world.engine.run_until_idle(max_units=5_000)
        for operation, settle in steps:
            operation.apply(world)
            if settle:
                world.engine.run_until_idle(max_units=5_000)
        world.engine.run_until_idle(max_units=5_000)
        engine = world.engine
        tasks = [i for i in engine.instances() if i.record.kind is InstanceKind.TASK]
        parents = {task.record.parent.parent for task in tasks if task.record.parent is not None}
        rebuilt: dict[UUID, list[Any]] = {}
        for parent_id in parents:
            rebuilt.update(embedded_tasks(_embedded(engine.events_of(parent_id))))
        assert set(rebuilt) == {task.id for task in tasks}
        for task in tasks:
            events = rebuilt[task.id]
            assert [e.originator_version for e in events] == list(range(1, len(events) + 1))
            view = instance_at(events, len(events))
            stored, seen = task.record, view.record
            assert seen.kind is InstanceKind.TASK and seen.name == stored.name
            assert (seen.birth, seen.parent, seen.root, seen.ancestry) == (
                stored.birth,
                stored.parent,
                stored.root,
                stored.ancestry,
            )
            assert seen.input == stored.input
            assert seen.status is stored.status, (task.id, engine.events_of(task.id), events)
            assert seen.output == stored.output
            assert seen.error == _without_traceback(stored.error), (seen.status, stored.status)
            # Its birth is the parent's Birth, decided just before the stored task's Started.
            assert events[0].timestamp <= engine.events_of(task.id)[0].timestamp
    finally:
        world.close()


@PROPERTY
@given(first=STARTS, steps=STEPS)
def test_only_embedded_births_rebuild_a_task(first: Operation, steps: list[tuple[Operation, bool]]) -> None:
    """A parent whose births are not embedded rebuilds no task; one id asked alone is the one rebuilt."""
    world = Errands()
    try:
        first.apply(world)
        for operation, settle in steps:
            operation.apply(world)
            if settle:
                world.engine.run_until_idle(max_units=5_000)
        world.engine.run_until_idle(max_units=5_000)
        for instance in world.engine.instances():
            events = world.engine.events_of(instance.id)
            assert embedded_tasks(events) == {}
            for task_id, rebuilt in embedded_tasks(_embedded(events)).items():
                assert embedded_history(_embedded(events), task_id) == rebuilt
    finally:
        world.close()


@PROPERTY
@given(first=STARTS, steps=STEPS)
def test_an_engine_that_embeds_its_tasks_keeps_every_checkpoint_exact(
    first: Operation, steps: list[tuple[Operation, bool]]
) -> None:
    """With tasks embedded, every instance's ResumePlan is its live checkpoint; a retained task has
    finished exactly when its parent has heard its outcome; and every task is listed, with the status
    it reads, and rebuilt, by its id."""
    world = Errands(embed=True)
    try:
        first.apply(world)
        for operation, settle in steps:
            operation.apply(world)
            if settle:
                world.engine.run_until_idle(max_units=5_000)
        engine = world.engine
        instances = list(engine.instances())
        for instance in instances:
            if instance.record.kind is InstanceKind.TASK:
                continue
            events = engine.events_of(instance.id)
            chart = world.chart_of(instance)
            assert resume_plan(events, chart) == Checkpoint.of(instance, chart)
            for activation in instance.record.activations:
                assert activation.embedded is (activation.kind is InstanceKind.TASK)
                if activation.embedded:
                    task = engine.instance(activation.child_id)
                    assert task.record.parent == activation.ref
                    told = any(m.source == task.id for m in instance.record.inbox)
                    waiting = activation.state is ActivationState.RUNNING and not told
                    assert task.record.status.finished is not waiting, (activation, task.record.status)
        tasks = [i for i in instances if i.record.kind is InstanceKind.TASK]
        assert all(engine.parts.journal.recorder.select_events(task.id) == [] for task in tasks)
        listing = engine.parts.listing
        listing.catch_up()
        for task in tasks:
            row = listing.get(task.id)
            assert row is not None and row.parent == task.record.parent.parent  # type: ignore[union-attr]
            assert row.status == task.record.status.value, (row, task.record)  # the row says what it reads
    finally:
        world.close()
