"""Properties of the ResumePlan: exact rebuilds, detected corruption, undecodable snapshots.

Histories are lists of operations drawn by Hypothesis and applied to a fresh
in-memory engine in order; an operation that names "the n-th running kid" (or
parent, tree, root) takes it modulo how many there are, so every list applies.
The corruption properties then tamper with one instance's stored events and
predict, from the fold's rules, which checkpoint error names which slot.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

import attrs
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from aggregates import Instance, InstanceKind, InstanceSnapshot, InstanceStatus, Ref
from incarnate import DeterministicRunner, Engine, Storage, TaskCall, VirtualClock
from incarnate.testing import memory_engine
from projections import (
    Checkpoint,
    CheckpointError,
    CheckpointUndecodable,
    CorruptedDelta,
    DuplicatedActivation,
    MismatchedActivation,
    OmittedActivation,
    ReorderedActivation,
    resume_plan,
)
from statechart import Chart, JsonValue, RetryPolicy, assign, final, invoke, state, transition
from tests.scenarios import charts
from tests.strategies import BIRTH_FACT_FIELDS, altered_birth_facts

# Example counts and deadlines come from the Hypothesis profile (tests/conftest.py); an
# example builds and runs a whole engine, so the speed health checks do not apply.
PROPERTY = settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# ---------------------------------------------------------------- histories


class World:
    """One engine over a fresh in-memory store, with a virtual clock and a flaky ``charge`` task."""

    def __init__(self, snapshot_interval: int | None = None, *, embed_tasks: bool = True) -> None:
        self.clock = VirtualClock(1000.0)
        self.calls = 0
        tasks = {"charge": self.charge}
        if snapshot_interval is None:
            self.engine = memory_engine(charts.ALL, tasks, clock=self.clock, embed_tasks=embed_tasks)
        else:
            self.engine = Engine(
                charts.ALL,
                tasks,
                storage=Storage.popo(f"resume-plan-{uuid.uuid4().hex}"),
                clock=self.clock,
                runner=DeterministicRunner(),
                snapshot_interval=snapshot_interval,
                embed_tasks=embed_tasks,
            )

    def charge(self, call: TaskCall) -> str:
        """Declines every other call, so charges go through ChildRetry and ChildResume."""
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("declined")
        return f"receipt-{self.calls}"

    def running(self, keep: Callable[[Instance], bool]) -> list[Instance]:
        """The running instances ``keep`` selects, in order of creation."""
        return [i for i in self.engine.instances() if i.record.status is InstanceStatus.RUNNING and keep(i)]

    def streamed(self) -> list[Instance]:
        """Every instance with an event stream of its own (an embedded task's is its parent's)."""
        instances = self.engine.instances()
        recorder = self.engine.parts.journal.recorder
        kept = [i for i in instances if recorder.select_events(i.id, limit=1)]
        assert all(i.record.kind is InstanceKind.TASK for i in instances if i not in kept)
        return kept

    def chart_of(self, instance: Instance) -> Chart[Any] | None:
        """The registered chart of an instance (None for a task)."""
        return self.engine.charts.get(instance.record.name)

    def close(self) -> None:
        self.engine.close()
        self.engine.storage.forget()


def _pick(instances: Sequence[Instance], n: int) -> Instance | None:
    return instances[n % len(instances)] if instances else None


def _configuration(instance: Instance) -> list[str]:
    snapshot = instance.record.snapshot
    return list(snapshot["configuration"]) if snapshot is not None else []


@attrs.frozen
class StartParent:
    """Start a ``parent`` fanning out over ``members``."""

    members: tuple[str, ...]

    def apply(self, world: World) -> None:
        world.engine.start("parent", {"members": list[JsonValue](self.members)})


@attrs.frozen
class Start:
    """Start a root of ``chart`` with its default input (``loop``, ``tree`` or ``charging``)."""

    chart: str

    def apply(self, world: World) -> None:
        world.engine.start(self.chart)


@attrs.frozen
class FinishKid:
    """Send ``finish`` to the n-th running ``kid``: its parent consumes the output."""

    pick: int

    def apply(self, world: World) -> None:
        kid = _pick(world.running(lambda i: i.record.name == "kid"), self.pick)
        if kid is not None:
            world.engine.send(kid.id, "finish")


@attrs.frozen
class FailChild:
    """Cancel the n-th running child chart: its parent sees a failure (and retries, if it may)."""

    pick: int

    def apply(self, world: World) -> None:
        children = world.running(
            lambda i: i.record.parent is not None and i.record.kind is InstanceKind.CHART
        )
        child = _pick(children, self.pick)
        if child is not None:
            world.engine.cancel(child.id, "failed on purpose")


@attrs.frozen
class Regroup:
    """Send ``regroup`` to the n-th running ``parent``: members added are born, members removed cancelled."""

    pick: int
    members: tuple[str, ...]

    def apply(self, world: World) -> None:
        parent = _pick(world.running(lambda i: i.record.name == "parent"), self.pick)
        if parent is not None:
            world.engine.send(parent.id, "regroup", list[JsonValue](self.members))


@attrs.frozen
class Poke:
    """Send ``leave``, ``back`` or ``approve`` to the n-th running ``parent``."""

    pick: int
    event: str

    def apply(self, world: World) -> None:
        parent = _pick(world.running(lambda i: i.record.name == "parent"), self.pick)
        if parent is not None:
            world.engine.send(parent.id, self.event)


@attrs.frozen
class Wither:
    """Send ``wither`` to the n-th ``tree`` sitting in ``leaf``: it completes and its ancestors follow."""

    pick: int

    def apply(self, world: World) -> None:
        leaves = world.running(lambda i: i.record.name == "tree" and "leaf" in _configuration(i))
        leaf = _pick(leaves, self.pick)
        if leaf is not None:
            world.engine.send(leaf.id, "wither")


@attrs.frozen
class CancelRoot:
    """Cancel the n-th running root: its children are cancelled in cascade."""

    pick: int

    def apply(self, world: World) -> None:
        root = _pick(world.running(lambda i: i.record.parent is None), self.pick)
        if root is not None:
            world.engine.cancel(root.id, "stopped by an operator")


@attrs.frozen
class Advance:
    """Move the virtual clock on: retry backoffs and timers fall due."""

    seconds: float

    def apply(self, world: World) -> None:
        world.clock.advance(self.seconds)


Operation = StartParent | Start | FinishKid | FailChild | Regroup | Poke | Wither | CancelRoot | Advance

MEMBERS = st.lists(st.sampled_from("abcd"), max_size=3, unique=True).map(tuple)
PICK = st.integers(min_value=0, max_value=20)
STARTS: st.SearchStrategy[Operation] = st.one_of(
    st.builds(StartParent, MEMBERS), st.builds(Start, st.sampled_from(["loop", "tree", "charging"]))
)
OPERATIONS: st.SearchStrategy[Operation] = st.one_of(
    STARTS,
    st.builds(FinishKid, PICK),
    st.builds(FailChild, PICK),
    st.builds(Regroup, PICK, MEMBERS),
    st.builds(Poke, PICK, st.sampled_from(["leave", "back", "approve"])),
    st.builds(Wither, PICK),
    st.builds(CancelRoot, PICK),
    st.builds(Advance, st.sampled_from([1.0, 2.0, 5.0, 30.0])),
)
HISTORIES = st.builds(lambda first, rest: [first, *rest], STARTS, st.lists(OPERATIONS, max_size=20))


def _rich(members: tuple[str, ...], rest: list[Operation]) -> list[Operation]:
    # A parent whose first kid fails, is retried and resumed, which then gains a member
    # (a Birth after its first macrostep) and whose first running kid finishes; then a loop
    # whose first round (the newest running kid) finishes, so that one commit settles a slot
    # and births it again. Every kind of activation fact precedes the random part.
    seed: list[Operation] = [StartParent(members), FailChild(0), Advance(30.0), Regroup(0, (*members, "e"))]
    return [*seed, FinishKid(0), Start("loop"), FinishKid(-1), *rest]


RICH_HISTORIES = st.builds(
    _rich,
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=3, unique=True).map(tuple),
    st.lists(OPERATIONS, max_size=10),
)


@contextlib.contextmanager
def recorded(
    history: Sequence[Operation], *, snapshot_interval: int | None = None, embed_tasks: bool = True
) -> Iterator[World]:
    """An engine that has applied ``history``, each operation followed by running until idle.

    ``embed_tasks=False``: task children have streams of their own (see ``Engine``).
    """
    world = World(snapshot_interval, embed_tasks=embed_tasks)
    try:
        for operation in history:
            operation.apply(world)
            world.engine.run_until_idle(max_units=5_000)
        yield world
    finally:
        world.close()


# ---------------------------------------------------------------- event helpers

BOUNDARIES = (Instance.Stepped, Instance.Migrated)
FACTS = (Instance.Birth, Instance.ChildRetry, Instance.ChildResume, Instance.ChildSettled)


def ref_of(fact: Any) -> Ref:
    """The Ref an activation fact names."""
    ref: Ref = fact.facts.ref if isinstance(fact, Instance.Birth | Instance.ChildResume) else fact.ref
    return ref


def slot_name(ref: Ref) -> str:
    """How checkpoint errors name a slot: ``site[key]``, or ``site`` for an unkeyed site."""
    return f"{ref.site}[{ref.key}]" if ref.key else ref.site


def changed(stored: Any, **changes: Any) -> Any:
    """A copy of a stored (frozen dataclass) event with ``changes``."""
    # Events declare their fields as annotations that the domain's metaclass turns into
    # dataclass fields, which type checkers cannot see: hence ``Any``.
    return dataclasses.replace(stored, **changes)


def renumbered(events: Sequence[Any]) -> list[Any]:
    """The events with consecutive versions, as a store would hold them."""
    return [changed(e, originator_version=n) for n, e in enumerate(events, start=1)]


def indices(events: Sequence[Any], kind: type | tuple[type, ...]) -> list[int]:
    return [n for n, e in enumerate(events) if isinstance(e, kind)]


def next_boundary(events: Sequence[Any], index: int) -> int:
    """The index of the first macrostep boundary after ``index`` (or the end)."""
    return next((n for n in range(index + 1, len(events)) if isinstance(events[n], BOUNDARIES)), len(events))


def own_step(events: Sequence[Any], index: int) -> int:
    """The index of the Stepped whose commit recorded the fact at ``index``."""
    return max(n for n in range(index) if isinstance(events[n], Instance.Stepped))


def retained(events: Sequence[Any]) -> dict[tuple[str, str], Ref]:
    """The incarnation each slot retains after ``events`` (an oracle independent of the fold)."""
    slots: dict[tuple[str, str], Ref] = {}
    for fact in events:
        if isinstance(fact, Instance.Birth | Instance.ChildResume):
            slots[(fact.facts.ref.site, fact.facts.ref.key)] = fact.facts.ref
        elif isinstance(fact, Instance.ChildSettled):
            slots.pop((fact.ref.site, fact.ref.key), None)
    return slots


@attrs.frozen
class Stream:
    """The stored events of one instance, and the chart they are planned against."""

    instance_id: UUID
    events: tuple[Any, ...]
    chart: Chart[Any] | None


def unfused(events: Sequence[Any]) -> list[Any]:
    """Format-2 events as the format-1 facts they stand for: ``Accepted``, ``Stepped``, ``ChildSettled``s."""
    out: list[Any] = []
    for e in events:
        if not isinstance(e, Instance.Stepped) or (e.received is None and not e.settled):
            out.append(e)
            continue
        head: dict[str, Any] = {
            "originator_id": e.originator_id,
            "originator_version": 0,
            "timestamp": e.timestamp,
        }
        accepted: Any = Instance.Accepted
        if e.received is not None:
            out.append(accepted(**head, message=e.received))
        out.append(changed(e, received=None, settled=()))
        settled: Any = Instance.ChildSettled  # the domain's metaclass makes its fields: see ``changed``
        out.extend(settled(**head, ref=ref, settlement=how) for ref, how in e.settled)
    return renumbered(out)


def fused(events: Sequence[Any]) -> list[Any]:
    """Format-1 facts joined as the engine stores them since format 2 (the inverse of :func:`unfused`).

    An ``Accepted`` right before the ``Stepped`` that consumes its message
    becomes that step's ``received``; ``ChildSettled`` events right after a
    ``Stepped`` join its ``settled``.
    """
    out: list[Any] = []
    for e in events:
        last = out[-1] if out else None
        if (
            isinstance(e, Instance.Stepped)
            and isinstance(last, Instance.Accepted)
            and e.received is None
            and e.consumed == last.message.seq
        ):
            out[-1] = changed(e, received=last.message)
        elif isinstance(e, Instance.ChildSettled) and isinstance(last, Instance.Stepped):
            out[-1] = changed(last, settled=(*last.settled, (e.ref, e.settlement)))
        else:
            out.append(e)
    return renumbered(out)


def streams(world: World, *, as_stored: bool = False) -> list[Stream]:
    """Every instance whose events hold at least one Birth, each fact an event of its own (format 1).

    ``as_stored``: the events as the store holds them (format 2) instead.
    """
    found = []
    for instance in world.engine.instances():
        events = tuple(world.engine.parts.journal.events.get(instance.id))
        if not as_stored:
            events = tuple(unfused(events))
        if indices(events, Instance.Birth):
            found.append(Stream(instance.id, events, world.chart_of(instance)))
    return found


def draw_target(data: st.DataObject, world: World, kinds: Sequence[type]) -> tuple[Stream, int]:
    """A kind of fact among ``kinds`` that the history holds, then one (stream, index) of that kind."""
    found = streams(world)
    present = [k for k in kinds if any(indices(s.events, k) for s in found)]
    kind = data.draw(st.sampled_from(present), label="kind of fact")
    event(f"target {kind.__name__}")
    candidates = [(s, n) for s in found for n in indices(s.events, kind)]
    return candidates[data.draw(st.integers(0, len(candidates) - 1), label="target")]


def assert_detected(
    events: Sequence[Any],
    chart: Chart[Any] | None,
    expected: type[CheckpointError],
    slot: str,
    *,
    data: st.DataObject,
) -> None:
    """Planning ``events`` raises exactly ``expected`` (never a plan), naming ``slot`` in the message.

    The corrupted events are planned in one of the two stored formats, drawn:
    as they are (every fact an event of its own, format 1), or with each
    macrostep's settlements, and a message its macrostep accepted, joined
    to its ``Stepped`` event as the engine stores them since format 2.
    """
    # Every corruption below has one class the fold must report, predicted from the clean
    # events alone; none is left to a choice between classes.
    form = data.draw(st.sampled_from([1, 2]), label="stored format")
    event(f"format {form}")
    if form == 2:
        events = fused(events)
    with pytest.raises(CheckpointError) as caught:
        resume_plan(events, chart)
    error = caught.value
    event(f"{type(error).__name__}")
    assert type(error) is expected, f"{type(error).__name__} ({error}), expected {expected.__name__}"
    assert error.slot == slot, f"the error names {error.slot!r}, not {slot!r}: {error}"
    assert f"slot {slot}:" in str(error)


# ---------------------------------------------------------------- rebuild is exact


@PROPERTY
@given(history=HISTORIES, embed=st.booleans())
def test_plan_of_every_instance_equals_its_live_checkpoint(history: list[Operation], embed: bool) -> None:
    """For any history, the ResumePlan folded from all of an instance's events equals its live checkpoint.

    Drawn: task children embedded in their parents (the default), or with streams of their own.
    """
    with recorded(history, embed_tasks=embed) as world:
        for instance in world.streamed():
            chart = world.chart_of(instance)
            events = list(world.engine.parts.journal.events.get(instance.id))
            assert resume_plan(events, chart) == Checkpoint.of(instance, chart), instance
            assert world.engine.plan(instance.id) == Checkpoint.of(instance, chart)
            # The same facts stored one event each (format 1) rebuild the same checkpoint.
            older = resume_plan(unfused(events), chart)
            assert older == attrs.evolve(Checkpoint.of(instance, chart), version=older.version)


@PROPERTY
@given(history=HISTORIES, interval=st.integers(min_value=1, max_value=7), embed=st.booleans())
def test_plan_from_any_stored_snapshot_equals_the_full_rebuild(
    history: list[Operation], interval: int, embed: bool
) -> None:
    """Resuming from every stored snapshot version plus the events after it equals folding every event."""
    with recorded(history, snapshot_interval=interval, embed_tasks=embed) as world:
        store = world.engine.parts.journal.snapshots
        assert store is not None
        taken = 0
        for instance in world.streamed():
            chart = world.chart_of(instance)
            events = list(world.engine.parts.journal.events.get(instance.id))
            full = resume_plan(events, chart)
            assert full == Checkpoint.of(instance, chart), instance
            for snapshot in store.get(instance.id):
                assert isinstance(snapshot, InstanceSnapshot)
                taken += 1
                version = snapshot.originator_version
                tail = [e for e in events if e.originator_version > version]
                assert resume_plan(tail, chart, start=snapshot) == full, f"{instance} from v{version}"
                # Events up to the snapshot's version are skipped when given.
                assert resume_plan(events, chart, start=snapshot) == full, f"{instance} from v{version}"
            latest, after = world.engine.parts.journal.stored(instance.id)
            assert resume_plan(after, chart, start=latest) == full
        event(f"snapshots taken: {'none' if not taken else 'some'}")


# ---------------------------------------------------------------- corruption is detected


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_dropping_a_birth_is_an_omitted_activation(history: list[Operation], data: st.DataObject) -> None:
    """Without one of its Birth facts, an instance's plan raises OmittedActivation naming the slot."""
    with recorded(history) as world:
        stream, index = draw_target(data, world, [Instance.Birth])
    events = stream.events
    ref = ref_of(events[index])
    # Until the next boundary nothing checks the slot, unless a later fact of the same commit
    # names it: a ChildRetry or ChildResume finds no activation (omitted), a ChildSettled
    # reads as a second settlement (duplicated). Otherwise the boundary check (or the final
    # one) finds the snapshot's live slot with no activation, the first slot to fail.
    expected: type[CheckpointError] = OmittedActivation
    for fact in events[index + 1 : next_boundary(events, index)]:
        if isinstance(fact, FACTS) and (ref_of(fact).site, ref_of(fact).key) == (ref.site, ref.key):
            if isinstance(fact, Instance.ChildSettled):
                expected = DuplicatedActivation
            break
    corrupted = renumbered([*events[:index], *events[index + 1 :]])
    assert_detected(corrupted, stream.chart, expected, slot_name(ref), data=data)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_duplicating_an_activation_fact_is_a_duplicated_activation(
    history: list[Operation], data: st.DataObject
) -> None:
    """A second copy of a Birth, ChildRetry or ChildResume before the next boundary is duplicated."""
    with recorded(history) as world:
        stream, index = draw_target(data, world, [Instance.Birth, Instance.ChildRetry, Instance.ChildResume])
    events = stream.events
    fact = events[index]
    # Until the next boundary the other facts of the commit name other slots, so wherever the
    # copy lands the fold meets it while the original still holds the slot.
    at = data.draw(st.integers(index + 1, next_boundary(events, index)), label="copy inserted at")
    event(f"duplicated {type(fact).__name__}")
    corrupted = renumbered([*events[:at], fact, *events[at:]])
    assert_detected(corrupted, stream.chart, DuplicatedActivation, slot_name(ref_of(fact)), data=data)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_facts_out_of_causal_order_are_reordered_activations(
    history: list[Operation], data: st.DataObject
) -> None:
    """A ChildResume swapped with its ChildRetry, or a Birth put before its Stepped, is out of order."""
    with recorded(history) as world:
        found = streams(world)
    swaps = [
        (s, i, j)
        for s in found
        for i in indices(s.events, Instance.ChildRetry)
        for j in indices(s.events, Instance.ChildResume)
        if s.events[j].facts.previous == s.events[i].ref
    ]
    # Births of a first macrostep and of later ones fail different checks: draw from each alike.
    first: list[tuple[Stream, int, int]] = []
    later: list[tuple[Stream, int, int]] = []
    for s in found:
        first_step = indices(s.events, Instance.Stepped)[0]
        for i in indices(s.events, Instance.Birth):
            stepped = own_step(s.events, i)
            (first if stepped == first_step else later).append((s, i, stepped))
    assert swaps, "the history always retries and resumes a kid"
    kind = data.draw(st.sampled_from(["swap retry and resume", "move a birth before its step"]), label="kind")
    event(kind)
    if kind == "swap retry and resume":
        stream, retry, resume = swaps[data.draw(st.integers(0, len(swaps) - 1), label="swap")]
        events = list(stream.events)
        events[retry], events[resume] = events[resume], events[retry]
        ref = ref_of(events[retry])
        # The fold meets the resume while the slot's activation is still running.
        assert_detected(renumbered(events), stream.chart, ReorderedActivation, slot_name(ref), data=data)
        return
    pool = data.draw(st.sampled_from([p for p in (first, later) if p]), label="first or later step")
    stream, birth, stepped = pool[data.draw(st.integers(0, len(pool) - 1), label="move")]
    events = list(stream.events)
    fact = events.pop(birth)
    events.insert(stepped, fact)
    ref = ref_of(fact)
    # Before its Stepped the Birth is one macrostep early (Reordered) — unless that very
    # macrostep settled the slot's previous incarnation (a loop re-entering its site):
    # then the slot is still retained when the early Birth arrives, and the fold reports
    # the second incarnation as a duplicate before it can look at the step numbers.
    still_held = (ref.site, ref.key) in retained(stream.events[:stepped])
    expected = DuplicatedActivation if still_held else ReorderedActivation
    assert_detected(renumbered(events), stream.chart, expected, slot_name(ref), data=data)


SHIFTS = st.sampled_from([-3, -2, -1, 1, 2, 3])
ALTERATIONS = {
    Instance.Birth: ("generation", "attempt", "armed_step", "input", "parent", *BIRTH_FACT_FIELDS),
    Instance.ChildRetry: ("generation", "attempt", "parent"),
    Instance.ChildResume: (
        "generation",
        "attempt",
        "armed_step",
        "input",
        "parent",
        "previous",
        *BIRTH_FACT_FIELDS,
    ),
}


def altered(fact: Any, field: str, data: st.DataObject) -> Any:
    """A copy of ``fact`` with ``field`` changed to a different value drawn from ``data``."""
    shift = data.draw(SHIFTS, label=f"{field} shifted by")
    if isinstance(fact, Instance.ChildRetry):
        if field == "attempt":
            return changed(fact, attempt=fact.attempt + shift)
        return changed(fact, ref=altered_ref(fact.ref, field, shift, data))
    facts = fact.facts
    if field in BIRTH_FACT_FIELDS:
        new = data.draw(altered_birth_facts(facts, field), label=f"altered {field}")
    elif field == "attempt":
        new = attrs.evolve(facts, attempt=facts.attempt + shift)
    elif field == "armed_step":
        new = attrs.evolve(facts, armed_step=facts.armed_step + shift)
    elif field == "input":
        new = attrs.evolve(facts, input={"altered": facts.input})
    elif field == "previous":
        new = attrs.evolve(facts, previous=altered_ref(facts.previous, "generation", shift, data))
    else:
        new = attrs.evolve(facts, ref=altered_ref(facts.ref, field, shift, data))
    return changed(fact, facts=new)


def altered_ref(ref: Ref, field: str, shift: int, data: st.DataObject) -> Ref:
    if field == "generation":
        return attrs.evolve(ref, generation=ref.generation + shift)
    assert field == "parent"
    parent = data.draw(st.uuids().filter(lambda u: u != ref.parent), label="another parent")
    return attrs.evolve(ref, parent=parent)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_an_altered_activation_fact_is_a_mismatched_activation(
    history: list[Operation], data: st.DataObject
) -> None:
    """Any altered fact of a Birth, ChildRetry or ChildResume is mismatched (reordered: its armed step)."""
    with recorded(history) as world:
        stream, index = draw_target(data, world, list(ALTERATIONS))
    fact = stream.events[index]
    field = data.draw(st.sampled_from(ALTERATIONS[type(fact)]), label="field")
    event(f"{type(fact).__name__}.{field}")
    events = list(stream.events)
    events[index] = altered(fact, field, data)
    # The fold compares the armed step with the macrostep the fact follows, before any
    # comparison with the snapshot: a different step reads as a fact out of causal order.
    # Every other field fails the fact's own checks against the activation it replaces, or
    # against the instance (type, root, ancestry) and the BirthChild or ResumeChild effect of
    # its macrostep (chart or task, state, input, attempt, lineage), or the next boundary's
    # comparison with the snapshot's slot.
    expected: type[CheckpointError] = ReorderedActivation if field == "armed_step" else MismatchedActivation
    changed = events[index]
    if isinstance(changed, Instance.ChildResume) and field == "generation":
        # A resume shifted onto the generation the slot already holds repeats that resume.
        held = retained(stream.events[:index]).get((ref_of(fact).site, ref_of(fact).key))
        if held is not None and held.generation == ref_of(changed).generation:
            expected = DuplicatedActivation
    assert_detected(events, stream.chart, expected, slot_name(ref_of(fact)), data=data)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_dropping_a_settlement_or_resume_is_detected(history: list[Operation], data: st.DataObject) -> None:
    """Without a ChildSettled or a ChildResume, the retained activations no longer match the snapshot."""
    with recorded(history) as world:
        stream, index = draw_target(data, world, [Instance.ChildSettled, Instance.ChildResume])
    events = stream.events
    fact = events[index]
    ref = ref_of(fact)
    event(f"dropped {type(fact).__name__}")
    same_commit = events[index + 1 : next_boundary(events, index)]
    reborn = any(
        isinstance(e, Instance.Birth) and (ref_of(e).site, ref_of(e).key) == (ref.site, ref.key)
        for e in same_commit
    )
    if isinstance(fact, Instance.ChildResume):
        # The slot stays retrying at the old generation; the boundary check sees the snapshot's
        # fresh running incarnation.
        expected: type[CheckpointError] = MismatchedActivation
    elif reborn:
        # A loop re-entering its site in the same macrostep: the new Birth finds the old
        # incarnation still retained.
        expected = DuplicatedActivation
    else:
        # The old incarnation outlives its slot: retained, but the snapshot keeps nothing live there.
        expected = MismatchedActivation
    corrupted = renumbered([*events[:index], *events[index + 1 :]])
    assert_detected(corrupted, stream.chart, expected, slot_name(ref), data=data)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_a_settlement_naming_another_incarnation_is_detected(
    history: list[Operation], data: st.DataObject
) -> None:
    """A ChildSettled naming an incarnation its slot does not retain is mismatched or duplicated."""
    with recorded(history) as world:
        stream, index = draw_target(data, world, [Instance.ChildSettled])
    fact = stream.events[index]
    held = retained(stream.events[:index])
    field = data.draw(st.sampled_from(["generation", "parent", "key"]), label="field")
    if field == "key":
        others = sorted(k for (site, k) in held if site == fact.ref.site and k != fact.ref.key)
        key = data.draw(st.sampled_from([*others, f"{fact.ref.key}-gone"]), label="key")
        ref = attrs.evolve(fact.ref, key=key)
    else:
        shift = data.draw(SHIFTS, label="shifted by")
        ref = altered_ref(fact.ref, field, shift, data)
    # A settlement names an incarnation: if its slot retains another one, the two disagree;
    # if the slot retains nothing, it reads as the slot's second settlement.
    expected = MismatchedActivation if (ref.site, ref.key) in held else DuplicatedActivation
    event(f"ChildSettled.{field} -> {expected.__name__}")
    events = list(stream.events)
    events[index] = changed(fact, ref=ref)
    assert_detected(events, stream.chart, expected, slot_name(ref), data=data)


# ---------------------------------------------------------------- undecodable snapshots

PARENT_STATES = ("gathering", "idle", "reviewing", "approved", "failed")


def parent_chart_renaming(renamed: frozenset[str]) -> Chart[charts.Family]:
    """A chart named ``parent``, shaped like the sample one, with the ``renamed`` states under new names."""

    def name(state_id: str) -> str:
        return f"{state_id}_v2" if state_id in renamed else state_id

    return Chart(
        "parent",
        state(
            name("gathering"),
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
                transition("done.invoke.team", name("reviewing")),
                transition("error.invoke.team", name("failed"), actions=[assign(charts.note_error)]),
                transition("regroup", actions=[assign(charts.set_members)]),
                transition("leave", name("idle")),
            ],
        ),
        state(name("idle"), on=[transition("back", name("gathering"))]),
        state(name("reviewing"), on=[transition("approve", name("approved"))]),
        final(name("approved")),
        final(name("failed")),
        context=charts.Family,
    )


@PROPERTY
@given(
    history=st.builds(
        lambda first, rest: [first, *rest], st.builds(StartParent, MEMBERS), st.lists(OPERATIONS, max_size=8)
    ),
    data=st.data(),
)
def test_a_snapshot_naming_states_the_chart_lacks_is_undecodable(
    history: list[Operation], data: st.DataObject
) -> None:
    """Planning a parent against a same-named chart lacking the states it occupies is undecodable."""
    with recorded(history) as world:
        parents = [i for i in world.engine.instances() if i.record.name == "parent"]
        parent = parents[data.draw(st.integers(0, len(parents) - 1), label="parent")]
        events = list(world.engine.parts.journal.events.get(parent.id))
    occupied = set(_configuration(parent))
    assert occupied <= set(PARENT_STATES)
    more = data.draw(st.sets(st.sampled_from(PARENT_STATES)), label="also renamed")
    event(f"configuration {sorted(occupied)}")
    with pytest.raises(CheckpointUndecodable) as caught:
        resume_plan(events, parent_chart_renaming(frozenset(occupied | more)))
    assert caught.value.instance_id == parent.id
    message = str(caught.value)
    assert str(parent.id) in message
    assert all(repr(name) in message for name in occupied), message


# ---------------------------------------------------------------- deltas


def whole_snapshot_form(world: World, stream: Stream) -> list[Any]:
    """The stream as it was stored before deltas: each Stepped event carrying the whole snapshot."""
    out = []
    for e in stream.events:
        if isinstance(e, Instance.Stepped):
            at: Instance = world.engine.parts.journal.repository.get(
                stream.instance_id, version=e.originator_version
            )
            whole = at.record.snapshot
            out.append(changed(e, snapshot=whole, parts=None, added=(), changed=(), removed=()))
        else:
            out.append(e)
    return out


@PROPERTY
@given(history=RICH_HISTORIES, interval=st.none() | st.integers(min_value=1, max_value=7))
def test_a_delta_stream_rebuilds_the_live_checkpoint(history: list[Operation], interval: int | None) -> None:
    """Stepped events carry deltas (never a whole snapshot), and folding them, from the first event or
    from any stored snapshot, gives the live aggregate's checkpoint; so does the same stream in the
    whole-snapshot form stored before deltas."""
    with recorded(history, snapshot_interval=interval) as world:
        store = world.engine.parts.journal.snapshots
        assert store is not None
        for stream in streams(world, as_stored=True):
            instance = world.engine.instance(stream.instance_id)
            live = Checkpoint.of(instance, stream.chart)
            steps = [e for e in stream.events if isinstance(e, Instance.Stepped)]
            assert steps and all(e.snapshot is None and e.parts is not None for e in steps)
            assert resume_plan(stream.events, stream.chart) == live
            for snapshot in store.get(stream.instance_id):
                assert isinstance(snapshot, InstanceSnapshot)
                assert resume_plan(stream.events, stream.chart, start=snapshot) == live
            assert resume_plan(whole_snapshot_form(world, stream), stream.chart) == live


def _slot_key(slot: dict[str, Any]) -> tuple[str, str]:
    return (slot["site"], slot["key"])


def _draw_step(data: st.DataObject, events: Sequence[Any], keep: Callable[[Any], bool]) -> int | None:
    candidates = [n for n in indices(events, Instance.Stepped) if keep(events[n])]
    if not candidates:
        return None
    return candidates[data.draw(st.integers(0, len(candidates) - 1), label="step")]


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data())
def test_removing_a_slot_twice_is_a_corrupted_delta(history: list[Operation], data: st.DataObject) -> None:
    """A Stepped event that removes a slot an earlier one removed names the slot in a CorruptedDelta."""
    with recorded(history) as world:
        stream = data.draw(st.sampled_from(streams(world)), label="stream")
    events = list(stream.events)
    first = _draw_step(data, events, lambda e: bool(e.removed))
    if first is None:
        event("no removal")
        return
    site, key = events[first].removed[0]
    later = [n for n in indices(events, Instance.Stepped) if n > first]
    again = later[data.draw(st.integers(0, len(later) - 1), label="again")] if later else None
    if (
        again is None
        or any(_slot_key(s) == (site, key) for s in events[again].added)
        or any(_slot_key(s) == (site, key) for n in later if n < again for s in events[n].added)
    ):
        # Removed again in its own event, or after the slot came back: still the second removal.
        events[first] = changed(events[first], removed=(*events[first].removed, (site, key)))
    else:
        events[again] = changed(events[again], removed=((site, key), *events[again].removed))
    with pytest.raises(CorruptedDelta) as caught:
        resume_plan(events, stream.chart)
    assert caught.value.slot == (f"{site}[{key}]" if key else site), caught.value
    assert f"slot {caught.value.slot}:" in str(caught.value)


@PROPERTY
@given(history=RICH_HISTORIES, data=st.data(), mode=st.sampled_from(["changed", "removed", "added"]))
def test_a_delta_naming_a_missing_or_present_slot_is_a_corrupted_delta(
    history: list[Operation], data: st.DataObject, mode: str
) -> None:
    """Changing or removing a slot that does not exist, or adding one that does, names it."""
    with recorded(history) as world:
        stream = data.draw(st.sampled_from(streams(world)), label="stream")
    events = list(stream.events)
    index = _draw_step(data, events, lambda e: True)
    assert index is not None
    step = events[index]
    if mode == "added":
        before = resume_plan(events[:index], stream.chart).snapshot
        present = [
            s
            for s in (before.children if before is not None else ())
            if (s.site, s.key) not in set(step.removed)
        ]
        if not present:
            event("no slot to add twice")
            return
        slot = present[0]
        site, key = slot.site, slot.key
        encoded = {"site": site, "key": key, "generation": slot.generation}
        events[index] = changed(step, added=(*step.added, encoded))
    else:
        site, key = "team", "no-such-member"
        if mode == "changed":
            events[index] = changed(
                step, changed=(*step.changed, {"site": site, "key": key, "generation": 1})
            )
        else:
            events[index] = changed(step, removed=(*step.removed, (site, key)))
    name = f"{site}[{key}]" if key else site
    with pytest.raises(CorruptedDelta) as caught:
        resume_plan(events, stream.chart)
    assert caught.value.slot == name, caught.value
    assert f"slot {name}:" in str(caught.value)
