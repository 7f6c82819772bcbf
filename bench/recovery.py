"""Cold recovery: how long a fresh engine takes to take back parked call trees, and to plan one history.

Each store (a SQLite file per store in a temporary directory, and
PostgreSQL in fresh schemas when it is reachable) is measured in two
sections:

* ``trees``: N parked call trees (a parent that fanned out one child per
  member, three members, each child waiting at a human gate) are built once
  per N by one engine, which is then closed. A fresh engine over the same
  store runs ``resume_all()``: it folds the notification log into the
  recovery listing, rebuilds and validates the ResumePlan of every
  in-flight instance and re-enacts each parent's children. The listing
  catch-up alone, and the first ``run_until_idle()`` after the recovery
  (which must commit nothing), are timed too. The recovery listing is
  dropped before each recovery, so every one starts from an empty listing,
  as after the first restart of an engine that never caught it up.
* ``plan``: one counter instance grown to a long history (an ``Accepted``
  and a ``Stepped`` event per tick), once in a store without snapshots and
  once in a store that snapshots every 100 versions. ``engine.plan(id)``
  (the store read and the fold) is timed, the read alone, and
  ``resume_plan`` over events already in memory, at a quarter, a half and
  all of the history.

The sizes of a section take turns (round by round for the trees, repeat by
repeat for the two plan stores) and medians are reported, with the growth
from the smallest to the largest size. Run ``python -m bench.recovery
--help`` for the options.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

import attrs

from aggregates import InstanceSnapshot
from incarnate import DeterministicRunner, Engine, PostgresStorage, SQLiteStorage, Storage
from incarnate._listing import ROWS_TABLE, TRACKING_TABLE
from projections import Checkpoint, resume_plan
from statechart import Chart, Event, JsonValue, RetryPolicy, assign, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/recovery.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = "Cold recovery of parked call trees, and ResumePlan rebuild time, with and without snapshots."
"""What ``--help`` says the bench does."""

SECTIONS = ("trees", "plan")

MEMBERS = ("a", "b", "c")
"""The members each parent fans out to: one child each."""

INSTANCES_PER_TREE = 1 + len(MEMBERS)

TREES = (1_000, 10_000)
QUICK_TREES = (100, 1_000)
EVENTS = 10_000
QUICK_EVENTS = 2_000
MINIMUM_EVENTS = 16
"""So that a quarter of the history still holds a few ticks."""

SNAPSHOT_INTERVAL = 100

LINEAR_TOLERANCE = 1.5
"""Growth is linear when the time per unit at the largest size is within this factor of the smallest's."""

PROGRESS_SECONDS = 15.0
"""Away from a terminal, a progress line at most this often."""


# ---------------------------------------------------------------- charts


@attrs.frozen
class Family:
    """The parent's context: the members it fans out to and what came back."""

    members: tuple[str, ...] = ()
    results: tuple[str, ...] = ()


def team(family: Family) -> dict[str, JsonValue]:
    """One child per member, its input naming it."""
    return {member: {"name": member} for member in family.members}


def keep_output(family: Family, event: Event) -> Family:
    """Keep what a finished child returned."""
    return attrs.evolve(family, results=(*family.results, str(event.data)))


@attrs.frozen
class Member:
    """A child's context: whom it stands for."""

    name: str = ""


def member_output(member: Member, event: Event) -> JsonValue:
    """What a child returns when its gate is passed."""
    return f"done:{member.name}"


MEMBER = Chart(
    "bench.member",
    state("waiting", on=[transition("finish", "finished")]),
    final("finished", done_data=member_output),
    context=Member,
    description="A child that waits at a human gate for 'finish'.",
)

FAMILY = Chart(
    "bench.family",
    state(
        "gathering",
        invoke=[
            invoke(
                "team",
                chart=MEMBER.name,
                map=team,
                output=keep_output,
                retry=RetryPolicy(max_attempts=3, backoff=5.0),
            )
        ],
        on=[transition("done.invoke.team", "reviewing")],
    ),
    state("reviewing", on=[transition("approve", "approved")]),
    final("approved"),
    context=Family,
    description="Fans out one child per member (with retries) and waits for them all.",
)


COUNTER = Chart(
    "bench.counter",
    state("running", on=[transition("tick", "running", actions=[assign(common.count)])]),
    context=common.Tally,
    description="Counts ticks with a self-transition.",
)

TREE_CHARTS = (MEMBER, FAMILY)
PLAN_CHARTS = (COUNTER,)


class CheckFailed(Exception):
    """A store did not hold, or a recovery did not do, what the bench expects; nothing is reported."""


# ---------------------------------------------------------------- stores


@attrs.frozen
class Backend:
    """One kind of store: how to make a fresh store of it, and how to empty a store's recovery listing."""

    name: str
    description: str
    fresh: Callable[[str], Storage]
    """A new, empty store for the given label."""
    drop_listing: Callable[[Storage], None]
    """Drop the listing's tables; the next listing opened creates them empty, at position 0."""


def sqlite_backend(directory: str) -> Backend:
    """One SQLite file per store, in ``directory``."""

    def fresh(label: str) -> Storage:
        return Storage.sqlite(os.path.join(directory, f"{label}.db"))

    return Backend(
        "sqlite",
        f"SQLite {sqlite3.sqlite_version}, one file per store in {directory} (eventsourcing defaults: WAL)",
        fresh,
        drop_sqlite_listing,
    )


def drop_sqlite_listing(storage: Storage) -> None:
    """Drop the listing's tables from a SQLite file."""
    assert isinstance(storage, SQLiteStorage)
    connection = sqlite3.connect(storage.path)
    try:
        with connection:
            for table in (ROWS_TABLE, TRACKING_TABLE):
                connection.execute(f"DROP TABLE IF EXISTS {table}")
    finally:
        connection.close()


@contextlib.contextmanager
def postgres_backend() -> Iterator[Backend | None]:
    """Fresh schemas in the test database, one per store, all dropped afterwards; None when unreachable."""
    with common.open_postgres() as postgres:
        if postgres is None:
            yield None
            return
        prefix = f"bench_recovery_{uuid.uuid4().hex[:8]}"

        def fresh(label: str) -> Storage:
            return postgres.fresh(f"{prefix}_{label}")

        def drop_listing(storage: Storage) -> None:
            assert isinstance(storage, PostgresStorage)
            postgres.drop_tables(storage.schema, (ROWS_TABLE, TRACKING_TABLE))

        yield Backend(
            "postgres",
            f"{postgres.describe()}, one schema {prefix}_* per store (dropped afterwards)",
            fresh,
            drop_listing,
        )


def stored_events(engine: Engine) -> int:
    """How many events the store holds: the id of its last notification."""
    return engine.parts.journal.recorder.max_notification_id() or 0


def topics_after(engine: Engine, position: int) -> Iterator[str]:
    """The topic of every stored event after notification ``position``, in order."""
    recorder = engine.parts.journal.recorder
    while True:
        batch = recorder.select_notifications(position + 1, 1_000)
        if not batch:
            return
        yield from (notification.topic for notification in batch)
        position = batch[-1].id


class Progress:
    """A progress line on stderr: rewritten in place on a terminal, now and then otherwise."""

    def __init__(self, what: str, total: int, unit: str) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.terminal = sys.stderr.isatty()
        self.begin = time.perf_counter()
        self.shown = self.begin

    def update(self, done: int) -> None:
        """Show progress when it is time to."""
        now = time.perf_counter()
        wait = 0.2 if self.terminal else PROGRESS_SECONDS
        if now - self.shown < wait and done < self.total:
            return
        self.shown = now
        elapsed = now - self.begin
        line = (
            f"{self.what}: {done:,}/{self.total:,} {self.unit} in {elapsed:.0f} s "
            f"({done / max(elapsed, 1e-9):,.0f}/s)"
        )
        if self.terminal:
            end = "\n" if done >= self.total else ""
            print(f"\r{line}\033[K", end=end, file=sys.stderr, flush=True)
        elif done < self.total:
            print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------- trees


@attrs.frozen
class Built:
    """A store of parked call trees, as its builder left it."""

    trees: int
    instances: int
    events: int
    seconds: float
    """Time the builder took (not part of any recovery)."""


@attrs.frozen
class Recovery:
    """One cold recovery of one store: the seconds of each timed phase."""

    catch_up: float
    """A fresh engine's listing catch-up alone, from an empty listing."""
    resume_all: float
    """Another fresh engine's ``resume_all()``, its own catch-up included."""
    first_run: float
    """Its first ``run_until_idle()`` after that."""


@attrs.frozen
class TreeResult:
    """A store of trees and its recoveries, one per round."""

    built: Built
    recoveries: tuple[Recovery, ...]

    def seconds(self, phase: str) -> list[float]:
        """The seconds of one phase (a field of :class:`Recovery`), one per round."""
        return [float(getattr(recovery, phase)) for recovery in self.recoveries]

    def median(self, phase: str) -> float:
        """The median seconds of one phase over the rounds."""
        return statistics.median(self.seconds(phase))

    def spread(self, phase: str) -> float:
        """``(max - min) / median`` of one phase over the rounds."""
        return common.spread(self.seconds(phase))


def tree_engine(storage: Storage) -> Engine:
    """An engine with the tree charts, working on the calling thread."""
    return Engine(TREE_CHARTS, storage=storage, runner=DeterministicRunner())


def build_trees(storage: Storage, trees: int, what: str) -> Built:
    """Start ``trees`` parents, each run until idle so its children have committed their first macrostep."""
    engine = tree_engine(storage)
    try:
        progress = Progress(what, trees, "trees")
        begin = time.perf_counter()
        for done in range(1, trees + 1):
            engine.start(FAMILY.name, {"members": list(MEMBERS)})
            engine.run_until_idle()
            progress.update(done)
        seconds = time.perf_counter() - begin
        events = stored_events(engine)
    finally:
        engine.close()
    return Built(trees, trees * INSTANCES_PER_TREE, events, seconds)


def time_catch_up(backend: Backend, storage: Storage, built: Built) -> tuple[float, str]:
    """A fresh engine folds the whole log into an empty listing; the seconds, and what was checked."""
    backend.drop_listing(storage)
    engine = tree_engine(storage)
    try:
        gc.collect()
        begin = time.perf_counter()
        folded = engine.listing.catch_up()
        seconds = time.perf_counter() - begin
        position = engine.listing.position()
        in_flight = len(engine.listing.rows(in_flight=True))
        events = stored_events(engine)
    finally:
        engine.close()
    if position != events or in_flight != built.instances:
        raise CheckFailed(
            f"the listing caught up to notification {position:,} of {events:,} "
            f"and lists {in_flight:,} in-flight instances, expected {built.instances:,}"
        )
    return seconds, f"catch-up folded {folded:,} notifications, {in_flight:,} in-flight rows"


def time_resume(backend: Backend, storage: Storage, built: Built) -> tuple[float, float, str]:
    """A fresh engine's ``resume_all()`` and first ``run_until_idle()``: seconds, and the checks."""
    backend.drop_listing(storage)
    engine = tree_engine(storage)
    try:
        before = stored_events(engine)
        gc.collect()
        begin = time.perf_counter()
        acquired = engine.resume_all()
        resume_all = time.perf_counter() - begin
        gc.collect()
        begin = time.perf_counter()
        units = engine.run_until_idle()
        first_run = time.perf_counter() - begin
        held = len(engine.parts.holdings.acquired())
        events = stored_events(engine)
        written = Counter(topic.rpartition(".")[2] for topic in topics_after(engine, before))
    finally:
        engine.close()
    problems = []
    if acquired != built.instances or held != built.instances:
        problems.append(
            f"resume_all acquired {acquired:,} instances and the engine holds {held:,}, "
            f"expected {built.instances:,}"
        )
    if units != 0:
        problems.append(f"the first run_until_idle did {units:,} units of work, expected none")
    if events != before + built.instances or set(written) - {"Claimed"}:
        problems.append(
            f"the store holds {events:,} events after the recovery, {before:,} before: the "
            f"recovery wrote {dict(written)}, expected one Claimed per instance ({built.instances:,})"
        )
    if problems:
        raise CheckFailed("; ".join(problems))
    return (
        resume_all,
        first_run,
        f"resume_all acquired {acquired:,}/{built.instances:,} instances, the first run did {units} units, "
        f"{events - before:,} events written, each a Claimed",
    )


def measure_trees(backend: Backend, counts: Sequence[int], rounds: int) -> dict[int, TreeResult]:
    """Build a store per count, then recover each once per round, the counts taking turns.

    The order of the counts rotates from one round to the next. Each
    recovery is checked: every tree acquired, nothing committed but each instance's claim.
    """
    stores: dict[int, Storage] = {}
    builds: dict[int, Built] = {}
    for trees in counts:
        stores[trees] = backend.fresh(f"trees_{trees}")
        built = build_trees(stores[trees], trees, f"{backend.name}: building {trees:,} trees")
        builds[trees] = built
        print(
            f"{backend.name}: built {trees:,} trees ({built.instances:,} instances, {built.events:,} "
            f"events) in {built.seconds:.1f} s ({trees / built.seconds:,.0f} trees/s; not timed)"
        )
    recoveries: dict[int, list[Recovery]] = {trees: [] for trees in counts}
    for n in range(rounds):
        for trees in common.rotated(counts, n):
            storage, built = stores[trees], builds[trees]
            try:
                catch_up, caught = time_catch_up(backend, storage, built)
                resume_all, first_run, resumed = time_resume(backend, storage, built)
            except CheckFailed as error:
                raise CheckFailed(f"check {backend.name} {trees:,} trees: FAILED, {error}") from error
            if n == 0:
                print(f"check {backend.name} {trees:,} trees: {caught}; {resumed}: ok")
            recoveries[trees].append(Recovery(catch_up, resume_all, first_run))
    return {trees: TreeResult(builds[trees], tuple(recoveries[trees])) for trees in counts}


# ------------------------------------------------------------------ plan


class History:
    """One counter instance in a store of its own, grown tick by tick."""

    def __init__(self, variant: str, storage: Storage, snapshot_interval: int | None) -> None:
        self.variant = variant
        self.snapshot_interval = snapshot_interval
        # Without an interval the engine would space snapshots by size (its default): the plain
        # variant turns them off, so that its plan folds the whole history.
        self.engine = Engine(
            PLAN_CHARTS,
            storage=storage,
            runner=DeterministicRunner(),
            snapshot_interval=snapshot_interval,
            env={"IS_SNAPSHOTTING_ENABLED": "n"} if snapshot_interval is None else None,
        )
        try:
            self.instance_id: UUID = self.engine.start(COUNTER.name)
            self.engine.run_until_idle()
        except BaseException:
            self.engine.close()
            raise
        self.ticks = 0

    @property
    def events(self) -> int:
        """Stored events: ``Started``, a first ``Stepped``, and an ``Accepted`` and a ``Stepped`` per tick."""
        return 2 + 2 * self.ticks

    def grow(self, events: int, progress: Progress) -> None:
        """Tick, one macrostep committed at a time, until the history holds ``events`` events."""
        engine, instance_id = self.engine, self.instance_id
        while self.events < events:
            engine.send(instance_id, "tick")
            engine.run_until_idle()
            self.ticks += 1
            progress.update(self.events)

    def plan(self) -> Checkpoint:
        """The ResumePlan, read from the store and folded."""
        return self.engine.plan(self.instance_id, COUNTER)

    def read(self) -> tuple[InstanceSnapshot | None, list[Any]]:
        """What a plan reads: the latest snapshot, if any, and the events after it."""
        return self.engine.parts.journal.stored(self.instance_id)

    def close(self) -> None:
        """Close the engine."""
        self.engine.close()


PLAN_PHASES = ("plan", "read", "fold")
PLAIN = "no snapshots"
"""The variant whose store takes no snapshots."""


@attrs.frozen
class PlanResult:
    """One variant at one history length: seconds per repeat of each phase."""

    variant: str
    events: int
    tail: int
    """Events read after the snapshot (all of them without snapshots)."""
    seconds: dict[str, list[float]]
    longest_tail: bool = False
    """Grown past a size to just before the next snapshot (measured once, at the end)."""

    def median(self, phase: str) -> float:
        """The median seconds of one phase."""
        return statistics.median(self.seconds[phase])

    def spread(self, phase: str) -> float:
        """``(max - min) / median`` of one phase over the repeats."""
        return common.spread(self.seconds[phase])


def history_sizes(events: int) -> list[int]:
    """A quarter, a half and all of the history, each an even number of events."""
    return sorted({2 * (events // 8), 2 * (events // 4), 2 * (events // 2)})


def check_plans(histories: Sequence[History]) -> str:
    """Every variant plans the count of ticks at the last version; the snapshot variant reads a short tail."""
    problems = []
    for history in histories:
        plan = history.plan()
        context = plan.snapshot.context if plan.snapshot is not None else None
        if context != common.Tally(history.ticks) or plan.version != history.events:
            problems.append(
                f"{history.variant}: planned {context} at version {plan.version}, expected "
                f"{common.Tally(history.ticks)} at version {history.events}"
            )
        start, tail = history.read()
        interval = history.snapshot_interval
        if interval is not None and (start is None or len(tail) >= interval):
            problems.append(f"{history.variant}: read {len(tail)} events after snapshot {start}")
    if problems:
        raise CheckFailed("; ".join(problems))
    return ", ".join(f"{h.variant} {describe_read(h)}" for h in histories)


def describe_read(history: History) -> str:
    """Whether a plan of ``history`` starts from a snapshot, and how many events it folds."""
    start, tail = history.read()
    if start is None:
        return f"folds all {len(tail):,} events"
    return f"folds {len(tail):,} events after the snapshot at version {start.originator_version:,}"


def time_phases(history: History) -> dict[str, float]:
    """One plan from the store, one read alone, and one fold of what was read, in memory."""
    timings: dict[str, float] = {}
    gc.collect()
    begin = time.perf_counter()
    history.plan()
    timings["plan"] = time.perf_counter() - begin
    begin = time.perf_counter()
    start, events = history.read()
    timings["read"] = time.perf_counter() - begin
    begin = time.perf_counter()
    resume_plan(events, COUNTER, start=start)
    timings["fold"] = time.perf_counter() - begin
    return timings


def open_histories(backend: Backend, interval: int) -> list[History]:
    """One counter history without snapshots and one with, each in a fresh store."""
    histories: list[History] = []
    try:
        histories.append(History(PLAIN, backend.fresh("history"), None))
        histories.append(History(f"snapshots every {interval}", backend.fresh("history_snapshots"), interval))
    except BaseException:
        for history in histories:
            history.close()
        raise
    return histories


def take_turns(histories: Sequence[History], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Time the phases of each history ``repeats`` times, the histories taking turns in rotating order."""
    samples: dict[str, dict[str, list[float]]] = {
        history.variant: {phase: [] for phase in PLAN_PHASES} for history in histories
    }
    for n in range(repeats):
        for history in common.rotated(histories, n):
            for phase, seconds in time_phases(history).items():
                samples[history.variant][phase].append(seconds)
    return samples


def checked(backend: Backend, histories: Sequence[History], grown: float) -> None:
    """Check the plans of ``histories`` and say so."""
    events = max(history.events for history in histories)
    try:
        planned = check_plans(histories)
    except CheckFailed as error:
        raise CheckFailed(f"check {backend.name} plan at {events:,} events: FAILED, {error}") from error
    print(
        f"check {backend.name} plan at {events:,} events (grown in {grown:.1f} s, not timed): "
        f"{histories[0].ticks:,} ticks counted, planned {planned}: ok"
    )


def grow_longest_tail(history: History, backend: Backend) -> None:
    """Tick until one more tick would write a snapshot: the longest tail a plan can fold."""
    interval = history.snapshot_interval
    assert interval is not None
    progress = Progress(f"{backend.name}: {history.variant}", history.events + interval, "events")
    while (history.events + 1) % interval != 0 and (history.events + 2) % interval != 0:
        history.grow(history.events + 2, progress)


def measure_plans(backend: Backend, events: int, repeats: int, interval: int) -> list[PlanResult]:
    """Grow both histories to each size and time their phases, taking turns.

    Sizes are even, so with an even interval each size ends at a snapshot and
    the snapshot variant folds no tail; a last measurement grows that
    history to the longest tail it can have.
    """
    histories = open_histories(backend, interval)
    try:
        results: list[PlanResult] = []
        for size in history_sizes(events):
            begin = time.perf_counter()
            for history in histories:
                history.grow(size, Progress(f"{backend.name}: {history.variant}", size, "events"))
            checked(backend, histories, time.perf_counter() - begin)
            samples = take_turns(histories, repeats)
            for history in histories:
                tail = len(history.read()[1])
                results.append(PlanResult(history.variant, size, tail, samples[history.variant]))
        snapshots = histories[-1]
        begin = time.perf_counter()
        grow_longest_tail(snapshots, backend)
        checked(backend, [snapshots], time.perf_counter() - begin)
        samples = take_turns([snapshots], repeats)
        tail = len(snapshots.read()[1])
        results.append(
            PlanResult(
                snapshots.variant, snapshots.events, tail, samples[snapshots.variant], longest_tail=True
            )
        )
        return results
    finally:
        for history in histories:
            history.close()


# ---------------------------------------------------------------- report


def verdict(small: float, large: float) -> str:
    """``linear`` when the time per unit at the larger size is within the tolerance of the smaller's."""
    growth = large / small
    return "linear" if growth <= LINEAR_TOLERANCE else f"not linear ({growth:.2f}x per unit)"


def flatness(small: float, large: float) -> str:
    """``flat`` when the time at the larger size is within the tolerance of the smaller's."""
    growth = large / small
    return "flat" if growth <= LINEAR_TOLERANCE else f"grows ({growth:.2f}x)"


# Each table has its rows per store, each row after the store it belongs to.

TREES_HEADER = (
    f"{'trees':>7} {'instances':>9} {'events':>8} {'build s':>8} {'catch-up s':>10} {'resume_all s':>12} "
    f"{'spread':>6} {'first run s':>11} {'trees/s':>8} {'instances/s':>11} {'ms/instance':>11}"
)
"""The recovery table: median seconds of each phase and the rates of ``resume_all``."""

TREE_GROWTH_HEADER = (
    f"{'phase':<11} {'trees':>15} {'seconds':>15} {'ratio':>7} {'trees x':>7} {'us/instance':>19}  verdict"
)
"""How each phase grows from the smallest count of trees to the largest."""

PLANS_HEADER = (
    f"{'variant':<21} {'events':>7} {'tail':>5} {'plan ms':>9} {'spread':>6} {'read ms':>9} "
    f"{'fold ms':>9} {'plan ev/s':>10} {'fold ev/s':>10}"
)
"""The plan table: median milliseconds of each phase, and events per second."""

SPEED_UPS_HEADER = (
    f"{'events':>7} {'no snapshots ms':>15} {'events':>7} {'tail':>5} {'snapshots ms':>12} {'speed-up':>8}"
)
"""Each snapshot plan against the plan without snapshots of the same (or the nearest shorter) history."""

PLAN_GROWTH_HEADER = (
    f"{'variant':<21} {'events':>15} {'plan ms':>15} {'ratio':>7} {'events x':>8} {'us/event':>16}  verdict"
)
"""How plan time grows from the shortest history to the longest."""


def tree_rows(by_count: dict[int, TreeResult]) -> Iterator[str]:
    """One store's rows of the recovery table, one per count of trees."""
    for trees, result in by_count.items():
        built = result.built
        resume_all = result.median("resume_all")
        yield (
            f"{trees:>7,} {built.instances:>9,} {built.events:>8,} {built.seconds:>8.1f} "
            f"{result.median('catch_up'):>10.2f} {resume_all:>12.2f} {result.spread('resume_all'):>6.0%} "
            f"{result.median('first_run'):>11.2f} {trees / resume_all:>8,.0f} "
            f"{built.instances / resume_all:>11,.0f} {1e3 * resume_all / built.instances:>11.3f}"
        )


TREE_PHASES = {"catch_up": "catch-up", "resume_all": "resume_all", "first_run": "first run"}
"""Each timed phase of a recovery, by its label in the tables."""


def tree_growth_rows(by_count: dict[int, TreeResult]) -> Iterator[str]:
    """Time at the largest count over time at the smallest, and the time per instance at every count."""
    small, large = min(by_count), max(by_count)
    if small == large:
        return
    low, high = by_count[small], by_count[large]
    for phase, label in TREE_PHASES.items():
        before, after = low.median(phase), high.median(phase)
        per = [1e6 * result.median(phase) / result.built.instances for result in by_count.values()]
        per_instance = "->".join(f"{value:.0f}" for value in per)
        yield (
            f"{label:<11} {f'{small:,}->{large:,}':>15} "
            f"{f'{before:.2f}->{after:.2f}':>15} {after / before:>6.1f}x {large / small:>6.0f}x "
            f"{per_instance:>19}  {verdict(per[0], per[-1])}"
        )


def plan_rows(rows: list[PlanResult]) -> Iterator[str]:
    """The plan table: median milliseconds of each phase, and events per second."""
    for row in rows:
        plan, fold = row.median("plan"), row.median("fold")
        folded = f"{row.tail / fold:,.0f}" if row.tail else "-"
        yield (
            f"{row.variant:<21} {row.events:>7,} {row.tail:>5,} {1e3 * plan:>9.2f} "
            f"{row.spread('plan'):>6.0%} {1e3 * row.median('read'):>9.2f} {1e3 * fold:>9.2f} "
            f"{row.events / plan:>10,.0f} {folded:>10}"
        )


def speed_up_rows(rows: list[PlanResult]) -> Iterator[str]:
    """Each snapshot plan against the plan without snapshots of the same (or the nearest shorter) history."""
    plain = [row for row in rows if row.variant == PLAIN]
    for row in rows:
        if row.variant == PLAIN:
            continue
        without = max((p for p in plain if p.events <= row.events), key=lambda p: p.events)
        before, after = without.median("plan"), row.median("plan")
        yield (
            f"{without.events:>7,} {1e3 * before:>15.2f} {row.events:>7,} {row.tail:>5,} "
            f"{1e3 * after:>12.2f} {before / after:>7.1f}x"
        )


def plan_growth_rows(rows: list[PlanResult]) -> Iterator[str]:
    """How plan time grows from the shortest history to the longest.

    Without snapshots it should grow linearly; with them it should stay flat.
    """
    for variant in dict.fromkeys(row.variant for row in rows):
        mine = [row for row in rows if row.variant == variant and not row.longest_tail]
        low, high = mine[0], mine[-1]
        before, after = low.median("plan"), high.median("plan")
        per = [1e6 * row.median("plan") / row.events for row in mine]
        judged = verdict(per[0], per[-1]) if variant == PLAIN else flatness(before, after)
        per_event = "->".join(f"{value:.1f}" for value in per)
        yield (
            f"{variant:<21} {f'{low.events:,}->{high.events:,}':>15} "
            f"{f'{1e3 * before:.1f}->{1e3 * after:.1f}':>15} {after / before:>6.1f}x "
            f"{high.events / low.events:>7.0f}x {per_event:>16}  {judged}"
        )


TREE_TABLES = ((TREES_HEADER, tree_rows), (TREE_GROWTH_HEADER, tree_growth_rows))
"""The report of the trees section: the recoveries, then how they grow with the count of trees."""

PLAN_TABLES = (
    (PLANS_HEADER, plan_rows),
    (SPEED_UPS_HEADER, speed_up_rows),
    (PLAN_GROWTH_HEADER, plan_growth_rows),
)
"""The report of the plan section: the plans, the speed-ups of snapshots, how plans grow."""


# ------------------------------------------------------------------- CLI


def counts(text: str) -> tuple[int, ...]:
    """A comma-separated list of tree counts, each at least 1."""
    try:
        values = tuple(sorted({int(part.strip().replace("_", "")) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected counts like 1000,10000, got {text!r}") from None
    if not values or values[0] < 1:
        raise argparse.ArgumentTypeError(f"every count must be at least 1, got {text!r}")
    return values


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.recovery", description=DESCRIPTION)
    common.add_choice(parser, "store", common.STORES)
    common.add_choice(parser, "section", SECTIONS)
    parser.add_argument(
        "--trees",
        type=counts,
        default=None,
        help="tree counts, comma-separated (default 1000,10000; --quick: 100,1000)",
    )
    parser.add_argument(
        "--events",
        type=int,
        default=None,
        help=f"events in the longest history (default {EVENTS:,}; --quick: {QUICK_EVENTS:,})",
    )
    parser.add_argument("--rounds", type=int, default=3, help="recoveries of each store of trees (default 3)")
    parser.add_argument("--repeats", type=int, default=7, help="plans timed per history length (default 7)")
    parser.add_argument(
        "--snapshot-interval",
        type=int,
        default=SNAPSHOT_INTERVAL,
        help=f"versions between snapshots in the snapshotting store (default {SNAPSHOT_INTERVAL})",
    )
    parser.add_argument("--quick", action="store_true", help="smaller sizes for a fast check")
    options = parser.parse_args(argv)
    if options.trees is None:
        options.trees = QUICK_TREES if options.quick else TREES
    if options.events is None:
        options.events = QUICK_EVENTS if options.quick else EVENTS
    if options.rounds < 1 or options.repeats < 1 or options.snapshot_interval < 1:
        parser.error("--rounds, --repeats and --snapshot-interval must be at least 1")
    if options.events < MINIMUM_EVENTS:
        parser.error(f"--events must be at least {MINIMUM_EVENTS}, got {options.events}")
    return options


@contextlib.contextmanager
def open_backend(name: str, directory: str) -> Iterator[Backend | None]:
    """The backend of a store name; None when PostgreSQL is unreachable."""
    if name == "postgres":
        with postgres_backend() as backend:
            yield backend
    else:
        yield sqlite_backend(directory)


def main(argv: Sequence[str] | None = None) -> int:
    """Check, measure and report; 1 when a check fails, 2 when the PostgreSQL driver is missing."""
    options = parse(argv)
    stores = common.selected(options.store, common.STORES)
    sections = common.selected(options.section, SECTIONS)
    if common.missing_driver(stores):
        return 2
    common.print_environment(("eventsourcing", "psycopg", "incarnate"))
    print(
        f"trees: {', '.join(f'{n:,}' for n in options.trees)} of {INSTANCES_PER_TREE} instances, "
        f"{options.rounds} rounds, counts interleaved; plan: up to {options.events:,} events, "
        f"{options.repeats} repeats, snapshots every {options.snapshot_interval}; medians reported\n"
    )
    trees: dict[str, dict[int, TreeResult]] = {}
    plans: dict[str, list[PlanResult]] = {}
    with tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory:
        for name in stores:
            with open_backend(name, directory) as backend:
                if backend is None:
                    continue
                print(f"{backend.name}: {backend.description}")
                try:
                    if "trees" in sections:
                        trees[name] = measure_trees(backend, options.trees, options.rounds)
                    if "plan" in sections:
                        plans[name] = measure_plans(
                            backend, options.events, options.repeats, options.snapshot_interval
                        )
                except CheckFailed as error:
                    print(error)
                    return 1
                print()
    if not trees and not plans:
        print("no store could be measured")
        return 0
    if trees:
        common.print_tables(trees, TREE_TABLES)
        print()
    if plans:
        common.print_tables(plans, PLAN_TABLES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
