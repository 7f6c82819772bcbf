"""Durable macrosteps per second: the incarnate engine against plain ``eventsourcing``.

Each store (a SQLite file in a temporary directory, and PostgreSQL when it
is reachable) is measured three ways, each against a plain
``eventsourcing`` application that writes the same number of events of the
same stored sizes:

* ``macrostep``: ``engine.send(id, "tick")`` then ``engine.run_until_idle()``,
  one ``Accepted`` and one ``Stepped`` commit per macrostep; the raw loop
  saves two events per macrostep, one per save;
* ``processing``: events are sent first (not timed), then
  ``run_until_idle()`` alone is timed, one ``Stepped`` commit per event; the
  raw loop saves one event per save;
* ``birth``: a parent event and a new child saved by one ``save(parent,
  child)`` or by two saves, and the engine's own ``start()`` of a chart
  whose initial state invokes a child (parent ``Started``, ``Stepped`` and
  ``Birth`` with the child's ``Started``, in one save).

The targets compare the engine with the raw saves alone; the raw loops are
also measured with a ``repository.get`` (a full replay, no cache) before
each save, for reference. Every batch of work runs on a fresh instance or
aggregate, so both sides carry histories of the same length.

In each round the variants of a section take turns in short slices (the
machine is assumed noisy); the median rate of each over the rounds is
reported, with the ratios against the project's targets. Run
``python -m bench.durable --help`` for the options.
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
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from uuid import UUID

import attrs
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate

from incarnate import DeterministicRunner, Engine, Storage
from statechart import Chart, assign, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/durable.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = "Durable macrosteps per second: the incarnate engine vs plain eventsourcing."
"""What ``--help`` says the bench does."""

SECTIONS = ("macrostep", "processing", "birth")

BIRTH_BATCH = 20
"""Births between two clock reads."""

SLICES = 4
"""Turns each variant takes per round; the variants of a section alternate between turns."""

WARM_UP_COUNT = 3
"""Operations of each variant run once before the first round."""

SIZE_TOLERANCE = 8
"""Bytes a raw event may differ from the framework's (digits of counters and clocks vary)."""


# ---------------------------------------------------------------- charts


COUNTER = Chart(
    "bench.counter",
    state(
        "running",
        on=[transition("tick", "running", actions=[assign(common.count)]), transition("pause", "paused")],
    ),
    state("paused", on=[transition("resume", "running")]),
    context=common.Tally,
    description="Counts ticks with a self-transition; pause and resume move between two states.",
)

KID = Chart("bench.kid", state("waiting"), description="A child that waits.")

PARENT = Chart(
    "bench.parent",
    state("nursing", invoke=[invoke("kid", chart=KID.name)], on=[transition("done.invoke.kid", "weaned")]),
    final("weaned"),
    description="A parent whose initial state invokes one child.",
)

CHARTS = (COUNTER, KID, PARENT)


class Discard:
    """A runner that drops every notification: births are measured up to their commit."""

    def attach(self, engine: Engine) -> None:
        """Nothing to bind."""

    def notify(self, instance_id: UUID) -> None:
        """Dropped: the child is never run."""

    def notify_at(self, deadline: float, instance_id: UUID) -> None:
        """Dropped."""

    def run_until_idle(self, max_units: int) -> int:
        """Never any work."""
        return 0

    def stop(self) -> None:
        """Nothing runs."""


# ------------------------------------------------------ raw eventsourcing


class Record(Aggregate):
    """A plain aggregate whose events carry an opaque string payload."""

    class Created(Aggregate.Created):
        """The aggregate exists."""

        payload: str

    def __init__(self, payload: str) -> None:
        self.last = payload

    class Noted(Aggregate.Event):
        """One more payload."""

        payload: str

        def apply(self, aggregate: Any) -> None:
            aggregate.last = self.payload

    def note(self, payload: str) -> None:
        """Trigger one ``Noted`` event."""
        self.trigger_event(self.Noted, payload=payload)


class RawStore(Application[UUID]):
    """A plain application with the stock mapper and transcoder."""


# ---------------------------------------------------------------- sizes


@attrs.frozen
class Sizes:
    """Bytes of stored state of each kind of event the bench writes."""

    started: int
    first_step: int
    accepted: int
    stepped: int
    parent_started: int
    parent_stepped: int
    birth: int
    kid_started: int

    def pairs(self) -> dict[str, int]:
        """Each size by a short label."""
        return {
            "Started": self.started,
            "first Stepped": self.first_step,
            "Accepted": self.accepted,
            "Stepped": self.stepped,
            "parent Started": self.parent_started,
            "parent Stepped": self.parent_stepped,
            "Birth": self.birth,
            "kid Started": self.kid_started,
        }


def stored_sizes(engine: Engine, instance_id: UUID) -> list[int]:
    """The stored size of each event of an instance, oldest first."""
    return [len(event.state) for event in engine.parts.journal.recorder.select_events(instance_id)]


def framework_sizes(engine: Engine) -> Sizes:
    """Start and tick a counter, start a parent, and read back what the engine stored."""
    counter = engine.start(COUNTER.name)
    engine.run_until_idle()
    engine.send(counter, "tick")
    engine.run_until_idle()
    started, first_step, accepted, _ = stored_sizes(engine, counter)
    stepped = len(engine.parts.journal.recorder.select_events(counter, desc=True, limit=1)[0].state)
    parent = engine.start(PARENT.name)
    parent_started, parent_stepped, birth = stored_sizes(engine, parent)
    (kid,) = engine.children(parent)
    kid_started = stored_sizes(engine, kid.id)[0]
    engine.run_until_idle()
    return Sizes(started, first_step, accepted, stepped, parent_started, parent_stepped, birth, kid_started)


@attrs.frozen
class Payloads:
    """Raw payloads padded so each raw event stores as many bytes as its framework twin."""

    started: str
    first_step: str
    accepted: str
    stepped: str
    parent_started: str
    parent_stepped: str
    birth: str
    kid_started: str


def padded(app: RawStore, sizes: Sizes) -> Payloads:
    """Payloads for ``Record`` events, sized from what the stock mapper adds around them."""
    record = Record("")
    record.note("")
    created, noted = (len(app.mapper.to_stored_event(e).state) for e in record.collect_events())

    def fill(size: int, overhead: int) -> str:
        return "x" * max(0, size - overhead)

    return Payloads(
        started=fill(sizes.started, created),
        first_step=fill(sizes.first_step, noted),
        accepted=fill(sizes.accepted, noted),
        stepped=fill(sizes.stepped, noted),
        parent_started=fill(sizes.parent_started, created),
        parent_stepped=fill(sizes.parent_stepped, noted),
        birth=fill(sizes.birth, noted),
        kid_started=fill(sizes.kid_started, created),
    )


def raw_sizes(app: RawStore, payloads: Payloads) -> Sizes:
    """Save one ``Record`` per kind of event and read back the stored sizes."""
    found: list[int] = []
    for created, noted in (
        (payloads.started, payloads.first_step),
        (payloads.started, payloads.accepted),
        (payloads.started, payloads.stepped),
        (payloads.parent_started, payloads.parent_stepped),
        (payloads.kid_started, payloads.birth),
    ):
        record = Record(created)
        record.note(noted)
        app.save(record)
        found.extend(len(e.state) for e in app.recorder.select_events(record.id))
    return Sizes(found[0], found[1], found[3], found[5], found[6], found[7], found[9], found[8])


# ---------------------------------------------------------------- stores


@attrs.frozen
class Store:
    """Where the engine and the plain application keep their events."""

    name: str
    framework: Storage
    raw: Storage
    description: str


def sqlite_store(directory: str) -> Store:
    """Two SQLite files: one for the engine, one for the plain application."""
    engine_path = os.path.join(directory, "incarnate.db")
    return Store(
        "sqlite",
        Storage.sqlite(engine_path),
        Storage.sqlite(os.path.join(directory, "raw.db")),
        f"SQLite {sqlite3.sqlite_version}, files in {directory} (eventsourcing defaults: WAL)",
    )


@contextlib.contextmanager
def postgres_store() -> Iterator[Store | None]:
    """A fresh schema in the test database, dropped afterwards; None when unreachable."""
    with common.open_postgres() as postgres:
        if postgres is None:
            yield None
            return
        schema = f"bench_durable_{uuid.uuid4().hex[:12]}"
        storage = postgres.fresh(schema)
        yield Store(
            "postgres", storage, storage, f"{postgres.describe()}, schema {schema} (dropped afterwards)"
        )


# ------------------------------------------------------------- variants

Timing = tuple[int, float]
"""Operations done and the seconds they took."""


@attrs.frozen
class Variant:
    """One way of doing one section's work."""

    key: str
    section: str
    label: str
    unit: str
    """What one operation is, for the table."""


VARIANTS = (
    Variant("macro.incarnate", "macrostep", "incarnate send + run_until_idle", "macrostep"),
    Variant("macro.raw-get", "macrostep", "raw 2 saves, get before each", "macrostep"),
    Variant("macro.raw", "macrostep", "raw 2 saves, no get", "macrostep"),
    Variant("process.incarnate", "processing", "incarnate run_until_idle", "event"),
    Variant("process.raw-get", "processing", "raw 1 save, get before", "event"),
    Variant("process.raw", "processing", "raw 1 save, no get", "event"),
    Variant("birth.one", "birth", "raw save(parent, child)", "pair"),
    Variant("birth.two", "birth", "raw save(parent); save(child)", "pair"),
    Variant("birth.raw-start", "birth", "raw same 4 events, one save", "start"),
    Variant("birth.incarnate", "birth", "incarnate start (parent + kid)", "start"),
)


@attrs.frozen
class Ratio:
    """One variant's median rate over another's, with the target it should meet."""

    section: str
    label: str
    numerator: str
    denominator: str
    target: float | None


RATIOS = (
    Ratio("macrostep", "incarnate / raw save", "macro.incarnate", "macro.raw", 0.7),
    Ratio("macrostep", "incarnate / raw get + save", "macro.incarnate", "macro.raw-get", None),
    Ratio("processing", "incarnate / raw save", "process.incarnate", "process.raw", 0.7),
    Ratio("processing", "incarnate / raw get + save", "process.incarnate", "process.raw-get", None),
    Ratio("birth", "one save / two saves (raw)", "birth.one", "birth.two", 1.0),
    Ratio("birth", "incarnate start / raw same events", "birth.incarnate", "birth.raw-start", 0.7),
)


class Bench:
    """One store's engines and plain application, and the work each variant does on them."""

    def __init__(self, store: Store, history: int) -> None:
        self.store = store
        self.history = history
        self.engine = Engine(CHARTS, storage=store.framework, runner=DeterministicRunner())
        self.births = Engine(CHARTS, storage=store.framework, runner=Discard())
        self.raw = RawStore(env=store.raw.env())
        try:
            self.sizes = framework_sizes(self.engine)
            self.payloads = padded(self.raw, self.sizes)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Close both engines and the plain application."""
        self.engine.close()
        self.births.close()
        self.raw.close()

    def batch(self, variant: Variant) -> int:
        """Operations per batch: one instance's history, or a run of births."""
        return BIRTH_BATCH if variant.section == "birth" else self.history

    def work(self, variant: Variant) -> Callable[[int], Timing]:
        """The function that runs ``count`` operations of ``variant`` and times them."""
        macrostep = (self.payloads.accepted, self.payloads.stepped)
        processed = (self.payloads.stepped,)
        table: dict[str, Callable[[int], Timing]] = {
            "macro.incarnate": self.framework_macrosteps,
            "macro.raw-get": lambda count: self.raw_saves(count, macrostep, ahead=0, get=True),
            "macro.raw": lambda count: self.raw_saves(count, macrostep, ahead=0, get=False),
            "process.incarnate": self.framework_processing,
            "process.raw-get": lambda count: self.raw_saves(count, processed, ahead=count, get=True),
            "process.raw": lambda count: self.raw_saves(count, processed, ahead=count, get=False),
            "birth.one": lambda count: self.raw_births(count, one_save=True),
            "birth.two": lambda count: self.raw_births(count, one_save=False),
            "birth.raw-start": self.raw_starts,
            "birth.incarnate": self.framework_starts,
        }
        return table[variant.key]

    # ---------------------------------------------------------- framework

    def framework_macrosteps(self, count: int) -> Timing:
        """A fresh counter, then ``count`` timed sends, each processed to idle."""
        engine = self.engine
        instance_id = engine.start(COUNTER.name)
        engine.run_until_idle()
        begin = time.perf_counter()
        for _ in range(count):
            engine.send(instance_id, "tick")
            engine.run_until_idle()
        return count, time.perf_counter() - begin

    def framework_processing(self, count: int) -> Timing:
        """A fresh counter sent ``count`` ticks, then the timed processing of them all."""
        engine = self.engine
        instance_id = engine.start(COUNTER.name)
        engine.run_until_idle()
        for _ in range(count):
            engine.send(instance_id, "tick")
        begin = time.perf_counter()
        done = engine.run_until_idle()
        elapsed = time.perf_counter() - begin
        assert done == count, f"{done} units of work for {count} events"
        return count, elapsed

    def framework_starts(self, count: int) -> Timing:
        """``count`` parents started, each committing its first macrostep and its child."""
        start = self.births.start
        begin = time.perf_counter()
        for _ in range(count):
            start(PARENT.name)
        return count, time.perf_counter() - begin

    # ---------------------------------------------------------------- raw

    def raw_saves(self, count: int, notes: Sequence[str], *, ahead: int, get: bool) -> Timing:
        """A fresh record holding ``ahead`` Accepted-sized events, then ``count`` timed operations.

        One operation saves one event per payload of ``notes``: two (Accepted
        and Stepped) for a macrostep, one (Stepped) for a processed event.
        With ``get``, the record is read back from the store before each save.
        """
        app, payloads = self.raw, self.payloads
        record = Record(payloads.started)
        record.note(payloads.first_step)
        for _ in range(ahead):
            record.note(payloads.accepted)
        app.save(record)
        record_id = record.id
        begin = time.perf_counter()
        for _ in range(count):
            for payload in notes:
                if get:
                    record = app.repository.get(record_id)
                record.note(payload)
                app.save(record)
        return count, time.perf_counter() - begin

    def raw_births(self, count: int, *, one_save: bool) -> Timing:
        """``count`` Birth-sized parent events, each with a new child, in one save or two."""
        app, payloads = self.raw, self.payloads
        parent = Record(payloads.parent_started)
        app.save(parent)
        begin = time.perf_counter()
        for _ in range(count):
            parent.note(payloads.birth)
            child = Record(payloads.kid_started)
            if one_save:
                app.save(parent, child)
            else:
                app.save(parent)
                app.save(child)
        return count, time.perf_counter() - begin

    def raw_starts(self, count: int) -> Timing:
        """``count`` new parents of three events each, saved with a new child in one save."""
        app, payloads = self.raw, self.payloads
        begin = time.perf_counter()
        for _ in range(count):
            parent = Record(payloads.parent_started)
            parent.note(payloads.parent_stepped)
            parent.note(payloads.birth)
            app.save(parent, Record(payloads.kid_started))
        return count, time.perf_counter() - begin

    # -------------------------------------------------------------- check

    def check(self) -> bool:
        """The counter counts and stores two events per macrostep; raw sizes match the engine's."""
        name = self.store.name
        ticks = 3
        instance_id = self.engine.start(COUNTER.name)
        for _ in range(ticks):
            self.engine.send(instance_id, "tick")
            self.engine.run_until_idle()
        context = self.engine.snapshot(instance_id).context
        events = len(self.engine.parts.journal.recorder.select_events(instance_id))
        if context != common.Tally(ticks) or events != 2 + 2 * ticks:
            print(f"check {name}: FAILED, {ticks} ticks gave {context} and {events} stored events")
            return False
        ours, theirs = self.sizes.pairs(), raw_sizes(self.raw, self.payloads).pairs()
        off = {k: (ours[k], theirs[k]) for k in ours if abs(ours[k] - theirs[k]) > SIZE_TOLERANCE}
        if off:
            print(f"check {name}: FAILED, raw event sizes differ (incarnate, raw): {off}")
            return False
        print(
            f"check {name}: {ticks} ticks counted, {events} events stored; bytes per stored event, "
            "incarnate/raw: " + ", ".join(f"{k} {ours[k]}/{theirs[k]}" for k in ours) + ": ok"
        )
        return True


# ----------------------------------------------------------- measurement


@attrs.define
class Account:
    """What one variant did in one round: operations, timed seconds and wall seconds."""

    operations: int = 0
    timed: float = 0.0
    wall: float = 0.0


def measure(work: Callable[[int], Timing], batch: int, seconds: float, account: Account) -> None:
    """Run ``work`` in batches until ``seconds`` of wall time have passed (at least one batch).

    Set-up inside a batch (a fresh instance, events sent ahead) counts toward
    the wall time but not toward the timed seconds.
    """
    gc.collect()
    begin = time.perf_counter()
    deadline = begin + seconds
    while True:
        done, elapsed = work(batch)
        account.operations += done
        account.timed += elapsed
        now = time.perf_counter()
        if now >= deadline:
            account.wall += now - begin
            return


def run_rounds(bench: Bench, rounds: int, seconds: float) -> dict[str, list[float]]:
    """Per variant, one rate per round.

    In a round, the variants of one section take turns in ``SLICES`` slices,
    so a burst of load on the machine falls on all of them; the order of the
    turns rotates from one round to the next. A variant whose batches
    overran a slice gets a shorter next one, so a round stays near
    ``seconds`` per variant.
    """
    works = {variant.key: bench.work(variant) for variant in VARIANTS}
    for variant in VARIANTS:  # warm-up: connections, caches, specialisation
        works[variant.key](WARM_UP_COUNT)
    rates: dict[str, list[float]] = {variant.key: [] for variant in VARIANTS}
    for n in range(rounds):
        for section in SECTIONS:
            order = common.rotated([variant for variant in VARIANTS if variant.section == section], n)
            accounts = {variant.key: Account() for variant in order}
            for turn in range(1, SLICES + 1):
                for variant in order:
                    account = accounts[variant.key]
                    budget = seconds * turn / SLICES - account.wall
                    if budget > 0 or account.operations == 0:
                        measure(works[variant.key], bench.batch(variant), budget, account)
            for key, account in accounts.items():
                rates[key].append(account.operations / account.timed)
    return rates


# ---------------------------------------------------------------- report


# Each table has a row per variant or ratio, after the store it belongs to.

RATES_HEADER = (
    f"{'section':<11} {'variant':<32} {'unit':<10} {'median/s':>9} {'ms/op':>7} "
    f"{'min/s':>8} {'max/s':>8} {'spread':>7}"
)
"""The table of rates: median, time per operation and the spread over rounds."""

RATIOS_HEADER = f"{'section':<11} {'ratio':<34} {'measured':>9} {'rounds':>13} {'target':>8}  verdict"
"""Median rate over median rate, with the range of the per-round ratios and the targets."""


def rate_rows(rates: dict[str, list[float]]) -> Iterator[str]:
    """The rates of one store, a row per variant."""
    for variant in VARIANTS:
        values = rates[variant.key]
        median = statistics.median(values)
        yield (
            f"{variant.section:<11} {variant.label:<32} {variant.unit:<10} "
            f"{median:>9,.0f} {1e3 / median:>7.2f} {min(values):>8,.0f} {max(values):>8,.0f} "
            f"{common.spread(values):>6.0%}"
        )


def ratio_rows(rates: dict[str, list[float]]) -> Iterator[str]:
    """The ratios of one store.

    The two variants of a ratio run back to back in each round, so the
    per-round ratios show how much of the difference the noise could explain.
    """
    for ratio in RATIOS:
        shown = common.compare(rates[ratio.numerator], rates[ratio.denominator], ratio.target)
        yield (
            f"{ratio.section:<11} {ratio.label:<34} {shown.measured:>8.2f}x "
            f"{shown.rounds:>13} {shown.wanted:>8}  {shown.verdict}"
        )


TABLES = ((RATES_HEADER, rate_rows), (RATIOS_HEADER, ratio_rows))
"""The report: the rates, then the ratios."""


# ------------------------------------------------------------------- CLI


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.durable", description=DESCRIPTION)
    common.add_timing(parser, rounds=3, seconds=1.0, per="variant")
    common.add_choice(parser, "store", common.STORES)
    parser.add_argument(
        "--history",
        type=int,
        default=25,
        help="macrosteps run on one instance before a fresh one is started (default 25)",
    )
    options = parser.parse_args(argv)
    if options.rounds < 1 or not options.seconds > 0 or options.history < 1:
        parser.error("--rounds and --history must be at least 1 and --seconds above 0")
    return options


def bench_store(store: Store, options: argparse.Namespace) -> dict[str, list[float]] | None:
    """Check, then measure one store; None when the check fails."""
    print(f"{store.name}: {store.description}")
    bench = Bench(store, options.history)
    try:
        if not bench.check():
            return None
        return run_rounds(bench, options.rounds, options.seconds)
    finally:
        bench.close()


def main(argv: Sequence[str] | None = None) -> int:
    """Check, measure and report; 1 when a check fails, 2 when the PostgreSQL driver is missing."""
    options = parse(argv)
    stores = common.selected(options.store, common.STORES)
    if common.missing_driver(stores):
        return 2
    common.print_environment(("eventsourcing", "psycopg", "incarnate"))
    print(
        f"{options.rounds} rounds x {options.seconds:g} s per variant, variants of a section "
        f"interleaved in {SLICES} turns; {options.history} macrosteps per instance; "
        "median of the rounds reported\n"
    )
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory:
        for name in stores:
            opened = (
                postgres_store() if name == "postgres" else contextlib.nullcontext(sqlite_store(directory))
            )
            with opened as store:
                if store is None:
                    continue
                rates = bench_store(store, options)
                if rates is None:
                    return 1
                results[name] = rates
    if not results:
        print("no store could be measured")
        return 0
    print()
    common.print_tables(results, TABLES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
