"""What-if replay: how many live instances ``incarnate check --replay`` checks per second.

A SQLite store is filled with ``--instances`` live ``ticket`` instances
(the charts of ``tests/unit/incarnate/whatif_charts.py``) by an engine on a
deterministic runner: a quarter only started, a quarter submitted, a quarter
submitted and held, a quarter submitted, held and released (one to four
macrosteps each, every one at its own times), and the listing caught up,
as a worker keeps it. The store is built once per path (``--store``
reuses it). A fresh engine over it, with the new charts, then runs what
``check --replay`` runs (:func:`incarnate._whatif.replay_all`): every
instance's events read (500 per query) and decoded, its mapping verdict,
its recorded inputs replayed through the new chart in memory. Timed twice:
with the verdicts (the command) and without (the replay alone). Run
``python -m bench.whatif --help`` for the options.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from bench._common import print_environment
from incarnate import DeterministicRunner, Engine, Storage
from incarnate._whatif import replay_all, replay_summary
from tests.unit.incarnate import whatif_charts

TARGET_SECONDS = 60.0
"""The target: 100,000 instances checked within a minute."""
TARGET_INSTANCES = 100_000


def build(path: Path, instances: int) -> None:
    """Fill a new store at ``path`` with ``instances`` live tickets of four histories."""
    engine = Engine([whatif_charts.V1], storage=Storage.sqlite(str(path)), runner=DeterministicRunner())
    began = time.perf_counter()
    try:
        for start in range(0, instances, 1000):
            ids = [engine.start("ticket") for _ in range(min(1000, instances - start))]
            engine.run_until_idle()
            for n, instance_id in enumerate(ids):
                for event in ("submit", "hold", "release")[: n % 4]:
                    engine.send(instance_id, event)
            engine.run_until_idle()
            print(f"\rbuilt {start + len(ids)} of {instances}", end="", file=sys.stderr, flush=True)
        engine.listing.catch_up()
    finally:
        engine.close()
    print(f"\rbuilt {instances} instances in {time.perf_counter() - began:.0f} s", file=sys.stderr)


def measure(path: Path, *, verdicts: bool) -> tuple[int, float, dict[str, int]]:
    """Instances checked, seconds, and the replay's counts, with a fresh engine over the store."""
    engine = Engine(whatif_charts.ALL_DIVERGES, storage=Storage.sqlite(str(path)))
    try:
        began = time.perf_counter()
        results = replay_all(engine.parts, verdicts=verdicts)
        seconds = time.perf_counter() - began
    finally:
        engine.close()
    counts = replay_summary(results)
    return len(results), seconds, {k: int(v) for k, v in counts.items() if isinstance(v, int)}


def main(argv: list[str] | None = None) -> int:
    """Build (or reuse) the store, then time the what-if check with and without verdicts."""
    parser = argparse.ArgumentParser(prog="python -m bench.whatif", description=__doc__.split("\n")[0])
    parser.add_argument("--instances", type=int, default=TARGET_INSTANCES, help="live instances (100000)")
    parser.add_argument(
        "--store",
        type=Path,
        help="a SQLite file to reuse (built there when missing); default: a temporary one",
    )
    options = parser.parse_args(argv)
    if options.instances < 1:
        parser.error(f"--instances must be at least 1, got {options.instances}")
    print_environment(["eventsourcing"])
    with tempfile.TemporaryDirectory(prefix="incarnate-bench-") as directory:
        path = options.store or Path(directory) / "whatif.db"
        if not path.exists():
            build(path, options.instances)
        rows = []
        for label, verdicts in (("check --replay", True), ("replay only", False)):
            count, seconds, counts = measure(path, verdicts=verdicts)
            rows.append((label, count, seconds, counts))
    target = TARGET_SECONDS * (rows[0][1] / TARGET_INSTANCES)
    print(f"{'what':<15} {'instances':>10} {'seconds':>8} {'instances/s':>12} {'target':>10}  replay")
    for label, count, seconds, counts in rows:
        rate = count / seconds if seconds else float("inf")
        shown = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
        mark = "met" if seconds <= target else "missed"
        limit = f"≤{target:.0f} s"
        print(f"{label:<15} {count:>10} {seconds:>8.1f} {rate:>12,.0f} {limit:>10}  {shown} ({mark})")
    print(f"cpus: {os.cpu_count()}; target: {TARGET_INSTANCES:,} instances in ≤{TARGET_SECONDS:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
