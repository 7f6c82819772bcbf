"""Fan-out: a parent that births N children and waits for all of them, per child, as N grows.

The parent's initial state invokes the site ``member`` with ``map`` over
``range(size)``: one first macrostep births every child (one commit), each
child is a chart whose initial state is final (it finishes in its own first
macrostep and tells its parent), and the parent consumes each outcome in a
macrostep of its own; when the last member is done the family completes and
the parent finishes. Everything runs on the deterministic runner, in one
thread, until idle.

Each size runs in a fresh subprocess on a fresh store (a SQLite file in a
temporary directory; a fresh schema in the PostgreSQL test database), which
reports:

* ``time``: from ``start`` to idle, wall clock;
* ``bytes``: the stored state of every event of the run (the notification
  log, parent and children), summed; the parent's share is shown apart;
* ``memory``: the peak resident set of the subprocess (``ru_maxrss``) less
  its resident set just before the start, and, in a second run of the same
  size under ``tracemalloc`` (slower; its time is not used), the peak of
  the Python heap. The resident set grows by whole arenas and pages of
  cache, so at 100 children it is mostly what the process happened to map
  already (from 1 to 60 KiB per child from machine to machine); the
  heap's peak is what the engine holds, and the verdict judges it.

Each subprocess first runs an uncounted fan-out of :data:`WARM_UP`
children on the same engine, so that what any first run builds once
(imports, codec hooks, caches) is not charged to the smallest size.

Each size is measured ``--rounds`` times (3 by default), the sizes in a
rotating order from round to round, and each figure is the median of its
rounds (a 100-child run lasts a tenth of a second: one run of it is mostly
noise). Each figure is divided by the number of children, and each
per-child figure is compared with the 100-child one (the target: within
±50 % at every size). Run ``python -m bench.fanout --help`` for the options.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import attrs

from incarnate import Engine, Storage
from statechart import Chart, final, invoke, state, transition

if not __package__:  # run as a file, ``python bench/fanout.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = "Fan-out: time, bytes stored and peak memory per child for 100 to 10,000 children."

SIZES = (100, 1_000, 10_000)

WARM_UP = 20
"""Children of the uncounted fan-out each measurement starts with."""

TOLERANCE = 0.5
"""How far a per-child figure may be from the 100-child one (±50 %)."""


@attrs.frozen
class Family:
    """The parent's context: how many members it fans out to."""

    size: int = 0


def members(family: Family) -> dict[str, None]:
    """One member per number below ``size``; the children take no input."""
    return {str(n): None for n in range(family.size)}


KID = Chart("bench.fanout.kid", final("done"), description="A child that finishes at once.")

PARENT = Chart(
    "bench.fanout.parent",
    state(
        "fanning",
        invoke=[invoke("member", chart=KID.name, map=members)],
        on=[transition("done.invoke.member", "gathered")],
    ),
    final("gathered"),
    context=Family,
    description="A parent that fans out to ``size`` children and waits for all of them.",
)


# ------------------------------------------------------------ one size


def _rss_kib() -> int:
    """The resident set now, in KiB (Linux ``/proc``)."""
    with open("/proc/self/statm") as statm:
        pages = int(statm.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") // 1024


def measure(storage: Storage, size: int, *, traced: bool = False) -> dict[str, Any]:
    """Run one fan-out of ``size`` children on ``storage``; the figures of the run.

    ``traced``: memory is the peak of the Python heap (``tracemalloc``) instead
    of the resident set; the run is slower under it.
    """
    engine = Engine([PARENT, KID], storage=storage)
    try:
        # A small fan-out first, not counted: imports, codecs and caches that any first
        # run builds once would otherwise weigh on the smallest size alone.
        warm = engine.start(PARENT.name, {"size": WARM_UP})
        engine.run_until_idle(max_units=10 * WARM_UP + 100)
        if engine.instance(warm.id).record.status.value != "done":
            raise RuntimeError("the warm-up fan-out did not finish")
        start = (engine.parts.journal.recorder.max_notification_id() or 0) + 1
        if traced:
            tracemalloc.start()
        before = _rss_kib()
        began = time.perf_counter()
        parent = engine.start(PARENT.name, {"size": size})
        engine.run_until_idle(max_units=10 * size + 100)
        elapsed = time.perf_counter() - began
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if traced:
            before, peak = 0, tracemalloc.get_traced_memory()[1] // 1024
            tracemalloc.stop()
        record = engine.instance(parent.id).record
        if record.status.value != "done":
            raise RuntimeError(f"the parent ended {record.status.value}, not done")
        total = parent_bytes = parent_events = 0
        while True:
            page = engine.parts.journal.recorder.select_notifications(start, 1000)
            if not page:
                break
            for notification in page:
                total += len(notification.state)
                if notification.originator_id == parent.id:
                    parent_bytes += len(notification.state)
                    parent_events += 1
            start = page[-1].id + 1
    finally:
        engine.close()
    return {
        "size": size,
        "seconds": elapsed,
        "bytes": total,
        "parent_bytes": parent_bytes,
        "parent_events": parent_events,
        "memory_kib": max(peak - before, 0),
    }


def child_main(store: str, size: int, location: str, *, traced: bool = False) -> None:
    """The subprocess: measure one size on one store, print the figures as JSON."""
    storage: Storage
    if store == "sqlite":
        storage = Storage.sqlite(location)
    else:
        host, port, dbname, user, schema = location.split(",")
        storage = Storage.postgres(dbname, host=host, port=int(port), user=user, schema=schema)
    print(json.dumps(measure(storage, size, traced=traced)))


def run_size(store: str, size: int, location: str, *, traced: bool = False) -> dict[str, Any]:
    """Measure one size in a fresh subprocess."""
    command = [sys.executable, "-m", "bench.fanout", "--child", store, str(size), location]
    if traced:
        command.append("--tracemalloc")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=root)
    if done.returncode != 0:
        raise RuntimeError(f"{store} {size}: exit {done.returncode}\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- table


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base else "-"


def medians(runs: list[dict[str, Any]], heaps: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's rounds as one result: the median of each figure, and the range of the times.

    ``heaps`` are the traced runs of the same size (empty: not measured).
    """
    result: dict[str, Any] = {"size": runs[0]["size"]}
    for name in ("seconds", "bytes", "parent_bytes", "parent_events", "memory_kib"):
        result[name] = statistics.median(run[name] for run in runs)
    result["fastest"] = min(run["seconds"] for run in runs)
    result["slowest"] = max(run["seconds"] for run in runs)
    result["heap_kib"] = statistics.median(run["memory_kib"] for run in heaps) if heaps else None
    return result


def print_results(store: str, results: list[dict[str, Any]]) -> None:
    """One table per store: figures per child (medians of the rounds), and each against the first size's.

    The verdict covers time, bytes and the heap's peak; the resident set's
    growth is shown, and judged only when the heap was not measured.
    """
    heap = results[0]["heap_kib"] is not None
    print(
        f"{'children':>9} {'total s':>9} {'ms/child':>9} {'min-max':>11} {'B/child':>9} {'RSS KiB/ch':>10} "
        f"{'heap KiB/ch':>11} {'parent ev':>9} {'parent B':>11} {'time x':>7} {'bytes x':>7} "
        f"{'heap x' if heap else 'RSS x':>7}"
    )
    memory = "heap_kib" if heap else "memory_kib"
    base = results[0]
    base_time = base["seconds"] / base["size"]
    base_bytes = base["bytes"] / base["size"]
    base_memory = base[memory] / base["size"]
    worst = 0.0
    for result in results:
        size = result["size"]
        per_time = result["seconds"] / size
        per_bytes = result["bytes"] / size
        per_memory = result[memory] / size
        for value, reference in ((per_time, base_time), (per_bytes, base_bytes), (per_memory, base_memory)):
            if reference:
                worst = max(worst, abs(value / reference - 1))
        span = f"{result['fastest'] / size * 1000:.2f}-{result['slowest'] / size * 1000:.2f}"
        heap_text = f"{result['heap_kib'] / size:.1f}" if heap else "-"
        print(
            f"{size:>9,} {result['seconds']:>9.2f} {per_time * 1000:>9.2f} {span:>11} {per_bytes:>9,.0f} "
            f"{result['memory_kib'] / size:>10.1f} {heap_text:>11} {result['parent_events']:>9,.0f} "
            f"{result['parent_bytes']:>11,.0f} {_ratio(per_time, base_time):>7} "
            f"{_ratio(per_bytes, base_bytes):>7} {_ratio(per_memory, base_memory):>7}"
        )
    verdict = "met" if worst <= TOLERANCE else "not met"
    judged = "time, bytes and heap" if heap else "time, bytes and resident set"
    print(f"{store}: per-child {judged} within ±{TOLERANCE:.0%} of the first size's: {verdict}")


def _sqlite_place(directory: str, label: str) -> str:
    """A fresh SQLite file for one run."""
    return os.path.join(directory, f"fanout-{label}.db")


def _postgres_place(postgres: common.Postgres, label: str) -> str:
    """A fresh schema for one run, as the child process's location argument."""
    schema = f"bench_fanout_{uuid.uuid4().hex[:12]}"
    postgres.fresh(schema)
    parts = (common.POSTGRES_HOST, str(common.POSTGRES_PORT), common.POSTGRES_DBNAME)
    return ",".join((*parts, postgres.user, schema))


def main(argv: list[str] | None = None) -> int:
    """Measure every size on every selected store and print the tables."""
    parser = argparse.ArgumentParser(prog="python -m bench.fanout", description=DESCRIPTION)
    parser.add_argument(
        "--sizes",
        type=lambda text: tuple(int(n) for n in text.split(",")),
        default=SIZES,
        help="comma-separated numbers of children (default 100,1000,10000)",
    )
    common.add_choice(parser, "store", common.STORES)
    parser.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="runs of every size, in a rotating order; each figure is their median (default 3)",
    )
    parser.add_argument(
        "--no-heap",
        action="store_true",
        help="skip the traced runs (the heap's peak); memory is then judged by the resident set alone",
    )
    parser.add_argument("--child", nargs=3, metavar=("STORE", "SIZE", "LOCATION"), help=argparse.SUPPRESS)
    parser.add_argument("--tracemalloc", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.rounds < 1:
        parser.error("--rounds must be at least 1")
    if options.child:
        store, size, location = options.child
        child_main(store, int(size), location, traced=options.tracemalloc)
        return 0
    stores = common.selected(options.store, common.STORES)
    if common.missing_driver(stores):
        return 2
    common.print_environment(("eventsourcing", "attrs", "cattrs"))
    kinds = (False,) if options.no_heap else (False, True)
    print(
        f"sizes {', '.join(f'{n:,}' for n in options.sizes)}; deterministic runner, one thread; "
        f"medians of {options.rounds} round(s), a fresh process and store per run"
        + ("" if options.no_heap else "; each run again under tracemalloc for the heap's peak")
        + "\n"
    )
    for store in stores:
        runs: dict[tuple[int, bool], list[dict[str, Any]]] = {
            (n, traced): [] for n in range(len(options.sizes)) for traced in kinds
        }
        with contextlib.ExitStack() as stack:
            if store == "sqlite":
                directory = stack.enter_context(tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX))
                print(f"sqlite: files in {directory}")
                place: Callable[[str], str] = functools.partial(_sqlite_place, directory)
            else:
                postgres = stack.enter_context(common.open_postgres())
                if postgres is None:
                    continue
                print(f"postgres: {postgres.describe()}")
                place = functools.partial(_postgres_place, postgres)
            for turn in range(options.rounds):
                for n in common.rotated(range(len(options.sizes)), turn):
                    for traced in kinds:
                        location = place(f"{turn}-{n}-{int(traced)}")
                        runs[(n, traced)].append(run_size(store, options.sizes[n], location, traced=traced))
        results = [medians(runs[(n, False)], runs.get((n, True), [])) for n in range(len(options.sizes))]
        print_results(store, results)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
