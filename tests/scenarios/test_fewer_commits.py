"""Fewer commits per event: a message and the macrostep it causes commit together where this engine runs it.

A task's outcome and its parent's reaction are one transaction when the
engine that ran the task also runs the parent; a message sent to an
instance a threaded runner runs is accepted and consumed in one transaction
(the deterministic runner still works only inside ``run_until_idle``).
Recovery reads each member of a call tree once and claims up to 100 trees
in one save. Every scenario runs on each store.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

import attrs
import pytest
from eventsourcing.persistence import IntegrityError

from aggregates import Instance, InstanceStatus
from incarnate import DeterministicRunner, Engine, MemoryStorage, ThreadedRunner, _engine
from incarnate._work import UnitOfWork
from incarnate.testing import commit_points
from statechart import Chart, final, invoke, state, transition
from tests.scenarios import charts
from tests.scenarios.conftest import EngineFactory

Commit = dict[UUID, list[str]]
TASKS = {"charge": lambda call: "ok"}


def commits_of(engine: Engine) -> list[Commit]:
    """Every commit ``engine`` makes from now on: the pending event names of each instance it writes."""
    seen: list[Commit] = []

    def hook(point: str, uow: UnitOfWork) -> None:
        if point == "before-commit":
            seen.append({i.id: [type(e).__name__ for e in i.pending_events] for i in uow.pending()})

    engine.parts.commits.hooks.append(hook)
    return seen


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "streams"])
def test_a_task_outcome_and_its_parents_step_are_one_commit(make_engine: EngineFactory, embed: bool) -> None:
    """The charge task completes, and its parent hears of it and finishes, in the same transaction."""
    engine = make_engine(charts.ALL, {"charge": lambda call: "r-1"}, embed_tasks=embed)
    commits = commits_of(engine)
    root = engine.start("charging")
    engine.run_until_idle()
    assert engine.instance(root).record.status is InstanceStatus.DONE
    assert len(commits) == 2  # the start with the task's birth; the outcome with the reaction
    first, last = commits
    [activation] = engine.events_of(root)[2].facts.ref, *()  # the Birth: Started, Stepped, Birth
    task_id = activation.child_id
    if embed:  # nothing of the task is written but its parent's events
        assert set(first) == set(last) == {root}
    else:
        assert set(last) == {root, task_id} and last[task_id] == ["Completed"]
    # The parent's reaction is one event: the outcome it received, its macrostep, the settlement.
    assert last[root] == ["Stepped", "Completed"]
    reaction = [e for e in engine.events_of(root) if isinstance(e, Instance.Stepped)][-1]
    assert reaction.received is not None and reaction.received.source == task_id
    assert reaction.consumed == reaction.received.seq
    assert [ref.child_id for ref, _ in reaction.settled] == [task_id]
    assert engine.handle(root).result() == "r-1"


@attrs.frozen
class Blob:
    """Context of the oversized chart."""

    blob: str = ""


OVERSIZED = Chart(
    "oversized",
    state(
        "waiting",
        invoke=[invoke("t", task="small", output=lambda c, e: Blob("x" * 40_000))],
        on=[transition("done.invoke.t", "done")],
    ),
    final("done"),
    context=Blob,
)
"""A parent whose reaction to its task's small outcome is an oversized step."""


def test_an_oversized_parent_step_never_costs_the_task_its_outcome(make_engine: EngineFactory) -> None:
    """The joint commit is refused for the parent's event: the outcome commits alone, the parent fails."""
    engine = make_engine([OVERSIZED], {"small": lambda call: "ok"}, max_payload_bytes=20_000)
    root = engine.start("oversized")
    engine.run_until_idle()
    (task,) = [i for i in engine.instances() if i.id != root]
    assert task.record.status is InstanceStatus.DONE and task.record.output == "ok"
    record = engine.instance(root).record
    assert record.status is InstanceStatus.FAILED
    assert any(incident.kind == "payload-too-large" for incident in record.incidents)


def test_the_outcome_commits_alone_where_the_runner_does_not_step_inline(make_engine: EngineFactory) -> None:
    """A runner without ``inline`` keeps the two commits: the outcome (with Accepted), then the step."""

    class Plain(DeterministicRunner):
        inline = None  # type: ignore[assignment]  # a runner of the user's that offers no inline work

    engine = make_engine(charts.ALL, {"charge": lambda call: "r-2"}, runner=Plain())
    commits = commits_of(engine)
    root = engine.start("charging")
    engine.run_until_idle()
    assert len(commits) == 3
    assert commits[1][root] == ["Accepted"]
    assert commits[2][root][0] == "Stepped" and commits[2][root][-1] == "Completed"
    assert engine.handle(root).result() == "r-2"


def test_a_send_to_an_instance_a_threaded_runner_runs_is_one_commit(make_engine: EngineFactory) -> None:
    """``send`` accepts and consumes the message in one transaction; the instance has moved on return."""
    runner = ThreadedRunner(workers=2)
    engine = make_engine(charts.ALL, TASKS, runner=runner)
    gate = engine.start("gate")
    assert runner.wait_until_idle()
    commits = commits_of(engine)
    seq = engine.send(gate, "answer", {"yes": True})
    record = engine.instance(gate, fresh=True).record
    assert record.status is InstanceStatus.DONE and record.output == {"yes": True}
    assert commits == [{gate: ["Stepped", "Completed"]}]  # the message is the macrostep's ``received``
    assert seq == record.message_seq
    assert runner.wait_until_idle() and len(commits) == 1  # nothing was left for the workers


def test_a_send_on_the_deterministic_runner_only_accepts(make_engine: EngineFactory) -> None:
    """Work happens only inside ``run_until_idle``: the send commits ``Accepted`` alone."""
    engine = make_engine(charts.ALL, TASKS)
    gate = engine.start("gate")
    engine.run_until_idle()
    commits = commits_of(engine)
    engine.send(gate, "answer", 7)
    assert commits == [{gate: ["Accepted"]}]
    assert engine.instance(gate).record.status is InstanceStatus.RUNNING
    engine.run_until_idle()
    assert engine.handle(gate).result() == 7


def test_a_send_while_a_worker_is_on_the_instance_leaves_the_step_to_it(make_engine: EngineFactory) -> None:
    """One thread at a time per instance: a send meeting a busy instance only accepts; the worker steps."""
    runner = ThreadedRunner(workers=1)
    engine = make_engine(charts.ALL, TASKS, runner=runner)
    gate = engine.start("gate")
    assert runner.wait_until_idle()
    commits = commits_of(engine)
    with runner.inline(gate) as mine:  # as a worker holding the instance would
        assert mine
        engine.send(gate, "answer", 1)
        assert commits == [{gate: ["Accepted"]}]
    assert runner.wait_until_idle()
    assert engine.handle(gate).result() == 1
    assert commits[1] == {gate: ["Stepped", "Completed"]}


def cold_engine(engine: Engine, tasks: dict[str, Any]) -> Engine:
    storage, clock = engine.storage, engine.clock
    engine.close()
    return Engine(charts.ALL, tasks, storage=storage, clock=clock, engine_id="recoverer")


def counting(part: object, name: str) -> list[tuple[Any, ...]]:
    """Record the arguments of every call of ``part.<name>`` (a part of an engine)."""
    calls: list[tuple[Any, ...]] = []
    original = getattr(part, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return original(*args, **kwargs)

    setattr(part, name, wrapper)
    return calls


def pending_trees(make_engine: EngineFactory, count: int, *, embed: bool = True) -> tuple[Engine, list[UUID]]:
    """``count`` charging trees whose task is born and not run, on an engine that then stops."""
    engine = make_engine(charts.ALL, {"charge": lambda call: "never"}, engine_id="crashed", embed_tasks=embed)
    roots = [engine.start("charging") for _ in range(count)]
    return engine, [root.id for root in roots]


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "streams"])
def test_resume_all_reads_each_member_once_and_claims_trees_in_batches(
    make_engine: EngineFactory, embed: bool
) -> None:
    """150 trees of two: each member with a stream read once (two queries a batch on a database),
    claimed in batches.

    The first save claims ``RESUME_FIRST_BATCH`` trees, the rest go in saves
    of at most ``RESUME_BATCH`` (where the first part of the log folded ends
    splits one). An embedded task has nothing to read or claim: its parent's
    claim is its own.
    """
    crashed, roots = pending_trees(make_engine, 150, embed=embed)
    engine = cold_engine(crashed, {"charge": lambda call: "paid"})
    streams = 1 if embed else 2  # the root, and its task when it has a stream
    reads = counting(engine.parts.reads, "read")
    singles = counting(engine.parts.journal, "stored")
    batches = counting(engine.parts.reads, "prefetch")
    saves = counting(engine.parts.commits, "save_instances")
    assert engine.resume_all() == 150 * streams
    assert len(reads) == len({args[0] for args in reads}) == 150 * streams  # each member read once
    trees = [len(args) // streams for args in saves]
    assert trees[0] == _engine.RESUME_FIRST_BATCH and max(trees) <= _engine.RESUME_BATCH
    assert sum(trees) == 150 and len(trees) <= 4  # in batches, not a save per tree
    if isinstance(engine.storage, MemoryStorage):
        assert len(singles) == 150 * streams  # in memory, one by one
    else:  # one query for a batch's roots, one for their children (none when the tasks are embedded)
        children = [n * (streams - 1) for n in trees]  # an empty batch is no query (Journal.select_many)
        assert singles == [] and [len(args[0]) for args in batches] == [
            n for pair in zip(trees, children, strict=True) for n in pair
        ]
    engine.run_until_idle()
    members: dict[UUID, list[UUID]] = {}
    for instance in engine.instances():
        members.setdefault(instance.record.root, []).append(instance.id)
    assert sorted(members) == sorted(roots) and {len(tree) for tree in members.values()} == {2}
    for root, tree in members.items():
        assert engine.handle(root).result() == "paid"
        for member in tree:
            claimed = [e for e in engine.events_of(member) if isinstance(e, Instance.Claimed)]
            assert len(claimed) == 1 and engine.instance(member).record.owner == "recoverer"
    engine.close()


@pytest.mark.parametrize("embed", [True, False], ids=["embedded", "streams"])
def test_a_conflict_in_a_batch_claim_falls_back_to_one_tree_at_a_time(
    make_engine: EngineFactory, embed: bool
) -> None:
    """The joint claim meets a concurrent write: each tree is then taken over on its own, none twice."""
    crashed, roots = pending_trees(make_engine, 3, embed=embed)
    engine = cold_engine(crashed, {"charge": lambda call: "paid"})
    streams = 1 if embed else 2  # the root, and its task when it has a stream
    original = engine.parts.commits.save_instances
    refused: list[int] = []

    def save_instances(*instances: Instance) -> None:
        if len(instances) > streams and not refused:
            refused.append(len(instances))
            raise IntegrityError("a concurrent write (simulated)")
        original(*instances)

    engine.parts.commits.save_instances = save_instances  # type: ignore[method-assign]
    assert engine.resume_all() == 3 * streams
    assert refused == [3 * streams]
    engine.run_until_idle()
    assert [engine.handle(root).result() for root in roots] == ["paid"] * 3
    for instance in engine.instances():
        claimed = [e for e in engine.events_of(instance.id) if isinstance(e, Instance.Claimed)]
        assert len(claimed) == 1
    engine.close()


def test_a_send_that_crashed_after_its_commit_is_not_sent_again() -> None:
    """The test kit finishes a crashed send by what landed: a committed message is never accepted twice."""

    def scenario(engine: Engine) -> None:
        gate = engine.start("gate")
        engine.run_until_idle()
        engine.send(gate, "answer", 3)
        engine.run_until_idle()

    points = 0
    for point in commit_points(scenario, charts.ALL, TASKS):
        with point as engine:
            (gate,) = list(engine.instances())
            accepted = [e for e in engine.events_of(gate.id) if type(e).__name__ == "Accepted"]
            assert len(accepted) == 1 and gate.record.output == 3
        points += 1
    assert points == 2 * point.total and point.total == 3  # the send's commit is a commit point
