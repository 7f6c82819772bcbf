"""The cold-recovery recipe across real OS processes, killed with SIGKILL at random commit points."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.stores import _execute, require_postgres

ROOT_DIR = Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("INCARNATE_KILL_SEED", random.SystemRandom().randrange(1_000_000)))
KILL_POINTS = [
    (
        random.Random(SEED + n).choice(["before-commit", "after-commit"]),
        random.Random(SEED * 7 + n).randint(1, 5),
    )
    for n in range(3)
]


@pytest.fixture(params=["sqlite", "postgres"])
def store_args(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[str]]:
    """Command-line arguments naming an empty store of each kind."""
    if request.param == "sqlite":
        yield ["--store", "sqlite", "--path", str(tmp_path / "tree.db")]
        return
    user = require_postgres()
    schema = f"t_{uuid.uuid4().hex[:16]}"
    _execute(user, f"CREATE SCHEMA {schema}")
    try:
        yield ["--store", "postgres", "--schema", schema, "--user", user]
    finally:
        _execute(user, f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def worker(
    *args: str, timeout: float = 60.0, module: str = "tests.scenarios.recovery_worker"
) -> tuple[int, list[dict[str, Any]]]:
    """Run a worker module in a fresh process; returns its exit code and JSON lines."""
    process = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT_DIR,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[dict[str, Any]] = []
    assert process.stdout is not None
    try:
        for line in process.stdout:
            lines.append(json.loads(line))
            if "idle" in lines[-1]:
                process.kill()  # finished before the chosen point: kill it idle
                break
        process.wait(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if process.returncode not in (0, -9):
        stderr = process.stderr.read() if process.stderr else ""
        raise AssertionError(f"worker {args} exited {process.returncode}:\n{stderr}")
    return process.returncode, lines


@pytest.mark.slow
@pytest.mark.parametrize("kill", KILL_POINTS, ids=[f"{p}-{k}" for p, k in KILL_POINTS])
def test_cold_recovery_across_processes(store_args: list[str], kill: tuple[str, int]) -> None:
    """A process killed at a commit point leaves incarnations a fresh process recovers exactly."""
    point, kill_at = kill
    code, lines = worker("run", *store_args, "--kill-at", str(kill_at), "--point", point)
    assert code == -9, f"the worker was not killed (seed {SEED}): {lines}"
    _, committed_lines = worker("facts", *store_args)
    committed = committed_lines[0]["facts"]
    _, recovered_lines = worker("recover", *store_args)
    recovered = recovered_lines[0]["recovered"]
    assert recovered["chain"] == committed["chain"], f"seed {SEED}, kill {kill}"
    assert recovered["births"] == committed["births"], "recovery published a Birth"
    assert recovered["events"] == committed["events"], "recovery committed something"
    expected = "done" if committed["chain"] else "never started"
    assert recovered_lines[-1] == {"final": expected}
