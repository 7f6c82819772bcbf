"""Instructions per durable workflow: what the engine's code costs, counted, not timed.

Time on a shared machine moves by tens of percent from run to run, and on a
virtual machine the same instructions take longer after a thread slept on
a socket (see ``bench/README.md``). ``valgrind --tool=callgrind`` counts
the instructions a process executes instead, the same count for the same
code and inputs whatever else the machine does, so a change to the engine's
own cost shows as a difference of a fraction of a percent.

``--tasks`` counts the engine with task children that have streams of
their own, embedded in their parents (``Engine(embed_tasks=True)``), or
both side by side (the default).

The workload is DBOS's two-step workflow as ``bench.peers`` runs it
serially (``engine.start``, ``run_until_idle()``, ``handle.result()`` on a
deterministic runner): in memory (the engine alone), on SQLite and on
PostgreSQL (the engine and its client library; the server's instructions
are not counted). Each store runs twice in a fresh process under callgrind
with :data:`WARM_UP` untimed workflows first: once with ``--workflows``
workflows and once with none more, and the difference, divided by
``--workflows``, is one workflow's count (start-up, imports and the warm-up
cancel out). Python's string hashing is fixed (``PYTHONHASHSEED=0``) so
that the count repeats.

Run ``python -m bench.instructions --help`` for the options. It needs
``valgrind`` (Debian's package); a run of the three stores takes about
three minutes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from typing import Any

if not __package__:  # run as a file, ``python bench/instructions.py``: make the package importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _common as common

DESCRIPTION = "Instructions per durable two-step workflow, counted by callgrind, in memory and on each store."

STORES = ("memory", "sqlite", "postgres")
WARM_UP = 30
"""Workflows each counted process runs first, in both of its runs."""


def child(store_url: str, workflows: int, embed: bool = False) -> None:
    """Run ``WARM_UP + workflows`` two-step workflows on the store (the process callgrind counts).

    ``embed``: the engine embeds its task children in their parents (``Engine(embed_tasks=True)``).
    """
    from bench import peers
    from incarnate import DeterministicRunner, Engine, Storage

    storage = Storage.popo() if store_url == "memory" else Storage.from_url(store_url)
    with Engine(
        peers.CHARTS, peers.TASKS, storage=storage, runner=DeterministicRunner(), embed_tasks=embed
    ) as engine:
        for _ in range(WARM_UP + workflows):
            handle = engine.start(peers.STEPS)
            engine.run_until_idle()
            if handle.result() != peers.EXPECTED:
                raise SystemExit(f"a workflow returned {handle.result()!r}, not {peers.EXPECTED!r}")


def counted(store_url: str, workflows: int, embed: bool = False) -> int:
    """The instructions one process running ``workflows`` more workflows executed."""
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.instructions",
        "--internal",
        store_url,
        str(workflows),
        "embedded" if embed else "streams",
    ]
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run(command, capture_output=True, text=True, env=environment, cwd=root, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the counted process failed ({done.returncode}):\n{done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise SystemExit(f"callgrind printed no count:\n{done.stderr[-2000:]}")


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The command line options."""
    parser = argparse.ArgumentParser(prog="python -m bench.instructions", description=DESCRIPTION)
    parser.add_argument("--store", choices=[*STORES, "all"], default="all", help="which store (default all)")
    parser.add_argument(
        "--workflows", type=int, default=200, help="workflows counted per store (default 200)"
    )
    parser.add_argument(
        "--tasks",
        choices=["streams", "embedded", "both"],
        default="both",
        help="task children with streams of their own, embedded in their parents "
        "(Engine(embed_tasks=True)), or both side by side (default both)",
    )
    parser.add_argument("--internal", nargs=3, help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.internal is None and options.workflows < 1:
        parser.error("--workflows must be at least 1")
    return options


def main(argv: list[str] | None = None) -> int:
    """Count and print; 2 when valgrind (or, for PostgreSQL, psycopg) is missing."""
    options = parse(argv)
    if options.internal is not None:
        child(options.internal[0], int(options.internal[1]), options.internal[2] == "embedded")
        return 0
    if shutil.which("valgrind") is None:
        print("missing: valgrind (Debian: apt-get install valgrind)", file=sys.stderr)
        return 2
    stores = STORES if options.store == "all" else (options.store,)
    if common.missing_driver([s for s in stores if s != "memory"]):
        return 2
    common.print_environment(("eventsourcing", "psycopg", "msgspec", "incarnate"))
    print(f"{options.workflows} workflows counted per store, after {WARM_UP} uncounted (PYTHONHASHSEED=0)")
    kinds = ("streams", "embedded") if options.tasks == "both" else (options.tasks,)
    rows: list[tuple[str, dict[str, Any]]] = []
    with (
        tempfile.TemporaryDirectory(prefix=common.TEMPORARY_PREFIX) as directory,
        common.open_postgres() as pg,
    ):
        for store in stores:
            if store != "memory" and store != "sqlite" and pg is None:
                continue
            counts: dict[str, Any] = {}
            for kind in kinds:
                if store == "memory":
                    urls = ["memory"] * 2
                elif store == "sqlite":
                    urls = [f"sqlite:///{os.path.join(directory, f'{kind}-{n}.db')}" for n in range(2)]
                else:
                    assert pg is not None
                    urls = [pg.fresh(f"bench_instructions_{uuid.uuid4().hex[:8]}").url() for _ in range(2)]
                embed = kind == "embedded"
                more = counted(urls[0], options.workflows, embed)
                counts[kind] = (more - counted(urls[1], 0, embed)) / options.workflows
            rows.append((store, counts))
    header = "".join(f" {kind + ' tasks':>18}" for kind in kinds)
    ratio = len(kinds) == 2
    print(f"\n{'store':<10}{header}{' embedded/streams':>18}" if ratio else f"\n{'store':<10}{header}")
    for store, counts in rows:
        line = f"{store:<10}" + "".join(f" {counts[kind]:>18,.0f}" for kind in kinds)
        if ratio:
            line += f" {counts['embedded'] / counts['streams']:>18.3f}"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
