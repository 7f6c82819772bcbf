"""``bench.liveness``: its options, its verdicts, and its smallest memory and timers runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import liveness


def test_quick_and_full_sizes_fill_the_unset_options() -> None:
    """Unset options take the full sizes, or the quick ones with ``--quick``; a given option wins."""
    full = liveness.parse([])
    assert (full.instances, full.rounds, full.timers, full.trees, full.roots) == (100_000, 3, 20, 50, 30)
    assert full.store == "sqlite" and full.section == "all" and full.cache_size is None
    quick = liveness.parse(["--quick", "--instances", "300"])
    assert (quick.instances, quick.rounds, quick.trees) == (300, 1, 5)


@pytest.mark.parametrize(
    "argv",
    [["--rounds", "0"], ["--instances", "5"], ["--budget", "0"], ["--section", "nope"], ["--store", "x"]],
)
def test_invalid_options_exit_2(argv: list[str]) -> None:
    """An option out of range or an unknown choice is a usage error."""
    with pytest.raises(SystemExit) as raised:
        liveness.parse(argv)
    assert raised.value.code == 2


def test_checkpoints_are_fractions_of_the_instances() -> None:
    """The memory worker reports at a tenth, a quarter, half, three quarters and all of the instances."""
    assert liveness.checkpoints(100_000) == [10_000, 25_000, 50_000, 75_000, 100_000]


def point(instances: int, rss_kib: int) -> liveness.MemoryPoint:
    return liveness.MemoryPoint(instances, instances, rss_kib, rss_kib, 0, 0, 0, 0, 0.0)


def test_verdicts_compare_each_section_with_its_target() -> None:
    """Memory growth, timer lateness, handover time and the spread each pass or miss against their target."""
    flat = liveness.Memory((point(0, 900), point(10, 1_000), point(100, 1_090)), 100, None, False)
    assert liveness.memory_target(flat).verdict == "pass"
    grown = liveness.Memory((point(0, 900), point(10, 1_000), point(100, 1_200)), 100, None, False)
    assert (
        liveness.memory_target(grown).verdict == "miss" and liveness.memory_target(grown).measured == "+20.0%"
    )
    timers = liveness.Timers({"blocked": (0.01, 0.6), "no tasks": (0.0,)}, 1)
    assert liveness.timers_target(timers).verdict == "miss"
    handover = liveness.Handover(5, 5.0, 30.0, (1.0,) * 3, (0.5,) * 3, (0.5,) * 3, (3.0, 6.9, 4.0))
    assert liveness.handover_target(handover).verdict == "pass"
    moved = liveness.SpreadRound((10, 6, 14), 1.0, 0, (0, 10), 7.0)
    placed, recovered = liveness.spread_targets(liveness.Spread(30, (moved,)))
    assert placed.verdict == "pass" and placed.measured == "6-14"
    assert recovered.measured == "0/10" and recovered.verdict == "-"
    lopsided = liveness.SpreadRound((15, 5, 10), 1.0, 0, (5, 5), 7.0)
    assert liveness.spread_targets(liveness.Spread(30, (lopsided,)))[0].verdict == "miss"


def test_the_smallest_memory_and_timers_runs_report(tmp_path: Path) -> None:
    """A worker process finishes a few hundred instances and reports at every checkpoint; timers fire."""
    backend = liveness.sqlite_backend(str(tmp_path))
    memory = liveness.measure_memory(backend, str(tmp_path), 200, 60.0, None)
    assert [p.instances for p in memory.points] == [0, 20, 50, 100, 150, 200]
    assert all(p.rss_kib > 0 and p.held == 0 for p in memory.points)
    assert len(list(liveness.memory_rows(memory))) == len(memory.points)
    timers = liveness.measure_timers(backend, timers=2, rounds=1)
    assert {variant: len(values) for variant, values in timers.lateness.items()} == {
        "blocked": 2,
        "no tasks": 2,
    }
    assert all(value >= 0 for values in timers.lateness.values() for value in values)
