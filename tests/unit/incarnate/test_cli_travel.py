# ruff: noqa: F401, F811  (pytest fixtures imported from the module that defines them)
"""Time travel on the command line: ``show --at``, ``show --at --tree`` and ``timeline --at``."""

from __future__ import annotations

import json

import pytest

from tests.unit.incarnate.test_cli_views import Store, run, store


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
