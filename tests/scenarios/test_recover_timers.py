"""``incarnate recover`` and pending timers: it waits for those due soon and reports the others."""

from __future__ import annotations

import re
from pathlib import Path
from uuid import UUID

import pytest

from aggregates import InstanceStatus
from incarnate import Engine, Storage, TaskCall
from incarnate.cli import main
from statechart import Chart, JsonValue, RetryPolicy, after, final, invoke, state, transition

BACKOFF = 2.0
"""Seconds between the failed first attempt of the task and its retry."""


def flaky(call: TaskCall) -> JsonValue:
    """Fail the first attempt, succeed on the retry."""
    if call.attempt == 1:
        raise ConnectionError("the gateway timed out")
    return f"paid on attempt {call.attempt}"


RETRYING = Chart(
    "retrying",
    state(
        "charging",
        invoke=[invoke("charge", task="flaky", retry=RetryPolicy(max_attempts=2, backoff=BACKOFF))],
        on=[transition("done.invoke.charge", "paid"), transition("error.invoke.charge", "declined")],
    ),
    final("paid"),
    final("declined"),
)
"""Invokes ``flaky``, retrying it once after ``BACKOFF`` seconds."""

SLEEPY = Chart("sleepy", state("waiting", on=[after(3600.0, "woken")]), final("woken"))
"""Wakes up after an hour."""

CHARTS = [RETRYING, SLEEPY]
TASKS = {"flaky": flaky}
HERE = "tests.scenarios.test_recover_timers"


def prepare(path: Path, chart: str) -> UUID:
    """Start ``chart`` in an engine over the SQLite file, run what is due, and close the engine."""
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(path)))
    try:
        root = engine.start(chart)
        engine.run_until_idle()
        return root
    finally:
        engine.close()


def status_of(path: Path, instance_id: UUID) -> InstanceStatus:
    """The stored status of an instance, read by a fresh engine."""
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(path)))
    try:
        return engine.instance(instance_id).record.status
    finally:
        engine.close()


def recover(capsys: pytest.CaptureFixture[str], path: Path, *options: str) -> tuple[int, str, str]:
    """Run ``incarnate recover`` over the file; the exit status, standard output and standard error."""
    status = main(
        ["recover", "--db", str(path), "--charts", f"{HERE}:CHARTS", "--tasks", f"{HERE}:TASKS", *options]
    )
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_recover_waits_for_a_retry_that_falls_due_within_the_wait(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A retry whose backoff ends within ``--wait`` runs before ``recover`` exits; nothing is left pending."""
    path = tmp_path / "shop.db"
    root = prepare(path, "retrying")
    assert status_of(path, root) is InstanceStatus.RUNNING  # the retry waits for its backoff
    status, out, _ = recover(capsys, path, "--wait", "10")
    assert status == 0
    assert out.splitlines()[0].endswith(": idle")
    assert "timers:" not in out
    assert status_of(path, root) is InstanceStatus.DONE


def test_recover_reports_timers_due_after_the_wait_and_exits_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A timer due after ``--wait`` is reported with its due time and the next step; the exit status is 3."""
    path = tmp_path / "shop.db"
    root = prepare(path, "sleepy")
    status, out, _ = recover(capsys, path, "--wait", "0.5")
    assert status == 3
    lines = out.splitlines()
    assert lines[0].endswith(": idle, with timers due after the 0.5s --wait")
    [timers] = [line for line in lines if line.startswith("timers:")]
    assert re.fullmatch(
        r"timers:     1 pending, next due at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00 \(in 3[56]\d\ds\): "
        r"run `incarnate recover` again then, or keep an engine running on this store",
        timers,
    ), timers
    assert status_of(path, root) is InstanceStatus.RUNNING


def test_recover_refuses_a_negative_wait(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A negative ``--wait`` exits 2 before anything runs, saying what it accepts."""
    path = tmp_path / "shop.db"
    prepare(path, "sleepy")
    status, out, err = recover(capsys, path, "--wait", "-1")
    assert (status, out) == (2, "")
    assert "--wait must be zero or a positive number of seconds, got -1" in err


def test_recover_leaves_a_live_workers_tree_alone_and_names_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``recover`` next to a live worker takes nothing of its trees and names the root and the holder."""
    path = tmp_path / "shop.db"
    engine = Engine(CHARTS, TASKS, storage=Storage.sqlite(str(path)))
    try:
        root = engine.start("sleepy")
        engine.run_until_idle()
        engine.parts.coordination.beat(engine.engine_id, "default", 600.0)  # live, as a worker is
        before = len(engine.events_of(root))
        status, out, _ = recover(capsys, path, "--wait", "0")
        assert status == 0  # its timer is its owner's to fire, not this command's
        assert f"left alone: 1 call tree(s) held by live workers: {root} (held by {engine.engine_id})" in out
        assert len(engine.events_of(root)) == before  # no Claimed, no step: untouched
        assert engine.owns(root)
    finally:
        engine.close()
