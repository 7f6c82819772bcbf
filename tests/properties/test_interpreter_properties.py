"""Properties of the interpreter over random charts and scripts (see ``tests/strategies.py``).

Every property runs a generated chart through a generated script and checks
each macrostep: determinism, the codec round trip, the legality of the
configuration, the immutability of the inputs, and the bookkeeping of child
slots. The checkers below are written from the SCXML rules and the snapshot's
documented meaning, not from the interpreter's own tables.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence

from hypothesis import example, given, note

from statechart import Chart, always, assign, state
from statechart.codec import SnapshotCodec
from statechart.effects import BirthChild, CancelChild, ResumeChild
from statechart.model import StateKind
from statechart.snapshot import SlotStatus, Status
from tests.strategies import (
    Call,
    Counter,
    Outcome,
    ScriptItem,
    Trace,
    fails_when_odd,
    increment,
    perform,
    rebuild,
    scenarios,
    trace_script,
)

Scenario = tuple[Chart[Counter], tuple[ScriptItem, ...]]


def _show(chart: Chart[Counter], script: Sequence[ScriptItem]) -> None:
    note(f"chart:\n{chart.description}")
    note(f"script: {list(script)!r}")


# ------------------------------------------------------------- checkers


def configuration_problems(chart: Chart[Counter], configuration: Sequence[str]) -> list[str]:
    """Every way ``configuration`` breaks SCXML's legal-configuration rules (3.11) for ``chart``."""
    order = {state_id: n for n, state_id in enumerate(chart.state_ids)}
    unknown = [s for s in configuration if s not in order]
    if unknown:
        return [f"unknown states {unknown}"]
    problems: list[str] = []
    if list(configuration) != sorted(set(configuration), key=order.__getitem__):
        problems.append(f"{list(configuration)} is not in document order without repeats")
    active = set(configuration)
    children: dict[str | None, list[str]] = {}
    for state_id in chart.state_ids:
        if chart.kind_of(state_id) is not StateKind.HISTORY:
            children.setdefault(chart.parent_of(state_id), []).append(state_id)
    for state_id in configuration:
        if chart.kind_of(state_id) is StateKind.HISTORY:
            problems.append(f"history state {state_id!r} is active")
        parent = chart.parent_of(state_id)
        if parent is not None and parent not in active:
            problems.append(f"{state_id!r} is active but its parent {parent!r} is not")
    for owner in (None, *configuration):
        kind = StateKind.COMPOUND if owner is None else chart.kind_of(owner)
        on = [c for c in children.get(owner, []) if c in active]
        if kind is StateKind.COMPOUND and len(on) != 1:
            problems.append(f"compound {owner or 'root'!r} has active children {on}, not exactly one")
        if kind is StateKind.PARALLEL and len(on) != len(children[owner]):
            problems.append(f"parallel {owner!r} has active regions {on} of {children[owner]}")
    return problems


def slot_problems(chart: Chart[Counter], before: int, outcome: Outcome, born: set[int]) -> list[str]:
    """Every way a macrostep's child slots and child effects break their bookkeeping rules.

    ``before`` is the ``next_generation`` the step started from; ``born``
    holds every generation born or resumed earlier in the run (and is extended).
    """
    snapshot, effects = outcome
    problems: list[str] = []
    active = set(snapshot.configuration)
    running = snapshot.status is Status.RUNNING
    generations = [slot.generation for slot in snapshot.children if slot.generation != 0]
    if len(generations) != len(set(generations)):
        problems.append(f"generations {generations} repeat")
    for slot in snapshot.children:
        name = f"slot {slot.site}[{slot.key}]#{slot.generation} ({slot.status.value})"
        site_state = chart.ids[chart.site_state[slot.site]] if slot.site in chart.site_by_id else None
        if site_state != slot.state:
            problems.append(f"{name} claims state {slot.state!r}; its site is on {site_state!r}")
        if slot.live and not (running and slot.state in active):
            problems.append(f"{name} is live but its state is inactive or the instance finished")
        if not slot.generation < snapshot.next_generation:
            problems.append(f"{name} is not below next_generation {snapshot.next_generation}")
        if slot.generation == 0 and slot.status is not SlotStatus.FAILED:
            problems.append(f"{name} was never born but is not failed")
    if running:
        for site, state_id in chart.child_charts():
            keys = {slot.key for slot in snapshot.children if slot.site == site.id}
            if state_id not in active:
                continue
            if site.members is None:
                expected = {""}
            else:
                try:
                    expected = set(site.members(snapshot.context))
                except ValueError:
                    continue  # membership cannot be computed now, so the slots keep an older one
            if keys != expected:
                problems.append(f"site {site.id!r} on active {state_id!r} has slots {keys}, not {expected}")
    live_after = {slot.invoke_id for slot in snapshot.children if slot.live}
    for effect in effects:
        if isinstance(effect, BirthChild | ResumeChild):
            generation = effect.invoke_id.generation
            if generation in born or not before <= generation < snapshot.next_generation:
                problems.append(f"{type(effect).__name__} {effect.invoke_id} reuses a generation")
            born.add(generation)
        elif isinstance(effect, CancelChild) and effect.invoke_id in live_after:
            problems.append(f"CancelChild {effect.invoke_id} names an incarnation that is still live")
    return problems


def _next_generations(trace: Trace) -> list[int]:
    """The ``next_generation`` each outcome's macrostep started from."""
    starts = [1] + [snapshot.next_generation for snapshot, _ in trace.outcomes]
    return starts[: len(trace.outcomes)]


# ------------------------------------------------------------ properties


@given(scenarios())
def test_same_chart_and_script_give_the_same_run(scenario: Scenario) -> None:
    """Replaying a script gives equal snapshots and effects, and any runaway at the same call."""
    chart, script = scenario
    _show(chart, script)
    first = trace_script(chart, script)
    again = trace_script(chart, script)  # the chart's caches are warm now
    fresh = trace_script(rebuild(chart), script)  # and cold here
    for other in (again, fresh):
        assert other.outcomes == first.outcomes
        assert other.runaway == first.runaway
        assert other.calls == first.calls


@given(scenarios())
def test_every_snapshot_survives_the_codec(scenario: Scenario) -> None:
    """Each snapshot reached decodes to an equal snapshot, and its encoding survives JSON text."""
    chart, script = scenario
    _show(chart, script)
    codec = SnapshotCodec(chart)
    for snapshot, _ in trace_script(chart, script).outcomes:
        data = codec.encode(snapshot)
        assert codec.decode(data) == snapshot
        assert json.loads(json.dumps(data)) == data


@given(scenarios())
def test_configuration_is_always_legal(scenario: Scenario) -> None:
    """Every configuration reached is closed under ancestors, has one child per compound, every region."""
    chart, script = scenario
    _show(chart, script)
    for n, (snapshot, _) in enumerate(trace_script(chart, script).outcomes):
        assert configuration_problems(chart, snapshot.configuration) == [], f"after call #{n}"


@given(scenarios())
def test_interpreter_calls_never_mutate_their_inputs(scenario: Scenario) -> None:
    """``start``, ``step``, ``fire`` and ``stop`` leave the snapshot, event and input given unchanged."""
    chart, script = scenario
    _show(chart, script)
    codec = SnapshotCodec(chart)

    def checked(chart: Chart[Counter], call: Call) -> Outcome:
        snapshot, event, input_ = copy.deepcopy((call.before, call.event, call.input))
        encoded = None if call.before is None else codec.encode(call.before)
        try:
            return perform(chart, call)
        finally:
            assert (call.before, call.event, call.input) == (snapshot, event, input_)
            if call.before is not None:
                assert codec.encode(call.before) == encoded

    trace_script(chart, script, checked)


@given(scenarios())
def test_child_slots_stay_consistent(scenario: Scenario) -> None:
    """Live slots sit on active states, generations are unique and fresh, cancelled children stay dead."""
    chart, script = scenario
    _show(chart, script)
    trace = trace_script(chart, script)
    born: set[int] = set()
    for n, (before, outcome) in enumerate(zip(_next_generations(trace), trace.outcomes, strict=True)):
        assert slot_problems(chart, before, outcome, born) == [], f"after call #{n}"


def _guard_raising_on_an_eventless_transition() -> Scenario:
    """The smallest chart whose macrostep spins without taking a transition.

    Each evaluation of the guard queues ``error.execution``, which enables
    nothing; before the cap counted such events, ``start`` never returned.
    """
    chart = Chart(
        "generated",
        state("s1", entry=[assign(increment)], on=[always("s2", guard=fails_when_odd)]),
        state("s2"),
        context=Counter,
        initial="s1",
        description="an eventless transition whose guard raises while the counter is odd",
    )
    return chart, ()


@example(_guard_raising_on_an_eventless_transition()).via("the minimal hang")
@given(scenarios(error_loops=True))
def test_every_macrostep_settles_or_runs_away(scenario: Scenario) -> None:
    """Each call returns or raises RunawayMacrostep, even when guards that raise re-queue errors forever."""
    chart, script = scenario
    _show(chart, script)
    trace_script(chart, script)


def test_a_raising_eventless_guard_runs_away() -> None:
    """A guard that raises on every evaluation of an eventless transition ends in RunawayMacrostep."""
    chart, script = _guard_raising_on_an_eventless_transition()
    trace = trace_script(chart, script)
    assert trace.outcomes == ()
    assert trace.runaway is not None
    assert (trace.runaway.call, trace.runaway.event) == (0, "error.execution")
