"""The pure parts of ``bench.peers``: its options and its tables (no DBOS launch, no database)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="bench.peers compares with DBOS Transact: pip install -e '.[bench]'")

from bench import _common as common
from bench import peers

ROOT = Path(__file__).resolve().parents[2]


def test_quick_and_full_sizes_fill_the_unset_options() -> None:
    full = peers.parse([])
    assert (full.rounds, full.serial, full.batches, full.pending) == (3, 200, 5, 1_000)
    assert full.workload == list(peers.WORKLOADS) and full.store == "all"
    quick = peers.parse(["--quick", "--pending", "50"])
    assert (quick.rounds, quick.serial, quick.batches, quick.pending) == (1, 20, 1, 50)


def test_embedded_tasks_are_asked_for_and_told_to_each_child_process() -> None:
    assert peers.parse([]).embed_tasks is True and peers.parse(["--no-embed-tasks"]).embed_tasks is False
    place = peers.Place("sqlite", "sqlite:///x.db")
    try:
        peers.EMBED_TASKS[0] = False
        assert peers.spec_for("serial", "incarnate", place, count=1)["embed_tasks"] is False
    finally:
        peers.EMBED_TASKS[0] = True
    assert peers.spec_for("serial", "incarnate", place, count=1)["embed_tasks"] is True


def test_workloads_are_a_comma_separated_list_kept_in_bench_order() -> None:
    assert peers.workloads("recovery, serial") == ["serial", "recovery"]
    assert peers.workloads("all") == list(peers.WORKLOADS)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown workload"):
        peers.workloads("serial,latency")


@pytest.mark.parametrize("argv", [["--rounds", "0"], ["--seconds", "0"], ["--workload", "nope"]])
def test_invalid_options_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        peers.parse(argv)
    assert raised.value.code == 2


def test_missing_dbos_exits_2_with_the_install_hint(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(peers, "dbos_available", lambda: False)
    assert peers.main(["--workload", "serial"]) == 2
    assert "pip install -e '.[bench]'" in capsys.readouterr().err


def test_shares_split_the_counters_between_processes() -> None:
    assert peers.shares(100, 2) == [50, 50]
    assert peers.shares(7, 3) == [3, 2, 2]


def rate_runs(*rates: float, cpu: float = 1.0, server: float | None = None) -> list[peers.Run]:
    return [peers.Run(rate, cpu, server) for rate in rates]


def test_rate_and_ratio_rows() -> None:
    rates = {
        "incarnate": rate_runs(100.0, 120.0, 110.0, cpu=2.0, server=0.5),
        "dbos": rate_runs(50.0, 60.0, 55.0, cpu=9.0, server=3.5),
    }
    rows = list(peers.rate_rows(200)(rates))
    assert rows[0].split() == ["incarnate", "200", "110.0", "9.09", "100.0", "120.0", "18%", "2.00", "0.50"]
    assert rows[1].split()[:4] == ["dbos", "200", "55.0", "18.18"]
    assert rows[1].split()[-2:] == ["9.00", "3.50"]
    ratio, cpu = peers.rate_ratio_rows("serial")(("postgres", rates))
    assert "2.00x" in ratio and ">= 2x" in ratio and ratio.rstrip().endswith(" met")
    assert cpu.startswith("DBOS / incarnate, CPU per wf (+server)")
    assert cpu.split()[-4:] == ["5.00x", "5.00-5.00x", "-", "-"]  # (9 + 3.5) / (2 + 0.5), no target
    (ratio, _) = peers.rate_ratio_rows("serial")(("sqlite", rates))
    assert ">= 3x" in ratio and ratio.rstrip().endswith("not met")
    (ratio, _) = peers.rate_ratio_rows("inflight")(("postgres", rates))
    assert ">= 5x" in ratio and ratio.rstrip().endswith("not met")


def test_without_a_server_reading_the_cpu_is_the_process_alone() -> None:
    rates = {"incarnate": rate_runs(10.0, cpu=2.0), "dbos": rate_runs(5.0, cpu=7.0)}
    incarnate, _ = peers.rate_rows(10)(rates)
    assert incarnate.split()[-2:] == ["2.00", "-"]
    _, cpu = peers.rate_ratio_rows("serial")(("sqlite", rates))
    assert "(+server)" not in cpu and "3.50x" in cpu


def test_the_meter_sums_its_spans_wall_time_and_process_cpu() -> None:
    meter = peers.Meter(peers.Place("sqlite", "sqlite:///unused.db"))
    for _ in range(2):
        with meter.span():
            deadline = time.process_time() + 0.02
            while time.process_time() < deadline:  # bounded: 20 ms of CPU
                pass
    said = meter.said(4)
    assert said["count"] == 4 and said["server"] is None
    assert said["cpu"] >= 0.04 and said["seconds"] >= 0.04
    assert peers.Meter(peers.Place("postgres", "postgresql://unused")).said(1)["server"] == 0.0


def test_recovery_ratios_put_dbos_over_incarnate() -> None:
    def recovery(first: float, last: float) -> peers.Recovery:
        return peers.Recovery(pending=1_000, build=1.0, ready=0.5, first=first, last=last)

    result = {
        "incarnate": [recovery(0.2, 2.0), recovery(0.3, 2.5)],
        "dbos": [recovery(1.2, 12.0), recovery(1.5, 15.0)],
    }
    rows = list(peers.recovery_rows(result))
    assert rows[0].split()[:2] == ["incarnate", "1,000"]
    total, first = peers.recovery_ratio_rows(result)
    assert "6.00x" in total and total.endswith("met") and ">= 5x" in total
    assert "5.40x" in first and ">= 2x" in first
    assert rows[0].split()[-2:] == ["-", "-"]  # no CPU reading, no CPU ratio


def test_recovery_rows_show_the_cpu_per_recovered_workflow_and_its_ratio() -> None:
    def recovery(cpu: float, server: float | None) -> peers.Recovery:
        return peers.Recovery(1_000, 1.0, 0.5, 0.2, 2.0, cpu=cpu, server=server)

    result = {"incarnate": [recovery(1.5, 0.5), recovery(2.5, 0.5)], "dbos": [recovery(12.0, 4.0)] * 2}
    ours, theirs = peers.recovery_rows(result)
    assert ours.split()[-2:] == ["2.00", "0.50"] and theirs.split()[-2:] == ["12.00", "4.00"]
    *_, cpu = peers.recovery_ratio_rows(result)
    assert cpu.split()[:8] == ["DBOS", "/", "incarnate,", "CPU", "per", "wf", "(+server)", "6.40x"]
    result["dbos"] = [recovery(12.0, None)] * 2  # a server not seen: the processes alone
    *_, cpu = peers.recovery_ratio_rows(result)
    assert "(+server)" not in cpu and "6.00x" in cpu


def test_process_cpu_is_read_from_proc() -> None:
    if not Path(f"/proc/{os.getpid()}/stat").exists():
        pytest.skip("no /proc on this system")
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:  # bounded: 50 ms of CPU
        pass
    used = common.process_cpu(os.getpid())
    assert used is not None and used >= 0.03  # clock ticks are coarse
    assert common.process_cpu(2**22 + 1) is None  # above Linux's largest pid


def test_throughput_rows_hold_the_absolute_target_and_the_scaling() -> None:
    def runs(*rates: float) -> list[peers.Throughput]:
        return [peers.Throughput(rate, 2 * rate, None) for rate in rates]

    measured = {1: runs(1_000.0, 1_100.0, 900.0), 2: runs(1_800.0, 1_900.0, 1_700.0)}
    one, two, together = peers.throughput_target_rows(("postgres", measured))
    assert one.split()[-2:] == ["not", "met"] and ">= 2,000" in one
    assert "1.80x" in two and two.endswith("met") and not two.endswith("not met")
    assert "1,800" in together and ">= 8,000" in together and together.endswith("not met")
    (met,) = [
        r
        for r in peers.throughput_target_rows(("postgres", {1: runs(5e3), 2: runs(8.5e3)}))
        if "2 proc" in r and "macrosteps" in r
    ]
    assert met.endswith(" met") and not met.endswith("not met")
    (only,) = peers.throughput_target_rows(("sqlite", {1: runs(3_500.0)}))
    assert only.endswith(" met") and ">= 3,000" in only


def test_throughput_rows_show_the_cores_busy_when_known() -> None:
    options = argparse.Namespace(threads=4, senders=16, instances=100)
    measured = {
        1: [
            peers.Throughput(1_000.0, 3_000.0, 1.2),
            peers.Throughput(1_100.0, 3_300.0, 1.4),
            peers.Throughput(900.0, 2_700.0, None),
        ],
        2: [peers.Throughput(1_800.0, 5_400.0, None)],
    }
    one, two = peers.throughput_rows(options)(measured)
    assert one.endswith(f"1.30 of {os.cpu_count()}")  # the median of the rounds that know it
    assert "3,000" in one.split()  # stored events per second beside the macrosteps
    assert two.split()[-1] == "-"


def test_throughput_rows_show_the_senders_each_process_ran() -> None:
    """A process runs one sender per counter of its share at most: 50 each when two share 100."""
    options = argparse.Namespace(threads=4, senders=64, instances=100)
    measured = {1: [peers.Throughput(1_000.0, 1_000.0, None)], 2: [peers.Throughput(1_800.0, 1_800.0, None)]}
    one, two = peers.throughput_rows(options)(measured)
    assert one.split()[:4] == ["1", "4", "64", "100"]
    assert two.split()[:4] == ["2", "4", "50", "100"]


def test_server_cpu_is_read_from_proc_for_processes_of_that_name() -> None:
    mine = Path(f"/proc/{os.getpid()}/stat")
    if not mine.exists():
        pytest.skip("no /proc on this system")
    name = mine.read_text().partition("(")[2].rpartition(")")[0]
    used = common.server_cpu(name)
    assert used is not None and os.getpid() in used
    assert common.server_cpu("no-such-process-name") is None
    ticks = os.sysconf("SC_CLK_TCK")
    # Growth of the processes seen twice, all of a new one; one that ended is not seen.
    assert common.cpu_seconds_between({1: 10, 2: 5}, {1: 10 + ticks, 3: 2 * ticks}) == 3.0
    assert common.cpu_seconds_between(None, {1: 1}) is None


def test_tables_print_under_their_headers(capsys: pytest.CaptureFixture[str]) -> None:
    rates = {"sqlite": {"incarnate": rate_runs(10.0), "dbos": rate_runs(5.0)}}
    common.print_table(peers.RATES_HEADER, rates, peers.rate_rows(20))
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["store", "side", "workflows"]
    assert [line.split()[:2] for line in lines[1:]] == [["sqlite", "incarnate"], ["sqlite", "dbos"]]


def test_the_cpu_latency_request_is_made_only_when_asked_and_says_why_it_cannot_be(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert not peers.parse([]).cpu_latency_zero and peers.parse(["--cpu-latency-zero"]).cpu_latency_zero
    with common.cpu_latency_zero(False) as refused:
        assert refused is None
    monkeypatch.setattr(common, "CPU_LATENCY_FILE", str(tmp_path / "absent" / "cpu_dma_latency"))
    with common.cpu_latency_zero(True) as refused:
        assert refused is not None and "cannot open" in refused and "root" in refused
    request = tmp_path / "cpu_dma_latency"
    request.write_bytes(b"")
    monkeypatch.setattr(common, "CPU_LATENCY_FILE", str(request))
    with common.cpu_latency_zero(True) as refused:
        assert refused is None
        assert request.read_bytes() == (0).to_bytes(4, sys.byteorder)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pinning a process to a CPU is Linux's")
def test_pinned_children_take_the_cpus_in_turn_and_pin_themselves_before_any_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not peers.parse([]).pin_cpus and peers.parse(["--pin-cpus"]).pin_cpus
    assert peers.next_cpu() is None  # not asked: no child is pinned
    cpus = sorted(os.sched_getaffinity(0))
    monkeypatch.setattr(peers, "PINNED_CPUS", cpus)
    turns = [cpu for _ in range(2 * len(cpus)) if (cpu := peers.next_cpu()) is not None]
    assert sorted(turns) == sorted(cpus * 2)  # every CPU twice: children started together get different ones
    assert all(turns[n] != turns[n + 1] for n in range(len(turns) - 1)) or len(cpus) == 1
    code = (
        "import os, threading; from bench import peers; "
        f"peers.pin({cpus[-1]}); "
        "t = threading.Thread(target=lambda: print(sorted(os.sched_getaffinity(0)))); t.start(); t.join()"
    )
    shown = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    assert shown.stdout.strip() == f"[{cpus[-1]}]"  # a thread started afterwards runs on that CPU alone
