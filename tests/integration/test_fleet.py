"""Two real ``incarnate worker`` processes on PostgreSQL, seen by ``incarnate workers`` and the console.

Each worker is an OS process with its own recovery manager; the group's
leader holds a PostgreSQL advisory lock, which the fleet's read model reads
from ``pg_locks``. Every wait is bounded in time, and every process is
killed in a ``finally`` (see ``tests.integration.test_worker``).
"""

from __future__ import annotations

import json
import re
import sys
import uuid
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from incarnate import Engine
from incarnate._fleet import LIVE, RETIRED, Fleet, fleet
from incarnate.console import create_app
from tests.integration.test_worker import run, start_in_client, store, wait_for, worker

OPTIONS = ("--lease", "3", "--recovery-scan-interval", "0.3", "--group", f"fleet-{uuid.uuid4().hex[:8]}")
"""Beat every second; try to lead every 0.3 s; in a group of this test's own, whose leader lock no
other test's workers (in other schemas of the same database) take."""


def settled(engine: Engine, engine_ids: set[str], trees: int) -> Fleet | None:
    """The fleet once every worker is live with a known load, one leads, and they own ``trees`` roots."""
    read = fleet(engine)
    rows = {row.engine_id: row for row in read.rows if row.engine_id in engine_ids}
    ready = (
        set(rows) == engine_ids
        and all(row.state == LIVE and row.load is not None for row in rows.values())
        and sum(bool(row.leader) for row in rows.values()) == 1
        and sum(row.trees for row in rows.values()) == trees
    )
    return read if ready else None


@pytest.mark.postgres
def test_two_worker_processes_show_with_one_leader(tmp_path: Path) -> None:
    """Both workers show live with their load and trees, exactly one leads; when it stops, the other leads."""
    with (
        store("postgres", tmp_path) as (storage, db, engine),
        worker(tmp_path, db, *OPTIONS) as first,
        worker(tmp_path, db, *OPTIONS) as second,
    ):
        names = {first.engine_id, second.engine_id}
        start_in_client(db, "gate", count=4)
        took = wait_for(lambda: settled(engine, names, 4) is not None, 20.0, 0.2)
        assert took is not None, f"{fleet(engine)}\n{first.output()}\n{second.output()}"

        listed = run(sys.executable, "-m", "incarnate", "workers", "--db", db, "--json")
        assert listed.returncode == 0, listed.stderr
        document = json.loads(listed.stdout)
        assert document["leaders_from"] == "locks"
        rows = {row["engine_id"]: row for row in document["engines"] if row["engine_id"] in names}
        assert {row["state"] for row in rows.values()} == {"live"}
        assert sorted(row["leader"] for row in rows.values()) == [False, True]
        assert sum(row["trees"] for row in rows.values()) == 4
        assert {row["threads"] for row in rows.values()} == {2}
        assert all(0 <= row["heartbeat_age"] < 3 for row in rows.values())

        table = run(sys.executable, "-m", "incarnate", "workers", "--db", db)
        assert table.returncode == 0, table.stderr
        leading = [
            line.split()[0] for line in table.stdout.splitlines() if re.search(r"\blive\s+yes\b", line)
        ]
        (leader,) = leading
        assert leader in names

        with TestClient(base_url="http://127.0.0.1:8080", app=create_app(storage)) as client:
            page = client.get("/workers").text
        row = re.search(rf'<td class="id">{re.escape(leader)}</td>(.*?)</tr>', page, re.S)
        assert row is not None and '<span class="badge leader">leader</span>' in row[1]

        stopping, staying = (first, second) if first.engine_id == leader else (second, first)
        stopping.terminate()

        def moved() -> bool:
            rows = {row.engine_id: row for row in fleet(engine).rows}
            gone, left = rows[stopping.engine_id], rows[staying.engine_id]
            return gone.state == RETIRED and not gone.leader and left.leader is True and left.trees == 4

        assert wait_for(moved, 20.0, 0.2) is not None, f"{fleet(engine)}\n{staying.output()}"
