"""Stateful property: random starts, sends, births, failures, retries, timers and restarts."""

from __future__ import annotations

import itertools
from uuid import UUID

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from aggregates import Instance, InstanceStatus, Provenance
from incarnate import Engine, VirtualClock
from incarnate._work import UnitOfWork
from incarnate.testing import CrashPoint, SimulatedCrash, crash_at, memory_engine, restart
from projections import Checkpoint
from statechart import JsonValue
from tests.scenarios import charts

MEMBERS = st.lists(st.sampled_from(["a", "b", "c", "d"]), min_size=0, max_size=3, unique=True)


class EngineMachine(RuleBasedStateMachine):
    """Drives one engine over an in-memory store and checks the durable invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = VirtualClock(1000.0)
        self.engine: Engine = memory_engine(charts.ALL, {"charge": self.charge}, clock=self.clock)
        self.live: dict[tuple[UUID, int], Instance] = {}
        self.parents: list[UUID] = []
        self.incarnations: dict[tuple[UUID, str, str], list[tuple[int, int, Provenance]]] = {}
        self.failures = 0
        self._watch(self.engine)

    def charge(self, call: object) -> str:
        self.failures += 1
        if self.failures % 2:
            raise RuntimeError("declined")
        return "ok"

    def _watch(self, engine: Engine) -> None:
        def hook(point: str, uow: UnitOfWork) -> None:
            if point == "after-commit":
                for instance in [*uow.loaded.values(), *uow.created.values()]:
                    if instance is not None:
                        self.live[(instance.id, instance.version)] = instance

        engine.parts.commits.hooks.append(hook)

    def _settle(self) -> None:
        self.engine.run_until_idle(max_units=5_000)
        self._record_incarnations()

    def _record_incarnations(self) -> None:
        for parent_id in self.parents:
            for a in self.engine.instance(parent_id).record.activations:
                seen = self.incarnations.setdefault((parent_id, a.site, a.key), [])
                entry = (a.generation, a.attempt, a.provenance)
                if not seen or seen[-1] != entry:
                    seen.append(entry)

    def _running_children(self) -> list[UUID]:
        out = []
        for parent_id in self.parents:
            for a in self.engine.instance(parent_id).record.activations:
                child = self.engine.instance(a.child_id)
                if child.record.status is InstanceStatus.RUNNING:
                    out.append(child.id)
        return out

    @initialize(members=MEMBERS)
    def start_parent(self, members: list[str]) -> None:
        self.parents.append(self.engine.start("parent", {"members": list[JsonValue](members)}))
        self._settle()

    @rule(members=MEMBERS)
    def start_another(self, members: list[str]) -> None:
        self.parents.append(self.engine.start("parent", {"members": list[JsonValue](members)}))
        self._settle()

    @rule(data=st.data())
    def finish_a_child(self, data: st.DataObject) -> None:
        children = self._running_children()
        if children:
            child = data.draw(st.sampled_from(children))
            self.engine.send(child, "finish")
            self._settle()

    @rule(data=st.data())
    def fail_a_child(self, data: st.DataObject) -> None:
        children = self._running_children()
        if children:
            child = data.draw(st.sampled_from(children))
            self.engine.cancel(child, "failed on purpose")
            self._settle()

    @rule(data=st.data(), members=MEMBERS)
    def regroup(self, data: st.DataObject, members: list[str]) -> None:
        parent = data.draw(st.sampled_from(self.parents))
        if self.engine.instance(parent).record.status is InstanceStatus.RUNNING:
            self.engine.send(parent, "regroup", list(members))
            self._settle()

    @rule(data=st.data(), event=st.sampled_from(["leave", "back", "approve"]))
    def poke_parent(self, data: st.DataObject, event: str) -> None:
        parent = data.draw(st.sampled_from(self.parents))
        if self.engine.instance(parent).record.status is InstanceStatus.RUNNING:
            self.engine.send(parent, event)
            self._settle()

    @rule()
    def start_a_charge(self) -> None:
        self.engine.start("charging")
        self._settle()

    @rule(seconds=st.sampled_from([1.0, 2.0, 5.0, 30.0]))
    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self._settle()

    @precondition(lambda self: bool(self.parents))
    @rule()
    def restart_engine(self) -> None:
        before = {p: self.engine.instance(p).record.activations for p in self.parents}
        self.engine = restart(self.engine, clock=self.clock)
        self._watch(self.engine)
        after = {p: self.engine.instance(p).record.activations for p in self.parents}
        assert before == after, "a restart changed a retained incarnation"
        self._settle()

    @precondition(lambda self: bool(self.parents))
    @rule(
        data=st.data(),
        point=st.sampled_from([CrashPoint.BEFORE_COMMIT, CrashPoint.AFTER_COMMIT]),
        nth=st.integers(min_value=1, max_value=4),
        members=MEMBERS,
    )
    def crash_and_recover(self, data: st.DataObject, point: CrashPoint, nth: int, members: list[str]) -> None:
        """Crash at an arbitrary commit point, restart, and find every committed incarnation as it was."""
        parent = data.draw(st.sampled_from(self.parents))
        if self.engine.instance(parent).record.status is not InstanceStatus.RUNNING:
            return
        self.engine.send(parent, "regroup", list(members))
        try:
            with crash_at(self.engine, point, nth=nth):
                self.engine.run_until_idle(max_units=5_000)
        except SimulatedCrash:
            pass
        committed = {i.id: (i.record.activations, i.record.snapshot) for i in self.engine.instances()}
        self.engine = restart(self.engine, clock=self.clock)
        self._watch(self.engine)
        for instance in self.engine.instances():
            activations, snapshot = committed[instance.id]
            assert instance.record.activations == activations
            assert instance.record.snapshot == snapshot
            for before, after in zip(activations, instance.record.activations, strict=True):
                assert (after.generation, after.ref, after.attempt) == (
                    before.generation,
                    before.ref,
                    before.attempt,
                )
        self._settle()

    @invariant()
    def plan_equals_live_checkpoint(self) -> None:
        """The ResumePlan rebuilt from the stored events equals every instance's live checkpoint."""
        for instance in self.engine.instances():
            chart = self.engine.charts.get(instance.record.name)
            assert self.engine.plan(instance.id) == Checkpoint.of(instance, chart)

    @invariant()
    def live_equals_rebuilt(self) -> None:
        """Every aggregate as it was live after a commit equals its rebuild from stored events."""
        for (instance_id, version), live in self.live.items():
            rebuilt: Instance = self.engine.parts.journal.repository.get(instance_id, version=version)
            assert rebuilt.record == live.record, f"{instance_id} v{version} differs from its rebuild"
        self.live.clear()

    @invariant()
    def incarnations_follow_the_table(self) -> None:
        """Generations only grow; a retry is attempt + 1; a birth (first or re-added key) is attempt 1."""
        for history in self.incarnations.values():
            for (gen1, att1, _), (gen2, att2, prov2) in itertools.pairwise(history):
                assert gen2 > gen1
                if prov2 is Provenance.RETRY:
                    assert att2 == att1 + 1
                else:
                    assert att2 == 1

    @invariant()
    def one_live_incarnation_per_slot(self) -> None:
        """No child slot ever has two unfinished incarnations once the engine is idle."""
        unfinished: dict[tuple[UUID, str, str], list[UUID]] = {}
        for instance in self.engine.instances():
            instance_id, record = instance.id, instance.record
            if record.parent is not None and not record.status.finished:
                key = (record.parent.parent, record.parent.site, record.parent.key)
                unfinished.setdefault(key, []).append(instance_id)
        for key, ids in unfinished.items():
            assert len(ids) <= 1, f"slot {key} has live incarnations {ids}"
            parent = self.engine.instance(key[0])
            activation = parent.record.activation(key[1], key[2])
            assert activation is not None and activation.child_id == ids[0]

    def teardown(self) -> None:
        self.engine.close()


EngineMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=20, deadline=None)
TestEngineMachine = EngineMachine.TestCase
