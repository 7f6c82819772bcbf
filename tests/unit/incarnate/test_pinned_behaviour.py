"""Behaviours of the commit path and of recovery that only slow tests reached: each pinned in-process.

Every test runs on an in-memory store or a SQLite file, with a virtual clock
(the store's clock too, where heartbeats and leases are compared), so none
of them waits on real time beyond a fraction of a second.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from uuid import UUID, uuid4

import attrs
import pytest

from aggregates import Instance, InstanceStatus
from incarnate import (
    DeterministicRunner,
    Engine,
    RecoveryManager,
    RecoverySettings,
    Storage,
    VirtualClock,
)
from incarnate._commits import GroupCommit
from incarnate._engine import forget_memory_store
from incarnate.store._memory import MemoryCoordination
from incarnate.testing import CrashPoint, SimulatedCrash, crash_at
from statechart import Chart, RetryPolicy, assign, final, invoke, state, transition
from tests.scenarios import charts

WAIT = 10.0
TASKS = {"charge": lambda call: "ok"}


@pytest.fixture
def memory() -> Iterator[Storage]:
    """A fresh, named in-memory store, forgotten afterwards."""
    name = f"pinned-{uuid4().hex}"
    try:
        yield Storage.popo(name)
    finally:
        forget_memory_store(name)


@pytest.fixture
def engines() -> Iterator[Callable[..., Engine]]:
    """Build engines; every one is closed at the end of the test."""
    built: list[Engine] = []

    def build(*args: Any, **kwargs: Any) -> Engine:
        kwargs.setdefault("clock", VirtualClock(1_700_000_000.0))
        engine = Engine(*args, **kwargs)
        built.append(engine)
        return engine

    yield build
    for engine in reversed(built):
        engine.close()


def topics(engine: Engine, instance_id: UUID) -> list[str]:
    """The class names of the events the store holds for an instance, read from the recorder."""
    records = engine.parts.journal.recorder.select_events(instance_id)
    return [record.topic.rsplit(".", 1)[-1].partition("@")[0] for record in records]


# --------------------------------------------------------- notify after commit


class WatchingRunner(DeterministicRunner):
    """A deterministic runner that reads what the store holds for an instance each time it is notified."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[UUID, list[str]]] = []

    def notify(self, instance_id: UUID) -> None:
        assert isinstance(self.engine, Engine)
        self.seen.append((instance_id, topics(self.engine, instance_id)))
        super().notify(instance_id)


def test_send_notifies_the_runner_only_once_the_message_is_stored(
    engines: Callable[..., Engine], tmp_path: Path
) -> None:
    """When the runner hears of a sent event, the store already holds the instance's Accepted event."""
    runner = WatchingRunner()
    engine = engines(charts.ALL, TASKS, storage=Storage.sqlite(str(tmp_path / "notify.db")), runner=runner)
    root = engine.start("gate")
    engine.run_until_idle()
    runner.seen.clear()
    engine.send(root, "answer", "yes")
    [(notified, stored)] = runner.seen
    assert notified == root
    assert stored.count("Accepted") == 1 and stored[-1] == "Accepted"


def test_a_send_whose_commit_fails_notifies_nobody(engines: Callable[..., Engine], tmp_path: Path) -> None:
    """A send whose transaction fails raises, stores nothing, and the runner is never told of it."""
    runner = WatchingRunner()
    engine = engines(charts.ALL, TASKS, storage=Storage.sqlite(str(tmp_path / "refused.db")), runner=runner)
    root = engine.start("gate")
    engine.run_until_idle()
    runner.seen.clear()
    with crash_at(engine, CrashPoint.DURING_COMMIT), pytest.raises(SimulatedCrash):
        engine.send(root, "answer", "yes")
    assert runner.seen == []
    assert "Accepted" not in topics(engine, root)


# ------------------------------------------------------ group commit acknowledges


def queued(committer: GroupCommit, count: int) -> bool:
    """Wait until ``count`` units are queued behind the transaction in flight."""
    deadline = time.monotonic() + WAIT
    while committer.queued() < count and time.monotonic() < deadline:
        time.sleep(0.001)
    return committer.queued() >= count


def test_a_queued_unit_is_acknowledged_only_after_its_own_write_and_sees_its_failure() -> None:
    """A queued unit is not released while its batch is being written, and raises its write's error."""
    opening, leader, follower = (cast(Instance, SimpleNamespace(id=uuid4())) for _ in range(3))
    writing_opening, release_opening = threading.Event(), threading.Event()
    writing_batch, release_batch = threading.Event(), threading.Event()
    writes: list[list[UUID]] = []

    def write(instances: Sequence[Instance]) -> None:
        ids = [instance.id for instance in instances]
        writes.append(ids)
        if ids == [opening.id]:
            writing_opening.set()
            assert release_opening.wait(WAIT)
        elif len(ids) == 2:
            writing_batch.set()
            assert release_batch.wait(WAIT)
            raise ValueError("the joint transaction is refused")
        elif ids == [follower.id]:
            raise ValueError(f"the store refuses {follower.id}")

    committer = GroupCommit(write)
    outcomes: dict[UUID, BaseException | None] = {}
    returned = {instance.id: threading.Event() for instance in (leader, follower)}

    def save(instance: Instance) -> None:
        try:
            committer.save([instance])
        except BaseException as error:  # noqa: BLE001 - the test reads it
            outcomes[instance.id] = error
        else:
            outcomes[instance.id] = None
        finally:
            returned[instance.id].set()

    opener = threading.Thread(target=committer.save, args=([opening],))
    opener.start()
    assert writing_opening.wait(WAIT)
    threads = [threading.Thread(target=save, args=(instance,)) for instance in (leader, follower)]
    threads[0].start()
    assert queued(committer, 1)  # the first in the queue leads the next transaction
    threads[1].start()
    assert queued(committer, 2)
    release_opening.set()
    assert writing_batch.wait(WAIT)  # the leader writes both queued units in one transaction
    assert not returned[follower.id].wait(0.2), "a unit was acknowledged before its transaction ended"
    assert not returned[leader.id].is_set()
    release_batch.set()
    opener.join(WAIT)
    for thread in threads:
        thread.join(WAIT)
    assert set(returned) == {leader.id, follower.id} and all(e.is_set() for e in returned.values())
    assert outcomes[leader.id] is None
    error = outcomes[follower.id]
    assert isinstance(error, ValueError) and str(follower.id) in str(error)
    assert writes == [[opening.id], [leader.id, follower.id], [leader.id], [follower.id]]


# ------------------------------------------------- the manager's candidate roots

STORE_EPOCH = 1_000_000.0


@pytest.fixture
def store_clock(monkeypatch: pytest.MonkeyPatch) -> VirtualClock:
    """The in-memory store's clock (heartbeats, leases, listing change times), moved by the test."""
    clock = VirtualClock(STORE_EPOCH)
    monkeypatch.setattr(MemoryCoordination, "now", lambda self: clock.now())
    return clock


def sweeper(engine: Engine, seen: list[UUID], **changes: Any) -> RecoveryManager:
    """A manager on ``engine`` whose handler only records the roots it is handed."""
    settings = RecoverySettings(
        ttl=10.0, scan_interval=0.1, lease_duration=5.0, item_timeout=2.0, orphan_grace_period=0.0
    )
    return RecoveryManager(engine, attrs.evolve(settings, **changes), seen.append)


def test_only_roots_of_engines_that_are_not_live_in_this_group_are_candidates(
    memory: Storage, store_clock: VirtualClock, engines: Callable[..., Engine]
) -> None:
    """A root is a candidate when its owner never beat or lapsed (expiring now counts) in this group,
    never when it is ours, its owner is live or of another group, or it is a child."""
    owners = ("silent", "live", "lapsed", "edge", "foreign")
    roots = {
        owner: engines(charts.ALL, TASKS, storage=memory, engine_id=owner).start("gate") for owner in owners
    }
    dead = engines(charts.ALL, TASKS, storage=memory, engine_id="silent-parent")
    parent = dead.start("parent", {"members": ["a"]})
    dead.run_until_idle()
    [kid] = dead.children(parent)
    here = engines(charts.ALL, TASKS, storage=memory, engine_id="sweeper")
    mine = here.start("gate")
    here.listing.catch_up()  # every row changed at the store's epoch
    coordination = here.parts.coordination
    coordination.beat("lapsed", "default", 5.0)
    coordination.beat("foreign", "elsewhere", 5.0)
    coordination.beat("edge", "default", 20.0)
    store_clock.advance(20.0)  # "edge" expires exactly now; "lapsed" and "foreign" 15 s ago
    coordination.beat("live", "default", 60.0)
    seen: list[UUID] = []
    report = sweeper(here, seen).sweep()
    expected = {roots["silent"], roots["lapsed"], roots["edge"], parent}
    assert set(seen) == expected and len(seen) == len(expected)
    assert (report.candidates, report.claimed, report.succeeded) == (4, 4, 4)
    assert {roots["live"], roots["foreign"], mine, kid.id}.isdisjoint(seen)


def test_a_root_is_a_candidate_once_unchanged_for_ttl_seconds(
    memory: Storage, store_clock: VirtualClock, engines: Callable[..., Engine]
) -> None:
    """A root unchanged for exactly ``ttl`` seconds is a candidate; one changed more recently is not."""
    dead = engines(charts.ALL, TASKS, storage=memory, engine_id="dead")
    here = engines(charts.ALL, TASKS, storage=memory, engine_id="sweeper")
    old = dead.start("gate")
    here.listing.catch_up()
    store_clock.advance(4.0)
    recent = dead.start("gate")
    here.listing.catch_up()
    store_clock.advance(6.0)  # "old" unchanged for 10 s (the ttl), "recent" for 6 s
    seen: list[UUID] = []
    report = sweeper(here, seen, ttl=10.0).sweep()
    assert (seen, report.candidates) == ([old], 1)
    assert recent not in seen


def test_a_root_whose_recovery_still_runs_is_not_a_candidate_again(
    memory: Storage, store_clock: VirtualClock, engines: Callable[..., Engine]
) -> None:
    """A root whose abandoned handler call still runs is left out of later sweeps, its lease lapsed or not."""
    dead = engines(charts.ALL, TASKS, storage=memory, engine_id="dead")
    here = engines(charts.ALL, TASKS, storage=memory, engine_id="sweeper")
    root = dead.start("gate")
    here.listing.catch_up()
    store_clock.advance(10.0)
    release = threading.Event()
    calls: list[UUID] = []

    def hang(instance_id: UUID) -> None:
        calls.append(instance_id)
        release.wait(WAIT)

    settings = RecoverySettings(ttl=0.0, lease_duration=5.0, item_timeout=0.1, orphan_grace_period=0.0)
    manager = RecoveryManager(here, settings, hang)
    try:
        first = manager.sweep()
        assert (first.claimed, first.timed_out) == (1, 1)
        store_clock.advance(60.0)  # the lease on the root has lapsed; the call has not ended
        again = manager.sweep()
        assert (again.candidates, again.claimed, calls) == (0, 0, [root])
    finally:
        release.set()
    deadline = time.monotonic() + WAIT
    while manager.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert manager.running == frozenset()
    assert manager.sweep().candidates == 1  # the call ended: a later scan may retry it


# ------------------------------------------------------- revalidation on recovery


def parent_chart(*, idle: bool = True, escalation: bool = False) -> Chart[charts.Family]:
    """A chart ``parent`` fanning out to ``kid``s; ``idle`` removable, an ``escalated`` state addable."""
    leave = [transition("leave", "idle")] if idle else []
    escalate = [transition("escalate", "escalated")] if escalation else []
    return Chart(
        "parent",
        state(
            "gathering",
            invoke=[
                invoke(
                    "team",
                    chart="kid",
                    map=charts.team,
                    output=charts.keep_output,
                    retry=RetryPolicy(max_attempts=3, backoff=5.0),
                )
            ],
            on=[
                transition("done.invoke.team", "reviewing"),
                transition("error.invoke.team", "failed", actions=[assign(charts.note_error)]),
                *leave,
            ],
        ),
        *([state("idle", on=[transition("back", "gathering")])] if idle else []),
        state("reviewing", on=[transition("approve", "approved"), *escalate]),
        *([state("escalated")] if escalation else []),
        final("approved"),
        final("failed"),
        context=charts.Family,
    )


def recovered_with(
    memory: Storage, engines: Callable[..., Engine], version: Chart[Any]
) -> tuple[Engine, UUID]:
    """Store a ``parent`` gathering one kid, then resume it on a fresh engine registering ``version``."""
    engine = engines([parent_chart(), charts.KID], storage=memory)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    assert engine.snapshot(parent).configuration == ("gathering",)
    engine.close()
    fresh = engines([version, charts.KID], storage=memory)
    fresh.resume_all()
    return fresh, parent


def test_a_chart_that_lost_a_state_parks_the_root_even_when_its_snapshot_still_decodes(
    memory: Storage, engines: Callable[..., Engine]
) -> None:
    """A removed state, even an inactive one, parks the root with a revalidation incident naming it."""
    fresh, parent = recovered_with(memory, engines, parent_chart(idle=False))
    record = fresh.instance(parent).record
    assert record.status is InstanceStatus.PARKED
    [incident] = record.incidents
    assert (incident.kind, incident.parked) == ("revalidation", True)
    assert "changed incompatibly" in incident.detail and "state 'idle' was removed" in incident.detail
    [kid] = fresh.children(parent)
    fresh.send(kid.id, "finish")
    fresh.run_until_idle()
    assert fresh.instance(kid.id).record.inbox != ()  # nothing of a parked tree runs
    assert [held.root for held in fresh.parked()] == [parent]


def test_a_chart_that_only_gained_states_resumes_without_an_incident(
    memory: Storage, engines: Callable[..., Engine]
) -> None:
    """An additive change (a new state) does not park: the instance resumes and its tree runs on."""
    fresh, parent = recovered_with(memory, engines, parent_chart(escalation=True))
    record = fresh.instance(parent).record
    assert (record.status, record.incidents) == (InstanceStatus.RUNNING, ())
    [kid] = fresh.children(parent)
    fresh.send(kid.id, "finish")
    fresh.run_until_idle()
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    assert fresh.parked() == []


# ------------------------------------------- re-attach consumes an outcome once


def test_a_finished_childs_outcome_already_delivered_is_consumed_once_after_recovery(
    memory: Storage, engines: Callable[..., Engine]
) -> None:
    """Re-attaching a finished kid whose outcome waits in its parent's inbox adds no copy: one consumption."""
    engine = engines(charts.ALL, TASKS, storage=memory)
    parent = engine.start("parent", {"members": ["a"]})
    engine.run_until_idle()
    [kid] = engine.children(parent)
    engine.send(kid.id, "finish")
    engine.process(kid.id)
    engine.process(kid.id)  # the kid is done; its outcome waits, unconsumed, in the parent's inbox
    assert engine.instance(kid.id).record.status is InstanceStatus.DONE
    [waiting] = engine.instance(parent).record.inbox
    assert waiting.event.name.startswith("done.invoke.")
    engine.close()
    fresh = engines(charts.ALL, TASKS, storage=memory)
    fresh.resume_all()  # re-attaches the retained, finished kid: its outcome is delivered unless there
    assert [m.event.name for m in fresh.instance(parent).record.inbox] == [waiting.event.name]
    fresh.run_until_idle()
    assert fresh.snapshot(parent).configuration == ("reviewing",)
    assert fresh.snapshot(parent).context.results == ("done:a",)
    events = fresh.events_of(parent)
    names = [type(event).__name__ for event in events]
    settled = [s for e in events if isinstance(e, Instance.Stepped) for s in e.settled]
    assert names.count("ChildSettled") + len(settled) == 1  # alone, or on its macrostep (format 2)
    assert "EvidenceRejected" not in names
    assert fresh.instance(parent).record.inbox == ()
