"""``incarnate workers``: the store's engines as a table or a JSON document, by group, old ones on demand."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import attrs
import pytest

from incarnate import Engine, Storage
from incarnate._fleet import RECENT
from incarnate.cli import main
from incarnate.cli._fleet import ago
from incarnate.store._sqlite import SQLiteCoordination
from tests.fleet_samples import LOAD as SAMPLE_LOAD
from tests.scenarios.charts import GATE

LOAD = attrs.evolve(SAMPLE_LOAD, behind=0)


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A SQLite store: a root owned by ``web-1``, which reports its load; ``web-2`` lags, a retired one."""
    path = str(tmp_path / "fleet.db")
    with Engine([GATE], storage=Storage.sqlite(path), engine_id="web-1") as engine:
        engine.start("gate")
        coordination = engine.parts.coordination
        coordination.beat("web-1", "default", 60.0, LOAD.to_json())
        lagging = attrs.evolve(LOAD, running=0, queued=0, leading=False, behind=7, lag=2.5)
        coordination.beat("web-2", "batch", 60.0, lagging.to_json())
        coordination.beat("old", "default", 60.0)
        coordination.retire("old")
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``incarnate ARGS``: its exit status, standard output and standard error."""
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_the_table_shows_every_engine(capsys: pytest.CaptureFixture[str], db: str) -> None:
    """One line per engine, by group: state, leader, last beat, trees, running, queued and lag."""
    status, out, err = run(capsys, "workers", "--db", db)
    assert (status, err) == (0, "")
    header, *rows = [" ".join(line.split()) for line in out.splitlines()]
    assert header == "ENGINE GROUP STATE LEADER LAST BEAT TREES RUNNING QUEUED LAG"
    assert [re.sub(r"\d+\.\ds ago", "AGE", row) for row in rows] == [
        "web-2 batch live - AGE 0 0 0 2.5s (7 behind)",
        "web-1 default live yes AGE 1 2 3 0.3s",  # one tree; 2 running, 3 queued
        "old default retired - AGE 0 ? ? ?",  # it reported no load
    ]


def test_json_and_group(capsys: pytest.CaptureFixture[str], db: str) -> None:
    """``--json`` prints the fleet's document; ``--group`` keeps that group's engines."""
    status, out, _ = run(capsys, "workers", "--db", db, "--json", "--group", "batch")
    document = json.loads(out)
    assert status == 0
    assert document["group"] == "batch" and document["leaders_from"] == "reports"
    assert [(e["engine_id"], e["state"], e["leader"], e["behind"]) for e in document["engines"]] == [
        ("web-2", "live", False, 7)
    ]
    status, out, _ = run(capsys, "workers", "--db", db, "--group", "nobody")
    assert (status, out.startswith("no engines of group 'nobody' in SQLite file")) == (0, True)


def test_old_engines_are_listed_on_demand(
    capsys: pytest.CaptureFixture[str], db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines that own nothing and last beat over an hour ago are left out, with a note, unless ``--all``."""
    later = time.time() + RECENT + 60  # a SQLite store's clock is the host's
    monkeypatch.setattr(SQLiteCoordination, "now", lambda self: later)
    status, out, err = run(capsys, "workers", "--db", db)
    assert status == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["web-1"]  # it owns a tree
    assert "2 lapsed or retired engine(s) that own nothing" in err and "--all" in err
    status, out, err = run(capsys, "workers", "--db", db, "--all")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["web-2", "web-1", "old"]
    assert err == ""


def test_ages_read_at_a_glance() -> None:
    """Seconds to a tenth under a minute, then whole minutes, hours and days."""
    assert [ago(a) for a in (None, 0.04, 59.9, 60, 3599, 7200, 200_000)] == [
        "-",
        "0.0s ago",
        "59.9s ago",
        "1m ago",
        "59m ago",
        "2h ago",
        "2d ago",
    ]
