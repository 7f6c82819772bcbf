"""A worker process for the cross-process cold recovery test.

``run`` starts a recursive tree and kills its own process with SIGKILL at a
chosen commit point; ``recover`` is a fresh process that acquires the root
and reports what it recovered, then finishes the tree.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from typing import Any
from uuid import UUID

from aggregates import CONVERTER, Instance
from incarnate import Engine, Storage, UnknownInstance
from incarnate._ownership import acquire_or_adopt
from incarnate._work import UnitOfWork
from tests.scenarios import charts
from tests.stores import PG_DBNAME, PG_HOST, PG_PORT

ROOT = UUID("7ee00000-0000-4000-8000-000000000001")


def storage(args: argparse.Namespace) -> Storage:
    if args.store == "sqlite":
        return Storage.sqlite(args.path)
    return Storage.postgres(PG_DBNAME, host=PG_HOST, port=PG_PORT, user=args.user, schema=args.schema)


def build(args: argparse.Namespace) -> Engine:
    return Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=storage(args))


def chain(engine: Engine) -> list[Instance]:
    try:
        out = [engine.instance(ROOT)]
    except UnknownInstance:
        return []  # killed before the first commit
    while out[-1].record.activations:
        out.append(engine.instance(out[-1].record.activations[0].child_id))
    return out


def facts(engine: Engine) -> dict[str, Any]:
    """What must survive: each instance's Ref, birth facts, ancestry, snapshot; and the counts.

    Ownership claims (``Claimed``) are left out: recovery moves ownership, nothing else.
    """
    instances = chain(engine)
    topics = [n.topic for n in engine.parts.journal.recorder.select_notifications(start=1, limit=100_000)]
    topics = [t for t in topics if not t.endswith("Instance.Claimed")]
    return {
        "chain": [
            {
                "id": str(i.id),
                "parent": CONVERTER.unstructure(i.record.parent),
                "birth": CONVERTER.unstructure(i.record.birth),
                "ancestry": CONVERTER.unstructure(i.record.ancestry),
                "snapshot": i.record.snapshot,
                "version": sum(1 for e in engine.events_of(i.id) if type(e).__name__ != "Claimed"),
            }
            for i in instances
        ],
        "births": sum(1 for t in topics if t.endswith("Instance.Birth")),
        "events": len(topics),
    }


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
    engine.start("tree", id=ROOT)
    engine.run_until_idle()
    print(json.dumps({"idle": commits[0]}), flush=True)
    time.sleep(60)  # wait to be killed
    return 0


def recover(args: argparse.Namespace) -> int:
    engine = build(args)
    if not chain(engine):
        print(json.dumps({"recovered": facts(engine)}), flush=True)
        print(json.dumps({"final": "never started"}), flush=True)
        return 0
    acquire_or_adopt(engine.parts, ROOT)
    print(json.dumps({"recovered": facts(engine)}), flush=True)
    engine.run_until_idle()
    leaf = chain(engine)[-1]
    engine.send(leaf.id, "wither")
    engine.run_until_idle()
    print(json.dumps({"final": engine.instance(ROOT).record.status.value}), flush=True)
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
