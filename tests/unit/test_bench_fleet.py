"""``bench.fleet``: its smallest latency run on SQLite, whose check reads the worker's macrosteps back."""

from __future__ import annotations

from pathlib import Path

from bench import fleet


def test_the_latency_section_sees_every_step_a_worker_process_takes(tmp_path: Path) -> None:
    """A worker process takes over the gates and steps every send; the bench finds each step it stored.

    The bench looks for each step's stored event by its topic: a topic that
    no longer matches what the engine stores (its stored format) fails the
    check instead of a timing.
    """
    backend = fleet.sqlite_backend(str(tmp_path))
    result = fleet.measure_latency(backend, str(tmp_path), sends=3, poll_interval=0.1)
    assert result.wake == "data_version, poll 0.1 s"
    assert len(result.send) == len(result.stepped) == len(result.seen) == 3
    assert all(0.0 < stepped <= seen for stepped, seen in zip(result.stepped, result.seen, strict=True))
