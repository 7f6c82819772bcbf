"""The README's first command: the demo kills its worker process and recovers exactly, on a file of its
own, and never destroys a store it did not write."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from incarnate import Engine, Storage
from incarnate._demo import DEFAULT_DB, demo_store_problem, run_demo
from incarnate.cli import main
from incarnate.errors import CommandError
from tests.scenarios import charts

ROOT = Path(__file__).resolve().parents[2]


def other_store(path: Path) -> bytes:
    """Write a store holding another chart's instance at ``path``; return its bytes."""
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(str(path)))
    try:
        engine.start("parent", {"members": ["a"]})
        engine.run_until_idle()
        engine.listing.catch_up()  # as any command does: the refusal names the charts it lists
    finally:
        engine.close()
    return path.read_bytes()


@pytest.mark.slow
def test_demo_recovers_the_same_incarnations_after_sigkill(tmp_path: Path) -> None:
    """The worker is killed mid-flight and a fresh engine finishes the order with the same incarnations."""
    lines: list[str] = []
    assert run_demo(str(tmp_path / "demo.db"), lines.append, timeout=60.0) == 0
    text = "\n".join(lines)
    assert "with SIGKILL after" in text
    assert "CHANGED" not in text
    assert "Every incarnation that existed before the kill was recovered" in text
    assert "The order is done" in text


def test_demo_refuses_a_store_holding_another_chart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file holding another chart's instance is refused (exit 2, naming it) and left byte for byte."""
    path = tmp_path / "shop.db"
    before = other_store(path)
    siblings = sorted(p.name for p in tmp_path.iterdir())
    assert main(["demo", "--db", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith(f"incarnate demo: error: {str(path)!r} exists and it holds the records of ")
    assert "(instances of 'kid', 'parent')" in line
    assert line.endswith("Run it on another file: incarnate demo --db NEW_PATH")
    with pytest.raises(CommandError, match="the demo never replaces a store it did not write"):
        run_demo(str(path), lambda line: None)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == siblings, "no file appeared or went beside it"


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (None, "it is a directory"),
        (b"some notes, not a database\n", "it is not a SQLite database"),
        (b"SQLite format 3\x00" + b"\xff" * 200, "it cannot be read as a SQLite database"),
    ],
)
def test_demo_refuses_what_it_cannot_prove_is_a_demo(
    tmp_path: Path, content: bytes | None, problem: str
) -> None:
    """A directory, a file that is not SQLite or a damaged database is refused and left as it is."""
    path = tmp_path / "target.db"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert demo_store_problem(str(path)) == problem or problem in str(demo_store_problem(str(path)))
    with pytest.raises(CommandError, match=problem):
        run_demo(str(path), lambda line: None)
    assert path.is_dir() if content is None else path.read_bytes() == content


def test_demo_may_use_a_missing_or_empty_file(tmp_path: Path) -> None:
    """A file that does not exist, or is empty, holds nothing the demo could destroy."""
    assert demo_store_problem(str(tmp_path / "missing.db")) is None
    (tmp_path / "empty.db").write_bytes(b"")
    assert demo_store_problem(str(tmp_path / "empty.db")) is None


@pytest.mark.slow
def test_demo_leaves_the_default_store_alone(tmp_path: Path) -> None:
    """``incarnate demo`` runs on ./incarnate-demo.db, leaves ./incarnate.db untouched, and may run again."""
    store = tmp_path / "incarnate.db"
    before = other_store(store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(2):  # the second run replaces the first run's file: it holds only the demo
        result = subprocess.run(
            [sys.executable, "-m", "incarnate", "demo"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=180,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"on {tmp_path / DEFAULT_DB}" in result.stdout
        assert store.read_bytes() == before
        assert demo_store_problem(str(tmp_path / DEFAULT_DB)) is None
