"""Events per second of one macrostep: incarnate against Sismic and python-statemachine.

One macrostep is one external event processed until the configuration is
stable. Each library runs the same charts and the same cyclic event script:

* ``flat``: ten states ``s0`` … ``s9`` and one event ``next`` cycling through them;
* ``guarded``: the same ring with a guard on every transition (it reads the
  event's name, and always passes), so no macrostep is one incarnate can
  answer from the chart's plans: the interpreter's whole algorithm runs per
  event, as it does for any chart with guards or actions;
* ``nested``: a compound ``on`` holding a deep history and a parallel state
  ``running`` with two regions (``left`` has a nested compound), plus
  ``off``; ``tick`` moves the left region, ``tock`` the right one, and
  ``power`` leaves ``on`` for ``off`` and comes back through the history.

Before timing anything, every chart is driven through a check script in each
library and the configurations are compared after every event, so the
numbers compare the same work. The libraries are then interleaved over
several rounds (the machine is assumed noisy) and the median rate per
library is reported, with the ratios against the project's targets.

Run ``python -m bench.interpreter --help`` for the options.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import attrs

from statechart import Chart, Event, NoContext, history, parallel, start, state, step, transition
from statechart.snapshot import Snapshot

if not __package__:  # run as a file, ``python bench/interpreter.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

INCARNATE = "incarnate"
STATEMACHINE = "python-statemachine"
SISMIC = "sismic"
LIBRARIES = (INCARNATE, STATEMACHINE, SISMIC)

TARGETS = {STATEMACHINE: 3.0, SISMIC: 10.0}
"""The speed-ups incarnate aims for, per competing library."""

INSTALL_HINT = "install the bench extra: pip install -e '.[bench]'"

DESCRIPTION = "Macrostep events per second: incarnate vs python-statemachine vs Sismic."
"""What ``--help`` says the bench does."""

FLAT_STATES = tuple(f"s{n}" for n in range(10))
FLAT_RING = tuple(zip(FLAT_STATES, FLAT_STATES[1:] + FLAT_STATES[:1], strict=True))
"""The flat chart's moves on ``next``: each state to the following one, the last to the first."""

BATCH_EVENTS = 100
"""Roughly how many events run between two clock reads."""


# ---------------------------------------------------------------- runners


class Runner(Protocol):
    """One library driving one chart instance."""

    def send(self, name: str) -> None:
        """Process one external event to a stable configuration."""

    def run(self, cycles: int) -> None:
        """Process the chart's event script ``cycles`` times over."""

    def configuration(self) -> frozenset[str]:
        """The ids of every active state (the chart's own root excluded)."""


class IncarnateRunner:
    """Drives a chart with :func:`statechart.step`, one pure macrostep per event."""

    def __init__(self, chart: Chart[NoContext], script: Sequence[str]) -> None:
        self.chart = chart
        # events are immutable values, so the script's are built once, like the
        # interned strings the other libraries receive
        self.events = tuple(Event(name) for name in script)
        self.snapshot: Snapshot[NoContext] = start(chart)[0]

    def send(self, name: str) -> None:
        """Step one event."""
        self.snapshot = step(self.chart, self.snapshot, Event(name))[0]

    def run(self, cycles: int) -> None:
        """Step the script ``cycles`` times, carrying the snapshot along."""
        chart, snapshot, events = self.chart, self.snapshot, self.events
        for _ in range(cycles):
            for event in events:
                snapshot, _effects = step(chart, snapshot, event)
        self.snapshot = snapshot

    def configuration(self) -> frozenset[str]:
        """The snapshot's configuration."""
        return frozenset(self.snapshot.configuration)


class SismicRunner:
    """Drives a Sismic interpreter: queue one event, then ``execute_once``."""

    def __init__(self, statechart: Any, script: Sequence[str]) -> None:
        from sismic.interpreter import Interpreter

        self.root: str = statechart.root
        self.interpreter = Interpreter(statechart)
        self.interpreter.execute_once()  # enters the initial configuration
        self.script = tuple(script)

    def send(self, name: str) -> None:
        """Queue and process one event."""
        self.interpreter.queue(name)
        self.interpreter.execute_once()

    def run(self, cycles: int) -> None:
        """Queue and process the script ``cycles`` times over, one event per macrostep."""
        queue, execute_once, script = self.interpreter.queue, self.interpreter.execute_once, self.script
        for _ in range(cycles):
            for name in script:
                queue(name)
                execute_once()

    def configuration(self) -> frozenset[str]:
        """The interpreter's configuration without the statechart's root state."""
        return frozenset(self.interpreter.configuration) - {self.root}


class StatemachineRunner:
    """Drives a python-statemachine machine with ``send``."""

    def __init__(self, machine_class: Callable[[], Any], script: Sequence[str]) -> None:
        self.machine = machine_class()
        self.script = tuple(script)

    def send(self, name: str) -> None:
        """Send one event."""
        self.machine.send(name)

    def run(self, cycles: int) -> None:
        """Send the script ``cycles`` times over."""
        send, script = self.machine.send, self.script
        for _ in range(cycles):
            for name in script:
                send(name)

    def configuration(self) -> frozenset[str]:
        """The ids of the machine's active states."""
        return frozenset(s.id for s in self.machine.configuration)


# ------------------------------------------------- flat and guarded charts
#
# Both are the ring; the guarded one puts a guard on every transition.


def _next(context: object, event: Event) -> bool:
    """The guarded ring's guard: reads the event, always passes."""
    return event.name == "next"


def incarnate_ring(guarded: bool) -> Chart[NoContext]:
    """Ten states in a ring, ``next`` moving one step along it (through a guard if ``guarded``)."""
    guard = _next if guarded else None
    name = "bench.guarded" if guarded else "bench.flat"
    return Chart(name, *(state(s, on=[transition("next", t, guard=guard)]) for s, t in FLAT_RING))


def sismic_ring(guarded: bool) -> Any:
    """The ring as a Sismic statechart (a root compound state holds the ten states).

    A guard is Python code Sismic evaluates per transition.
    """
    from sismic.model import BasicState, CompoundState, Statechart, Transition

    root = "guarded" if guarded else "flat"
    guard = "event.name == 'next'" if guarded else None
    chart = Statechart(root)
    chart.add_state(CompoundState(root, initial=FLAT_STATES[0]), None)
    for name in FLAT_STATES:
        chart.add_state(BasicState(name), root)
    for source, target in FLAT_RING:
        chart.add_transition(Transition(source, target, event="next", guard=guard))
    chart.validate()
    return chart


def statemachine_ring(guarded: bool) -> Any:
    """The ring as a python-statemachine class (a condition on every transition if ``guarded``)."""
    from statemachine import State, StateMachine

    ring = {"cond": "named"} if guarded else {}

    class RingMachine(StateMachine):
        s0 = State(initial=True)
        s1 = State()
        s2 = State()
        s3 = State()
        s4 = State()
        s5 = State()
        s6 = State()
        s7 = State()
        s8 = State()
        s9 = State()

        next = (
            s0.to(s1, **ring)
            | s1.to(s2, **ring)
            | s2.to(s3, **ring)
            | s3.to(s4, **ring)
            | s4.to(s5, **ring)
            | s5.to(s6, **ring)
            | s6.to(s7, **ring)
            | s7.to(s8, **ring)
            | s8.to(s9, **ring)
            | s9.to(s0, **ring)
        )

        def named(self, event: str) -> bool:
            return event == "next"

    return RingMachine


# --------------------------------------------------------- nested chart
#
# A return through one history per region would need a transition with two
# targets, which Sismic cannot express; the deep history therefore sits on
# the compound ``on`` that wraps the parallel state, which all three
# libraries support and which restores both regions down to their leaves.


def incarnate_nested() -> Chart[NoContext]:
    """``on`` (deep history around a parallel state with two regions) and ``off``."""
    left = state(
        "left",
        state("l1", on=[transition("tick", "l2")]),
        state(
            "l2",
            state("l2a", on=[transition("tick", "l2b")]),
            state("l2b", on=[transition("tick", "l1")]),
        ),
    )
    right = state(
        "right",
        state("r1", on=[transition("tock", "r2")]),
        state("r2", on=[transition("tock", "r3")]),
        state("r3", on=[transition("tock", "r1")]),
    )
    return Chart(
        "bench.nested",
        state(
            "on",
            history("on_history", "running", deep=True),
            parallel("running", left, right),
            initial="running",
            on=[transition("power", "off")],
        ),
        state("off", on=[transition("power", "on_history")]),
    )


def sismic_nested() -> Any:
    """The nested chart as a Sismic statechart under a root compound state ``device``."""
    from sismic.model import (
        BasicState,
        CompoundState,
        DeepHistoryState,
        OrthogonalState,
        Statechart,
        Transition,
    )

    chart = Statechart("nested")
    states = [
        (CompoundState("device", initial="on"), None),
        (CompoundState("on", initial="running"), "device"),
        (DeepHistoryState("on_history", memory="running"), "on"),
        (OrthogonalState("running"), "on"),
        (CompoundState("left", initial="l1"), "running"),
        (BasicState("l1"), "left"),
        (CompoundState("l2", initial="l2a"), "left"),
        (BasicState("l2a"), "l2"),
        (BasicState("l2b"), "l2"),
        (CompoundState("right", initial="r1"), "running"),
        (BasicState("r1"), "right"),
        (BasicState("r2"), "right"),
        (BasicState("r3"), "right"),
        (BasicState("off"), "device"),
    ]
    for node, parent in states:
        chart.add_state(node, parent)
    moves = [
        ("l1", "l2", "tick"),
        ("l2a", "l2b", "tick"),
        ("l2b", "l1", "tick"),
        ("r1", "r2", "tock"),
        ("r2", "r3", "tock"),
        ("r3", "r1", "tock"),
        ("on", "off", "power"),
        ("off", "on_history", "power"),
    ]
    for source, target, event in moves:
        chart.add_transition(Transition(source, target, event=event))
    chart.validate()
    return chart


def statemachine_nested() -> Any:
    """The nested chart as a python-statemachine class (nested classes are states)."""
    from statemachine import HistoryState, State, StateMachine

    class NestedMachine(StateMachine):
        class on(State.Compound):  # noqa: N801 - the class name is the state id
            on_history = HistoryState(type="deep")

            class running(State.Parallel):  # noqa: N801
                class left(State.Compound):  # noqa: N801
                    l1 = State(initial=True)

                    class l2(State.Compound):  # noqa: N801
                        l2a = State(initial=True)
                        l2b = State()

                        tick = l2a.to(l2b)

                    tick = l1.to(l2) | l2.l2b.to(l1)

                class right(State.Compound):  # noqa: N801
                    r1 = State(initial=True)
                    r2 = State()
                    r3 = State()

                    tock = r1.to(r2) | r2.to(r3) | r3.to(r1)

        off = State()

        power = on.to(off) | off.to(on.on_history)

    return NestedMachine


# ---------------------------------------------------------------- cases


@attrs.frozen
class Case:
    """One chart in the three libraries, its event script and its check."""

    name: str
    script: tuple[str, ...]
    """One cycle of events; the timed loop repeats it."""
    check_events: int
    """How many script events the check replays."""
    expected: frozenset[str]
    """The configuration the check must end in."""
    build: Callable[[Sequence[str]], dict[str, Runner]]
    """Builds the chart in every library, each runner repeating the given script."""
    targets: dict[str, float | None] = attrs.field(factory=lambda: dict(TARGETS))
    """The ratio each competitor's rate is held to (None: reported, no target)."""

    def runners(self) -> dict[str, Runner]:
        """Fresh runners, one per library, in their initial configuration."""
        return self.build(self.script)


def ring_runners(guarded: bool) -> Callable[[Sequence[str]], dict[str, Runner]]:
    """The flat (or guarded) ring in each library."""

    def build(script: Sequence[str]) -> dict[str, Runner]:
        return {
            INCARNATE: IncarnateRunner(incarnate_ring(guarded), script),
            STATEMACHINE: StatemachineRunner(statemachine_ring(guarded), script),
            SISMIC: SismicRunner(sismic_ring(guarded), script),
        }

    return build


def nested_runners(script: Sequence[str]) -> dict[str, Runner]:
    """The nested chart in each library."""
    return {
        INCARNATE: IncarnateRunner(incarnate_nested(), script),
        STATEMACHINE: StatemachineRunner(statemachine_nested(), script),
        SISMIC: SismicRunner(sismic_nested(), script),
    }


FLAT_CASE = Case("flat", ("next",), 23, frozenset({"s3"}), ring_runners(guarded=False))

GUARDED_CASE = Case(
    "guarded",
    ("next",),
    23,
    frozenset({"s3"}),
    ring_runners(guarded=True),
    targets=dict.fromkeys(TARGETS),  # the targets are for flat and nested; this one shows the general path
)

NESTED_CASE = Case(
    "nested",
    # three ticks and three tocks bring each region back to its first state;
    # each power pair leaves ``on`` and restores both regions through the history
    ("tick", "tock", "tick", "power", "power", "tock", "tick", "tock", "power", "power"),
    23,
    frozenset({"on", "running", "left", "l2", "l2b", "right", "r2"}),
    nested_runners,
)

CASES = {case.name: case for case in (FLAT_CASE, GUARDED_CASE, NESTED_CASE)}


# ----------------------------------------------------------------- check


def check(case: Case) -> bool:
    """Replay the check script in every library, comparing configurations after each event."""
    runners = case.runners()
    for n in range(case.check_events):
        name = case.script[n % len(case.script)]
        for runner in runners.values():
            runner.send(name)
        seen = {library: runner.configuration() for library, runner in runners.items()}
        if len(set(seen.values())) != 1:
            print(f"check {case.name}: FAILED after event {n + 1} ({name!r}): {_describe(seen)}")
            return False
    final = runners[INCARNATE].configuration()
    if final != case.expected:
        print(f"check {case.name}: FAILED, ended in {sorted(final)}, expected {sorted(case.expected)}")
        return False
    print(
        f"check {case.name}: {case.check_events} events, the three libraries agree after every "
        f"event; final configuration {{{', '.join(sorted(final))}}}: ok"
    )
    return True


def _describe(seen: dict[str, frozenset[str]]) -> str:
    return "; ".join(f"{library} {sorted(states)}" for library, states in seen.items())


# ----------------------------------------------------------- measurement


def measure(runner: Runner, cycles: int, events_per_batch: int, seconds: float) -> float:
    """Events per second of ``runner`` over at least ``seconds``, in batches of ``cycles`` cycles."""
    gc.collect()
    events = 0
    begin = time.perf_counter()
    deadline = begin + seconds
    while True:
        runner.run(cycles)
        events += events_per_batch
        now = time.perf_counter()
        if now >= deadline:
            return events / (now - begin)


def bench(case: Case, rounds: int, seconds: float) -> dict[str, list[float]]:
    """Per library, one rate per round; libraries interleaved, starting order rotated each round."""
    runners = case.runners()
    cycles = max(1, BATCH_EVENTS // len(case.script))
    events_per_batch = cycles * len(case.script)
    for runner in runners.values():  # warm-up: caches, specialisation, allocator
        measure(runner, cycles, events_per_batch, min(0.2, seconds))
    rates: dict[str, list[float]] = {library: [] for library in LIBRARIES}
    for n in range(rounds):
        for library in common.rotated(LIBRARIES, n):
            rates[library].append(measure(runners[library], cycles, events_per_batch, seconds))
    return rates


# ---------------------------------------------------------------- report


# Each table has a row per library or ratio, after the chart it belongs to.

RATES_HEADER = (
    f"{'library':<21} {'median ev/s':>12} {'us/event':>9} {'min ev/s':>10} {'max ev/s':>10} {'spread':>7}"
)
"""The table of rates: median, time per event and the spread over rounds."""

RATIOS_HEADER = f"{'ratio':<34} {'measured':>9} {'rounds':>15} {'target':>8}  verdict"
"""Median incarnate rate over each competitor's median rate, against the targets."""


@attrs.frozen
class Measured:
    """One chart's rates, one per round and library, and the case they measure."""

    case: Case
    rates: dict[str, list[float]]


def rate_rows(measured: Measured) -> Iterator[str]:
    """The rates of one chart, a row per library."""
    for library in LIBRARIES:
        values = measured.rates[library]
        median = statistics.median(values)
        yield (
            f"{library:<21} {median:>12,.0f} {1e6 / median:>9.2f} "
            f"{min(values):>10,.0f} {max(values):>10,.0f} {common.spread(values):>6.0%}"
        )


def ratio_rows(measured: Measured) -> Iterator[str]:
    """The ratios of one chart, a row per competitor.

    The spread of the per-round ratios is shown too: the libraries of one round
    run back to back, so a round's ratio is less exposed to slow drifts in
    machine load than the rates themselves.
    """
    rates = measured.rates
    for library, target in measured.case.targets.items():
        ratio = common.compare(rates[INCARNATE], rates[library], target)
        label = f"{INCARNATE} / {library}"
        yield f"{label:<34} {ratio.measured:>8.2f}x {ratio.rounds:>15} {ratio.wanted:>8}  {ratio.verdict}"


TABLES = ((RATES_HEADER, rate_rows), (RATIOS_HEADER, ratio_rows))
"""The report: the rates, then the ratios."""


# ------------------------------------------------------------------- CLI


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.interpreter", description=DESCRIPTION)
    common.add_timing(parser, rounds=5, seconds=0.5, per="library")
    common.add_choice(parser, "chart", CASES)
    options = parser.parse_args(argv)
    if options.rounds < 1 or not options.seconds > 0:
        parser.error("--rounds must be at least 1 and --seconds above 0")
    return options


def missing_libraries() -> list[str]:
    """The competing libraries that are not installed, by distribution name."""
    missing = []
    for library, module in ((STATEMACHINE, "statemachine"), (SISMIC, "sismic")):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(library)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Check, measure and report; 1 when a check fails, 2 when a library is missing."""
    options = parse(argv)
    missing = missing_libraries()
    if missing:
        print(f"missing: {', '.join(missing)}; {INSTALL_HINT}", file=sys.stderr)
        return 2
    cases = [CASES[name] for name in common.selected(options.chart, CASES)]
    common.print_environment(LIBRARIES)
    print(
        f"{options.rounds} rounds x {options.seconds:g} s per library and chart, libraries "
        "interleaved; median of the rounds reported\n"
    )
    if not all([check(case) for case in cases]):
        return 1
    results = {case.name: Measured(case, bench(case, options.rounds, options.seconds)) for case in cases}
    print()
    common.print_tables(results, TABLES, key="chart", width=8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
