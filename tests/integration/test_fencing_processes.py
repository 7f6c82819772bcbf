"""Fencing across real processes: a worker frozen past its lease loses its trees and writes nothing after.

Worker ``A`` (which also leads recovery) holds call trees (``order`` in
``chaos_charts``) whose tasks are mid-flight, blocked until a release file
exists. ``A`` is frozen with SIGSTOP; once its heartbeat lapses, worker
``B`` takes the recovery lead from it and takes every tree over, running
the tasks again (held mid-flight too). ``A`` is then continued with SIGCONT
while ``B`` holds the trees: its task bodies end, every outcome it tries to
commit is fenced (it logs ``fenced:``), and the store does not change. Then
``B`` finishes; the gates are answered from this process through the API,
and every tree completes once, every instance ending under ``B``'s
ownership as the stored ``Claimed`` events name it.

Run on PostgreSQL and on one SQLite file. On SQLite ``A`` is frozen
outside a write: a process stopped inside one keeps the file's write lock,
and ``B`` could then write nothing until ``A`` continues. Every wait is
bounded; every process is killed in a ``finally``.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from uuid import UUID

import pytest

from aggregates import Instance
from incarnate import Engine, Storage
from tests.integration.chaos_charts import (
    CHARTS,
    EFFECTS_VARIABLE,
    RELEASE_VARIABLE,
    TASKS,
    Run,
    WorkerProcess,
    killing,
    read_runs,
    spawn_worker,
    wait_for,
)
from tests.stores import storage_for

TREES = 4
MEMBERS = 2
LEASE = 2.0
"""Seconds one heartbeat keeps a worker live."""


def write_locked(storage: Storage) -> bool:
    """Whether another process holds the write lock of the SQLite file (never on PostgreSQL)."""
    path = getattr(storage, "path", None)
    if not isinstance(path, str):
        return False
    probe = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def freeze_outside_a_write(worker: WorkerProcess, storage: Storage) -> None:
    """SIGSTOP ``worker`` at a moment it holds no SQLite write lock (tried up to 100 times)."""
    for _ in range(100):
        worker.freeze()
        if not write_locked(storage):
            return
        worker.thaw()
        time.sleep(random.uniform(0.001, 0.02))
    raise AssertionError(f"{worker.name} held the SQLite write lock at each of 100 freezes")


def at_gate(engine: Engine, root: UUID) -> bool:
    """Whether the order waits at its human gate."""
    return engine.snapshot(root).configuration == ("gate",)


def answer(engine: Engine, roots: list[UUID]) -> None:
    """Answer the gates of ``roots`` through the API (this process runs no worker)."""
    for root in roots:
        engine.send(root, "answer", {"root": str(root)}, key=f"answer-{root}")


def done(engine: Engine, roots: list[UUID]) -> bool:
    """Whether every root has completed."""
    return all(engine.instance(root).record.status.value == "done" for root in roots)


def owner_at(events: list[object], index: int) -> str:
    """The owner the stored events name for the event at ``index`` (the creator, or the last claim before)."""
    owner = ""
    for event in events[:index]:
        if isinstance(event, Instance.Started | Instance.Claimed):
            owner = event.owner
    return owner


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["postgres", "sqlite"])
def test_a_worker_frozen_past_its_lease_is_fenced_and_its_trees_finish_once_elsewhere(
    kind: str, tmp_path: Path
) -> None:
    """A SIGSTOPped worker's trees move to another worker; once continued, none of its writes lands."""
    effects = tmp_path / "effects.log"
    release_a, release_b = tmp_path / "release-a", tmp_path / "release-b"
    with (
        storage_for(kind, tmp_path) as storage,
        Engine(CHARTS, TASKS, storage=storage) as client,
        killing([]) as workers,
    ):
        db = storage.url()
        # A leads recovery too: frozen, it must not keep the group from sweeping its own trees.
        env_a = {EFFECTS_VARIABLE: str(effects), RELEASE_VARIABLE: str(release_a)}
        a = spawn_worker(tmp_path, db, "A", env_a, "--threads", "8", "--lease", str(LEASE))
        workers.append(a)
        a.wait_started()
        roots: list[UUID] = [client.start("order") for _ in range(TREES)]

        def running_on(worker: WorkerProcess) -> Callable[[], bool]:
            def condition() -> bool:
                runs = read_runs(effects)
                return sum(run.worker == worker.engine_id for run in runs) == TREES * MEMBERS

            return condition

        assert wait_for(running_on(a), 30.0), a.output()  # A holds every item's task mid-flight
        assert {client.instance(root).record.owner for root in roots} == {a.engine_id}

        freeze_outside_a_write(a, storage)
        frozen_at = time.time()
        env_b = {EFFECTS_VARIABLE: str(effects), RELEASE_VARIABLE: str(release_b)}
        options = ("--threads", "8", "--lease", str(LEASE), "--ttl", "0.5", "--scan-interval", "0.5")
        b = spawn_worker(tmp_path, db, "B", env_b, *options)
        workers.append(b)
        b.wait_started()

        def moved() -> bool:
            return {client.instance(root).record.owner for root in roots} == {b.engine_id}

        assert wait_for(moved, 40.0, 0.2), a.output() + b.output()
        assert wait_for(running_on(b), 30.0), b.output()  # B runs them again, held mid-flight too

        # A wakes while B holds the trees: A's task bodies end and their outcomes are fenced.
        head = client.parts.journal.recorder.max_notification_id()
        release_a.touch()
        a.thaw()

        def all_fenced() -> bool:
            return a.output().count("fenced: ") >= TREES * MEMBERS

        assert wait_for(all_fenced, 20.0), a.output()
        time.sleep(1.0)  # anything A still had queued
        assert client.parts.journal.recorder.max_notification_id() == head, (
            "a write of the fenced worker landed"
        )

        release_b.touch()
        assert wait_for(lambda: all(at_gate(client, root) for root in roots), 30.0), b.output()
        first, second = roots[: TREES // 2], roots[TREES // 2 :]
        answer(client, first)
        assert wait_for(lambda: done(client, first), 20.0), b.output()
        answer(client, second)
        assert wait_for(lambda: done(client, roots), 20.0), b.output()
        assert b.stop() == 0, b.output()
        a.stop()
        check_trees(client, roots, a.engine_id, b.engine_id)
    check_effects(read_runs(effects), a.engine_id, b.engine_id, frozen_at)


def test_a_leader_whose_heartbeat_lapsed_loses_the_lead(tmp_path: Path) -> None:
    """PostgreSQL: the recovery leader lock passes from a leader whose heartbeat lapsed, never a live one."""
    lock_id = random.randrange(1, 2**63)
    with (
        storage_for("postgres", tmp_path) as storage,
        Engine(storage=storage, engine_id="stalled") as first,
        Engine(storage=storage, engine_id="next") as second,
        Engine(storage=storage, engine_id="never-beats") as third,
    ):
        first.parts.coordination.beat("stalled", "default", 30.0)
        assert first.parts.coordination.lead(lock_id, "stalled")
        assert not second.parts.coordination.lead(lock_id, "next")  # a live leader keeps the lead
        first.parts.coordination.beat("stalled", "default", 0.2)
        time.sleep(0.5)  # its heartbeat lapses; its session (and lock) would live on
        assert second.parts.coordination.lead(lock_id, "next")
        assert not first.parts.coordination.lead(lock_id, "stalled")  # back, it follows
        assert not third.parts.coordination.lead(lock_id, "never-beats")
        assert second.parts.coordination.lead(lock_id, "next")  # a leader that never beats is not ended


def check_trees(engine: Engine, roots: list[UUID], a: str, b: str) -> None:
    """Each instance ended once, under an ownership the stored events name; every outcome is B's."""
    by_root: dict[UUID, list[Instance]] = {root: [] for root in roots}
    for instance in engine.instances():
        by_root[instance.record.root].append(instance)
    for root in roots:
        members = by_root[root]
        # The root, an item and its task per member, and the flaky task's two attempts.
        assert len(members) == 1 + 2 * MEMBERS + 2, [m.record.name for m in members]
        output = engine.instance(root).record.output
        assert isinstance(output, dict)
        assert output["answer"] == {"root": str(root)}  # the accepted answer was processed
        assert isinstance(output["items"], dict)
        assert sorted(output["items"]) == ["a", "b"][:MEMBERS]
        for instance in members:
            events = engine.events_of(instance.id)
            ends = [i for i, e in enumerate(events) if isinstance(e, Instance.Completed | Instance.Failed)]
            assert len(ends) == 1, f"{instance.record.name} {instance.id} ended {len(ends)} times"
            claims = [e for e in events if isinstance(e, Instance.Claimed)]
            assert [c.incarnation for c in claims] == list(range(2, 2 + len(claims)))
            # Every end is written under B's ownership: B created it, or the last claim before it is B's.
            assert owner_at(events, ends[0]) == b, (instance.record.name, events)
            if instance.record.name in ("effect", "flaky") and isinstance(
                events[ends[0]], Instance.Completed
            ):
                completed = events[ends[0]]
                assert isinstance(completed.output, dict) and completed.output["by"] == b
            if instance.record.name in ("item", "effect"):  # held by A, moved to B by one claim
                assert [(c.previous, c.owner) for c in claims][-1] == (a, b)
                assert [c.owner for c in claims].count(b) == 1


def check_effects(runs: list[Run], a: str, b: str, frozen_at: float) -> None:
    """A ran each item's task once and was frozen mid-task; B ran every task once; nothing else repeated."""
    on_a = [run for run in runs if run.worker == a]
    on_b = [run for run in runs if run.worker == b]
    assert len(on_a) + len(on_b) == len(runs)
    assert len(on_a) == TREES * MEMBERS
    assert all(run.start < frozen_at and run.end is not None and run.end > frozen_at for run in on_a)
    per_worker = Counter((run.key, run.worker) for run in runs)
    assert max(per_worker.values()) == 1, "a task ran twice on one worker"
    assert len(on_b) == TREES * (MEMBERS + 2)  # each item's task, and the flaky task's two attempts
    twice = sorted(key for key, count in Counter(run.key for run in runs).items() if count > 1)
    assert twice == sorted(run.key for run in on_a)
    print(f"side effects run twice (their worker was frozen mid-task): {len(twice)}")
