"""A worker process for the durable SCXML example (docs/examples/scxml): run it, kill it, recover it.

``run`` starts ``order.scxml`` (which invokes ``payment.scxml`` and makes a
delayed send) and kills its own process with SIGKILL at a chosen commit
point; ``facts`` reports what is stored; ``recover`` is a fresh process that
loads the same documents, acquires the order, reports what it recovered and
runs it to its end.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from aggregates import CONVERTER, Instance
from incarnate import Engine, Storage, UnknownInstance
from incarnate._ownership import acquire_or_adopt
from incarnate._work import UnitOfWork
from statechart.scxml import load
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT

ROOT = UUID("5c4e0000-0000-4000-8000-000000000001")
DOCUMENTS = Path(__file__).resolve().parents[2] / "docs" / "examples" / "scxml"


def build(args: argparse.Namespace) -> Engine:
    storage: Storage
    if args.store == "sqlite":
        storage = Storage.sqlite(args.path)
    else:
        storage = Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=args.user, schema=args.schema)
    return Engine([load(DOCUMENTS / "order.scxml")], storage=storage)


def tree(engine: Engine) -> list[Instance]:
    """The order and every child it ever birthed (each incarnation), parents first."""
    try:
        found = [engine.instance(ROOT)]
    except UnknownInstance:
        return []  # killed before the first commit
    for instance in found:
        found.extend(engine.instance(a.child_id) for a in instance.record.activations)
    return found


def facts(engine: Engine) -> dict[str, Any]:
    """Each instance's identity, birth facts, snapshot and event count (ownership claims left out)."""
    topics = [n.topic for n in engine.parts.journal.recorder.select_notifications(start=1, limit=100_000)]
    topics = [t for t in topics if not t.endswith("Instance.Claimed")]
    return {
        "tree": [
            {
                "id": str(i.id),
                "chart": i.record.name,
                "parent": CONVERTER.unstructure(i.record.parent),
                "birth": CONVERTER.unstructure(i.record.birth),
                "snapshot": i.record.snapshot,
                "version": sum(1 for e in engine.events_of(i.id) if type(e).__name__ != "Claimed"),
            }
            for i in tree(engine)
        ],
        "births": sum(1 for t in topics if t.endswith("Instance.Birth")),
        "events": len(topics),
    }


def drive(engine: Engine, seconds: float) -> None:
    """Run what is due until the order has ended (bounded: ``seconds`` of wall time)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        engine.run_until_idle()
        if engine.instance(ROOT).record.status.finished:
            return
        time.sleep(0.02)


def run(args: argparse.Namespace) -> int:
    engine = build(args)
    commits = [0]

    def hook(point: str, uow: UnitOfWork) -> None:
        if point == args.point:
            commits[0] += 1
            if commits[0] == args.kill_at:
                print(json.dumps({"killed_at": commits[0], "point": point}), flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

    engine.parts.commits.hooks.append(hook)
    engine.start("order", id=ROOT)
    drive(engine, 10)
    print(json.dumps({"idle": commits[0]}), flush=True)
    time.sleep(60)  # wait to be killed
    return 0


def recover(args: argparse.Namespace) -> int:
    engine = build(args)
    if not tree(engine):
        print(json.dumps({"recovered": facts(engine)}), flush=True)
        print(json.dumps({"final": "never started"}), flush=True)
        return 0
    acquire_or_adopt(engine.parts, ROOT)
    print(json.dumps({"recovered": facts(engine)}), flush=True)
    drive(engine, 10)
    root = engine.instance(ROOT).record
    print(json.dumps({"final": root.status.value, "output": root.output}), flush=True)
    engine.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("phase", choices=["run", "recover", "facts"])
    parser.add_argument("--store", choices=["sqlite", "postgres"], required=True)
    parser.add_argument("--path", default="")
    parser.add_argument("--schema", default="")
    parser.add_argument("--user", default="postgres")
    parser.add_argument("--kill-at", type=int, default=1)
    parser.add_argument("--point", choices=["before-commit", "after-commit"], default="after-commit")
    args = parser.parse_args(argv)
    if args.phase == "run":
        return run(args)
    if args.phase == "recover":
        return recover(args)
    engine = build(args)
    print(json.dumps({"facts": facts(engine)}), flush=True)
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
