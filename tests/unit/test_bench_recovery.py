"""``bench.recovery``: its smallest runs on SQLite, whose checks hold what a recovery and a plan must do."""

from __future__ import annotations

from pathlib import Path

from bench import recovery


def test_every_recovery_writes_one_claim_per_instance_and_nothing_else(tmp_path: Path) -> None:
    """Each round's fresh engine acquires every instance and claims each once; the check holds it."""
    [result] = recovery.measure_trees(recovery.sqlite_backend(str(tmp_path)), [3], rounds=2).values()
    assert result.built.instances == 12 and len(result.recoveries) == 2


def test_the_plain_history_folds_every_event_and_the_other_a_short_tail(tmp_path: Path) -> None:
    """Without snapshots the plan reads the whole history; with an interval, the tail after a snapshot.

    The plain history is longer than the engine's default spacing of
    snapshots (1,000 events), so a plain variant left to the default would
    read a tail too.
    """
    results = recovery.measure_plans(recovery.sqlite_backend(str(tmp_path)), 1_200, repeats=1, interval=10)
    plain = [r for r in results if r.variant == recovery.PLAIN]
    assert [(r.events, r.tail) for r in plain] == [(300, 300), (600, 600), (1_200, 1_200)]
    snapshots = [r for r in results if r.variant != recovery.PLAIN and not r.longest_tail]
    assert all(r.tail < 10 for r in snapshots)
