# ruff: noqa: F401, F811  (pytest fixtures imported from the module that defines them)
"""Time travel on the command line: ``show --at``, ``show --at --tree`` and ``timeline --at``."""

from __future__ import annotations

import json

import pytest

from incarnate import Engine, Storage
from tests.scenarios import charts
from tests.unit.incarnate.test_cli_views import CHARTS, Store, run, store


def test_show_at_a_version_prints_the_instance_as_it_was(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``show ID --at 2`` prints the parent at version 2: its first macrostep's configuration and child."""
    status, out, _ = run(capsys, "show", str(store.parent), "--at", "2", "--db", store.db)
    assert status == 0
    assert f"{store.parent} at version 2 of" in out
    assert "configuration: " in out and "status:        running" in out


def test_show_at_json_has_the_instances_inbox_and_activations(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``show --at K --json`` is one document: position, event, and the subject with inbox and activations."""
    status, out, _ = run(capsys, "show", str(store.charging), "--at", "1", "--json", "--db", store.db)
    assert status == 0
    document = json.loads(out)
    assert document["position"] == 1 and document["version"] == 1 and document["tree"] is False
    assert document["event"]["event"] == "Started"
    [instance] = document["instances"]
    assert instance["id"] == str(store.charging) and instance["status"] == "born"
    assert instance["inbox"] == [] and instance["activations"] == []


def test_tree_positions_cover_every_instance_of_the_tree(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """At the last position of the charging tree, the failed charge is there, failed, as it is now."""
    _, out, _ = run(
        capsys, "timeline", str(store.charging), "--tree", "--at", "1", "--json", "--db", store.db
    )
    last = json.loads(out)["positions"]
    status, out, _ = run(
        capsys, "show", str(store.charging), "--tree", "--at", str(last), "--json", "--db", store.db
    )
    assert status == 0
    statuses = {i["id"]: i["status"] for i in json.loads(out)["instances"]}
    assert statuses[str(store.failed)] == "failed"


def test_timeline_at_marks_the_position(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``timeline ID --at 2`` numbers the events, marks the second with ``>`` and shows the instance then."""
    status, out, _ = run(capsys, "timeline", str(store.parent), "--at", "2", "--db", store.db)
    assert status == 0
    marked = [line for line in out.splitlines() if line.startswith(">")]
    assert len(marked) == 1 and marked[0].split()[1] == "2"
    assert "at version 2 of" in out


def test_a_position_out_of_range_is_a_clear_error(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--at 0`` and ``--at`` past the end name the range and exit 2 with the stable code."""
    status, _, err = run(capsys, "show", str(store.parent), "--at", "999", "--db", store.db)
    assert status == 2
    assert "has no version 999: its history runs from 1 to" in err
    status, _, err = run(capsys, "show", str(store.parent), "--at", "0", "--json", "--db", store.db)
    assert status == 2
    assert json.loads(err)["error"]["code"] == "position-out-of-range"


def test_tree_without_at_is_refused(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``show --tree`` without ``--at`` says what it needs."""
    status, _, err = run(capsys, "show", str(store.parent), "--tree", "--db", store.db)
    assert status == 2
    assert "--tree needs --at K" in err


def test_fork_prints_the_new_root_and_leaves_the_source(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``fork ID --at 2 --json`` names a new root whose first facts record the source and the version."""
    with Engine(charts.ALL, storage=Storage.sqlite(store.db)) as engine:
        gate = engine.start("gate").id
    status, out, _ = run(
        capsys, "fork", str(gate), "--at", "2", "--json", "--charts", CHARTS, "--db", store.db
    )
    assert status == 0, out
    document = json.loads(out)
    assert document["source"] == str(gate) and document["version"] == 2
    assert document["configuration"] == ["awaiting_answer"]
    status, out, _ = run(capsys, "timeline", document["id"], "--db", store.db)
    assert f"forked from {gate} at version 2" in out
    status, _, err = run(
        capsys, "fork", str(store.charging), "--at", "2", "--charts", CHARTS, "--db", store.db
    )
    assert status == 2 and "fork at a version where no child runs" in err


def test_fork_of_a_task_and_redrive_of_a_running_root_are_clear_errors(
    store: Store,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each refusal exits 2 with its stable code and says why."""
    status, _, err = run(
        capsys, "fork", str(store.failed), "--at", "1", "--json", "--charts", CHARTS, "--db", store.db
    )
    assert status == 2 and json.loads(err)["error"]["code"] == "fork-refused"
    status, _, err = run(capsys, "redrive", str(store.parent), "--db", store.db)
    assert status == 2 and "is running, not failed or parked" in err
    status, _, err = run(capsys, "redrive", str(store.failed), "--dry-run", "--db", store.db)
    assert status == 2 and f"redrive or fork its root {store.charging}" in err
