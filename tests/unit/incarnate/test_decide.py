"""The path decide → unit of work → commit → enact, driven without an Engine.

A :class:`Bench` is a small real :class:`~incarnate._work.Workshop`:
registered charts, a virtual clock, the statechart snapshot codec, the
committed instances in a dict, and the same ownership check as the engine.
Commits go through a bare ``eventsourcing`` Application with the project's
cattrs mapper on a SQLite file, in one save, as the engine commits them.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from eventsourcing.application import AggregateNotFoundError, Application
from eventsourcing.persistence import IntegrityError, Mapper, Recording

from aggregates import CattrsMapper, Instance, InstanceKind, InstanceStatus
from incarnate._clock import VirtualClock
from incarnate._process import Decision, decide
from incarnate._work import UnitOfWork
from incarnate.errors import Fenced
from statechart import Chart, Event
from statechart.codec import SnapshotCodec, SnapshotDelta
from statechart.errors import CodecError
from statechart.snapshot import Snapshot
from tests.scenarios.charts import KID, PARENT, TIMED

START = 1_000.0


class Bench:
    """A workshop without an engine: charts, a clock, a codec, and instances kept in a dict."""

    def __init__(
        self,
        charts: Iterable[Chart[Any]],
        *,
        engine_id: str = "engine-a",
        stored: dict[UUID, Instance] | None = None,
        clock: VirtualClock | None = None,
    ) -> None:
        self.engine_id = engine_id
        self.clock = clock if clock is not None else VirtualClock(START)
        self.charts: dict[str, Chart[Any]] = {chart.name: chart for chart in charts}
        self.codecs = {name: SnapshotCodec(chart) for name, chart in self.charts.items()}
        self.stored: dict[UUID, Instance] = stored if stored is not None else {}
        self.held: dict[UUID, int] = {}
        self.notified: list[UUID] = []
        self.alarms: list[tuple[float, UUID]] = []

    embed_tasks = False

    def http_location(self, instance_id: UUID) -> str | None:
        return None  # no HTTP ingress

    def encode(self, chart: Chart[Any], snapshot: Snapshot[Any]) -> dict[str, Any]:
        """The snapshot through the chart's codec."""
        return self.codecs[chart.name].encode(snapshot)

    def encode_delta(
        self, chart: Chart[Any], before: Snapshot[Any] | None, after: Snapshot[Any]
    ) -> SnapshotDelta:
        """What changed from ``before`` to ``after``, through the chart's codec."""
        return self.codecs[chart.name].encode_delta(before, after)

    def decode(self, chart: Chart[Any], instance: Instance) -> Snapshot[Any]:
        """The instance's stored snapshot through the chart's codec."""
        if instance.record.snapshot is None:
            raise CodecError(chart.name, "snapshot", f"instance {instance.id} has no snapshot yet")
        return self.codecs[chart.name].decode(instance.record.snapshot)

    def load(self, aggregate_id: UUID, *, fresh: bool = True) -> Instance:
        """A private copy of the committed instance."""
        try:
            return copy.deepcopy(self.stored[aggregate_id])
        except KeyError:
            raise AggregateNotFoundError(aggregate_id) from None

    def check_holds(self, instance: Instance) -> None:
        """Fenced unless this bench is the owner at the incarnation it holds."""
        record = instance.record
        held = self.held.get(instance.id)
        if record.owner != self.engine_id or record.incarnation != held:
            raise Fenced(instance.id, self.engine_id, held, record.owner, record.incarnation)

    def enact(self, uow: UnitOfWork) -> None:
        """Note what a runner would be given: the unit's follow-ups and deadlines."""
        self.alarms.extend(uow.deadlines)
        self.notified.extend(uow.followups)


class Events(Application[UUID]):
    """A bare application storing instance events through the project's cattrs mapper."""

    name = "decide"

    def construct_mapper(self) -> Mapper[UUID]:
        """The cattrs codec the engine uses (no pickle, exact tuples)."""
        return CattrsMapper(
            transcoder=self.factory.transcoder(),
            cipher=self.factory.cipher(),
            compressor=self.factory.compressor(),
        )


@pytest.fixture
def events(tmp_path: Path) -> Iterator[Events]:
    """An application on a fresh SQLite file."""
    app = Events(
        env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": str(tmp_path / "decide.db")}
    )
    try:
        yield app
    finally:
        app.close()


def commit(bench: Bench, events: Events, uow: UnitOfWork) -> list[Recording[UUID]]:
    """Save a unit of work in one save, after re-checking its fenced instances, as the engine does."""
    for instance_id in uow.fenced:
        loaded = uow.loaded.get(instance_id)
        if loaded is not None:
            bench.check_holds(loaded)
    pending = uow.pending()
    recordings = events.save(*pending)
    for instance in pending:
        bench.stored[instance.id] = copy.deepcopy(instance)
    for instance_id, created in uow.created.items():
        bench.held[instance_id] = created.record.incarnation
    return recordings


def start_root(bench: Bench, chart: Chart[Any]) -> tuple[Instance, UnitOfWork, Decision | None]:
    """Start a root of ``chart`` and decide its first macrostep into a unit of work (nothing saved)."""
    root = Instance.start_root(
        id=uuid.uuid4(),
        kind=InstanceKind.CHART,
        name=chart.name,
        fingerprint=chart.fingerprint,
        input=None,
        owner=bench.engine_id,
    )
    uow = UnitOfWork(bench)
    uow.created[root.id] = root
    decision = decide(bench, uow, root, careful=False)
    return root, uow, decision


def names(instance: Instance) -> list[str]:
    """The class names of an instance's pending events."""
    return [type(event).__name__ for event in instance.pending_events]


def test_first_macrostep_births_the_child_in_the_same_unit() -> None:
    """A first macrostep puts Started, Stepped, Birth and the child's creation with those facts in a unit."""
    bench = Bench([PARENT, KID])
    root, uow, decision = start_root(bench, PARENT)

    assert decision is not None and decision.kind == "started"
    assert names(root) == ["Started", "Stepped", "Birth"]
    birth = root.pending_events[2]
    assert isinstance(birth, Instance.Birth)
    [child] = [instance for instance in uow.created.values() if instance.id != root.id]
    assert names(child) == ["Started"]
    started = child.pending_events[0]
    assert isinstance(started, Instance.Started)
    assert started.birth == birth.facts
    assert child.id == birth.facts.child_id
    assert child.record.parent == birth.facts.ref
    assert child.record.root == root.id
    assert child.record.owner == bench.engine_id
    assert child.record.name == KID.name
    assert child.record.fingerprint == KID.fingerprint
    stepped = root.pending_events[1]
    assert isinstance(stepped, Instance.Stepped)
    assert stepped.now == START
    assert root.record.status is InstanceStatus.RUNNING
    assert [a.ref for a in root.record.activations] == [birth.facts.ref]
    assert uow.pending() == [root, child]
    assert uow.followups == [child.id]
    assert uow.deadlines == []
    assert bench.stored == {} and bench.notified == [] and bench.alarms == []


def test_timers_of_a_macrostep_become_deadlines_to_enact() -> None:
    """A first macrostep's delayed sends and delayed transition are listed as deadlines, not follow-ups."""
    bench = Bench([TIMED])
    root, uow, decision = start_root(bench, TIMED)

    assert decision is not None and decision.kind == "started"
    assert names(root) == ["Started", "Stepped"]
    assert sorted(uow.deadlines) == [(START + delay, root.id) for delay in (10.0, 20.0, 30.0, 50.0)]
    assert uow.followups == []


def test_a_due_timer_is_decided_from_the_stored_snapshot() -> None:
    """Once the clock passes a deadline, the next decision fires that timer on the decoded snapshot."""
    bench = Bench([TIMED])
    root, _, _ = start_root(bench, TIMED)
    bench.stored[root.id] = copy.deepcopy(root)
    bench.stored[root.id].collect_events()
    bench.clock.advance(10.0)

    again = UnitOfWork(bench)
    loaded = again.load(root.id)
    assert loaded is not None
    decision = decide(bench, again, loaded, careful=False)

    assert decision is not None and decision.kind == "timer"
    assert names(loaded) == ["Stepped"]
    stepped = loaded.pending_events[0]
    assert isinstance(stepped, Instance.Stepped)
    assert stepped.trigger is not None and stepped.trigger.name == "ping" and stepped.trigger.data == "a"


def test_a_unit_of_work_commits_in_one_save_and_reads_back_as_decided(events: Events) -> None:
    """The decided events land in one SQLite save, read back equal, and only its follow-ups are enacted."""
    bench = Bench([PARENT, KID])
    root, uow, _ = start_root(bench, PARENT)
    [child] = [instance for instance in uow.created.values() if instance.id != root.id]
    decided = {instance.id: list(instance.pending_events) for instance in uow.pending()}
    assert events.recorder.max_notification_id() in (None, 0)
    assert bench.notified == [] and bench.alarms == []

    recordings = commit(bench, events, uow)
    bench.enact(uow)

    assert len(recordings) == sum(len(v) for v in decided.values()) == 4
    ids = [recording.notification.id for recording in recordings]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    for instance_id, expected in decided.items():
        assert list(events.events.get(instance_id)) == expected
        stored: Instance = events.repository.get(instance_id)
        assert stored.record == bench.stored[instance_id].record
        assert stored.version == len(expected)
    assert bench.notified == [child.id]
    assert bench.alarms == []
    for instance_id in bench.notified:
        assert instance_id in events.repository


def test_deadlines_are_enacted_after_their_commit(events: Events) -> None:
    """A committed timed macrostep hands exactly its deadlines to the runner, and nothing to follow up."""
    bench = Bench([TIMED])
    root, uow, _ = start_root(bench, TIMED)
    assert bench.alarms == []

    commit(bench, events, uow)
    bench.enact(uow)

    assert sorted(bench.alarms) == [(START + delay, root.id) for delay in (10.0, 20.0, 30.0, 50.0)]
    assert bench.notified == []
    assert events.repository.get(root.id).record == bench.stored[root.id].record


def test_an_instance_owned_by_another_engine_is_fenced_before_anything_is_decided(events: Events) -> None:
    """A unit of work refuses to fence an instance another engine owns, so nothing of it is saved."""
    stored: dict[UUID, Instance] = {}
    owner = Bench([PARENT, KID], stored=stored)
    root, uow, _ = start_root(owner, PARENT)
    commit(owner, events, uow)
    before = events.recorder.max_notification_id()
    other = Bench([PARENT, KID], engine_id="engine-b", stored=stored)

    unit = UnitOfWork(other)
    loaded = unit.load(root.id)
    assert loaded is not None
    with pytest.raises(Fenced) as refused:
        unit.fence(loaded)

    assert (refused.value.engine_id, refused.value.held, refused.value.owner) == (
        "engine-b",
        None,
        "engine-a",
    )
    assert unit.fenced == set()
    assert events.recorder.max_notification_id() == before


def test_a_unit_decided_on_a_copy_claimed_since_is_refused_whole(events: Events) -> None:
    """A unit decided before another engine's claim fails its one save whole, and is fenced on reload."""
    stored: dict[UUID, Instance] = {}
    owner = Bench([PARENT, KID], stored=stored)
    root, uow, _ = start_root(owner, PARENT)
    [child] = [instance for instance in uow.created.values() if instance.id != root.id]
    commit(owner, events, uow)
    sending = UnitOfWork(owner)
    inbox = sending.load(root.id)
    assert inbox is not None
    inbox.accept(Event("leave"), source=None, sent_at=owner.clock.now())
    commit(owner, events, sending)

    stale = UnitOfWork(owner)
    copy_before_claim = stale.load(root.id)
    assert copy_before_claim is not None
    stale.fence(copy_before_claim)
    decision = decide(owner, stale, copy_before_claim, careful=False)
    assert decision is not None and decision.kind == "stepped"
    cancelled_child = stale.loaded[child.id]
    assert cancelled_child is not None and names(cancelled_child) == ["CancelRequested"]

    other = Bench([PARENT, KID], engine_id="engine-b", stored=stored)
    claiming = UnitOfWork(other)
    claimed = claiming.load(root.id)
    assert claimed is not None
    other.held[root.id] = claimed.claim("engine-b", previous_incarnation=1, reason="taken over")
    events.save(claimed)
    stored[root.id] = claimed
    before = events.recorder.max_notification_id()

    with pytest.raises(IntegrityError):
        commit(owner, events, stale)

    assert events.recorder.max_notification_id() == before
    assert [type(e).__name__ for e in events.events.get(child.id)] == ["Started"]
    assert type(list(events.events.get(root.id))[-1]).__name__ == "Claimed"
    retry = UnitOfWork(owner)
    reloaded = retry.load(root.id)
    assert reloaded is not None
    with pytest.raises(Fenced) as refused:
        retry.fence(reloaded)
    assert (refused.value.held, refused.value.owner, refused.value.incarnation) == (1, "engine-b", 2)
