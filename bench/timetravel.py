"""Time travel: what one position of a long history costs (target: 200 ms at 10,000 events).

Builds one ``bench.counter`` instance in a SQLite file (a temporary
directory) ticked until its history holds ``--events`` events (an
``Accepted`` and a ``Stepped`` per tick), once with the engine's default
snapshots and once with none, then times, on a fresh engine each time:

- ``cold``: ``Engine.at(id, k, window=20)`` (what the console asks: the
  instance and 20 events either side) at positions drawn at random over the whole
  history, each on an engine that has kept no checkpoint yet (the store's
  snapshots and the fold are all it has);
- ``stepping``: ``Engine.at`` at consecutive positions forward then back, as
  the console's previous/next links ask (in-memory checkpoints warm);
- ``fold``: the instance alone (``History.at``), without the moment's
  history that ``Engine.at`` also reads for its timeline.

Run it with ``python -m bench.timetravel`` (``--help`` for the options).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

from bench import _common as common
from bench.recovery import COUNTER
from incarnate import DeterministicRunner, Engine, Storage

TARGET_MS = 200.0


def build(path: Path, events: int, snapshots: bool) -> UUID:
    """A store at ``path`` holding one counter whose history has ``events`` events; returns its id."""
    env = None if snapshots else {"IS_SNAPSHOTTING_ENABLED": "n"}
    engine = Engine([COUNTER], storage=Storage.sqlite(str(path)), runner=DeterministicRunner(), env=env)
    try:
        instance_id = engine.start(COUNTER.name).id
        engine.run_until_idle()
        version = engine.instance(instance_id).version
        while version < events:
            engine.send(instance_id, "tick")
            engine.run_until_idle()
            version += 2
        return instance_id
    finally:
        engine.close()


def opened(path: Path, snapshots: bool) -> Engine:
    env = None if snapshots else {"IS_SNAPSHOTTING_ENABLED": "n"}
    return Engine([COUNTER], storage=Storage.sqlite(str(path)), runner=DeterministicRunner(), env=env)


def measure(
    path: Path, instance_id: UUID, snapshots: bool, samples: int, seed: int
) -> list[dict[str, object]]:
    """The three timings of one store, as table rows."""
    rows: list[dict[str, object]] = []
    chooser = random.Random(seed)
    with opened(path, snapshots) as engine:
        last = engine.instance(instance_id).version
    positions = [chooser.randint(1, last) for _ in range(samples)]
    cold: list[float] = []
    for k in positions:
        with opened(path, snapshots) as engine:
            began = time.perf_counter()
            moment = engine.at(instance_id, k, window=20)
            cold.append((time.perf_counter() - began) * 1000)
            assert moment.version == k
    start = chooser.randint(1, max(1, last - samples))
    steps = [*range(start, min(last, start + samples // 2) + 1)]
    steps += steps[::-1]
    stepping: list[float] = []
    with opened(path, snapshots) as engine:
        for k in steps:
            began = time.perf_counter()
            engine.at(instance_id, k, window=20)
            stepping.append((time.perf_counter() - began) * 1000)
    fold: list[float] = []
    for k in positions:
        with opened(path, snapshots) as engine:
            history = engine._history  # the fold alone, without the moment's timeline
            began = time.perf_counter()
            history.at(instance_id, k)
            fold.append((time.perf_counter() - began) * 1000)
    variant = "default snapshots" if snapshots else "no snapshots"
    for name, values in (("cold", cold), ("stepping", stepping), ("fold", fold)):
        rows.append(
            {
                "store": variant,
                "timing": name,
                "events": last,
                "positions": len(values),
                "median": statistics.median(values),
                "max": max(values),
            }
        )
    return rows


def print_rows(rows: Sequence[dict[str, object]]) -> None:
    headers = ("store", "timing", "history", "positions", "median ms", "max ms", f"target {TARGET_MS:.0f} ms")
    lines = [headers]
    for row in rows:
        median = float(row["median"])  # type: ignore[arg-type]
        largest = float(row["max"])  # type: ignore[arg-type]
        lines.append(
            (
                str(row["store"]),
                str(row["timing"]),
                f"{row['events']:,}",
                str(row["positions"]),
                f"{median:.1f}",
                f"{largest:.1f}",
                "met" if largest <= TARGET_MS else "MISSED",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    for line in lines:
        print("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.timetravel", description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events of the history (default 10,000)")
    parser.add_argument("--samples", type=int, default=30, help="positions timed per timing (default 30)")
    parser.add_argument("--seed", type=int, default=7, help="the seed positions are drawn with")
    args = parser.parse_args(argv)
    if args.events < 2 or args.samples < 2:
        parser.error("--events and --samples must be at least 2")
    common.print_environment(["eventsourcing"])
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-timetravel-") as directory:
        for snapshots in (True, False):
            path = Path(directory) / f"{'snapshots' if snapshots else 'plain'}.db"
            print(
                f"building {args.events:,} events ({'with' if snapshots else 'without'} snapshots)…",
                file=sys.stderr,
            )
            instance_id = build(path, args.events, snapshots)
            rows += measure(path, instance_id, snapshots, args.samples, args.seed)
    print_rows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
