"""Writes ``whole_snapshot_store.db``: a store whose ``Stepped`` events carry whole snapshots.

It was run once with incarnate 0.1.0 (commit bbed90a, before ``Stepped``
events carried deltas), from the repository root::

    python tests/integration/data/make_whole_snapshot_store.py

A parent fans out to ``a``, ``b`` and ``c``; ``a`` finishes and its output
is consumed; the parent regroups to ``b``, ``c`` and ``d`` (the done slot
``a`` is removed, ``d`` born), and ``c`` shouts to its parent. The engine
then stops with ``b``, ``c`` and ``d`` running. The instance ids are fixed
so that the test can name them.
"""

from __future__ import annotations

import os
import sys
from uuid import UUID

sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
)

from incarnate import Engine, Storage, VirtualClock
from tests.scenarios import charts

PARENT_ID = UUID("00000000-0000-4000-8000-00000000fa00")
START = 1_000.0


def main() -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "whole_snapshot_store.db")
    if os.path.exists(path):
        os.remove(path)
    engine = Engine(
        charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(path), clock=VirtualClock(START)
    )
    engine.start("parent", {"members": ["a", "b", "c"]}, id=PARENT_ID)
    engine.run_until_idle()
    kids = {k.record.parent.key: k.id for k in engine.children(PARENT_ID) if k.record.parent is not None}
    engine.send(kids["a"], "finish")
    engine.run_until_idle()
    engine.send(PARENT_ID, "regroup", ["b", "c", "d"])
    engine.run_until_idle()
    engine.send(kids["c"], "shout")
    engine.run_until_idle()
    engine.close()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(path + suffix):
            raise SystemExit(f"{path + suffix} is left over; the store must be one file")


if __name__ == "__main__":
    main()
