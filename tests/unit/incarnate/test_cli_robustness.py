"""The command line never prints a Python traceback: every command of the group, run as a process,
against corrupted stores, with its standard output closed early, and with malformed arguments.

The cases run in one driver process that imports the command line once and forks a process per
case; each forked process runs ``sys.exit(main())`` exactly as the installed ``incarnate`` script
does, exits through the interpreter (its last flush of standard output included), and leaves its
exit status and standard error for the test to read. A few cases also run through the installed
script itself and through ``python -m incarnate``.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import attrs
import click
import pytest

from incarnate import Engine, Storage
from incarnate.cli import root
from incarnate.cli._common import BROKEN_PIPE, BUG, OPERATION_FAILED, USAGE_ERROR
from tests.scenarios import charts

ROOT = Path(__file__).resolve().parents[3]
CHARTS = "tests.scenarios.charts:ALL"
TASKS = "tests.unit.incarnate.sample_charts:TASKS"
CHART = "tests.unit.incarnate.sample_charts:ORDER"
BAD_JSON = ("NaN", "1" * 5000, "[" * 5000 + "]" * 5000)
"""Values a JSON option refuses (every refusal is checked in-process in test_cli_ops.py)."""

DRIVER = r"""
import json, os, signal, sys

# Import once what every case imports, as a warm interpreter would have it.
import eventsourcing.sqlite, tests.scenarios.charts, tests.unit.incarnate.sample_charts
from incarnate.cli import main

cases = json.loads(sys.stdin.read())
statuses = [None] * len(cases)
running = {}
case = None


def reap():
    pid, wait_status = os.wait()
    statuses[running.pop(pid)] = os.waitstatus_to_exitcode(wait_status)


for index, candidate in enumerate(cases):
    while len(running) >= 2:  # two cases at a time
        reap()
    pid = os.fork()
    if pid == 0:
        case = candidate
        break
    running[pid] = index
if case is None:
    while running:
        reap()
    print(json.dumps(statuses))
    raise SystemExit(0)

# One case: become the console script `incarnate ARGV` with the case's standard streams.
signal.alarm(60)
os.chdir(case["cwd"])
err = os.open(case["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
os.dup2(err, 2)
os.close(err)
if case["stdout"] == "file":
    out = os.open(case["stderr"] + ".out", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
else:
    read, out = os.pipe()
    if case["stdout"] == "first-byte" and os.fork() == 0:
        os.close(out)
        os.read(read, 1)  # a reader that closes the pipe after the first byte, like `head -c1`
        os._exit(0)
    os.close(read)  # "closed": nobody reads at all
os.dup2(out, 1)
os.close(out)
sys.argv = ["incarnate", *case["argv"]]
sys.exit(main())  # what the installed script does; the interpreter then exits as it would
"""


@attrs.frozen
class Case:
    """One run of the command line: its arguments, where its standard output goes, what it may exit with."""

    argv: tuple[str, ...]
    statuses: frozenset[int]
    stdout: str = "file"


@attrs.frozen
class Result:
    """What one case left behind."""

    case: Case
    status: int
    stderr: str


@attrs.frozen
class Stores:
    """A healthy store and its corrupted variants, built once for the module."""

    folder: Path
    healthy: Path
    parent: UUID

    def fresh(self, name: str) -> Path:
        """A copy of the healthy store the case may change."""
        copy = self.folder / f"{name}.db"
        shutil.copyfile(self.healthy, copy)
        return copy


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    """A SQLite store holding a ``parent`` with a running ``kid`` and a finished ``charging``."""
    folder = tmp_path_factory.mktemp("robustness")
    path = folder / "healthy.db"
    engine = Engine(charts.ALL, {"charge": lambda call: "ok"}, storage=Storage.sqlite(str(path)))
    try:
        parent = engine.start("parent", {"members": ["a"]})
        engine.start("charging")
        engine.run_until_idle()
        engine.listing.catch_up()
    finally:
        engine.close()
    return Stores(folder, path, parent)


def run_cases(cases: list[Case], folder: Path) -> Iterator[Result]:
    """Run every case in its own forked process of one driver; yield each status and standard error."""
    errors = [folder / f"case-{n}.err" for n in range(len(cases))]
    specs = [
        {"argv": list(case.argv), "stdout": case.stdout, "stderr": str(error), "cwd": str(folder)}
        for case, error in zip(cases, errors, strict=True)
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("INCARNATE_DEBUG", None)
    done = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(specs),
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        check=False,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    statuses = json.loads(done.stdout)
    for case, error, status in zip(cases, errors, statuses, strict=True):
        yield Result(case, status, error.read_text(encoding="utf-8", errors="replace"))


def check(results: Iterator[Result]) -> None:
    """No case printed a traceback or exited otherwise than expected; errors are ``incarnate CMD: error:``."""
    failures = []
    for result in results:
        wrong = []
        if "Traceback" in result.stderr:
            wrong.append("a traceback")
        if result.status not in result.case.statuses:
            wrong.append(f"status {result.status}, not one of {sorted(result.case.statuses)}")
        if result.status in (OPERATION_FAILED, USAGE_ERROR):
            command = result.case.argv[0]
            if f"incarnate {command}: error: " not in result.stderr:
                wrong.append("no 'incarnate COMMAND: error:' line")
        if wrong:
            argv = [
                value if len(value) <= 80 else f"{value[:60]}... ({len(value)} characters)"
                for value in result.case.argv
            ]
            failures.append(f"{argv} ({result.case.stdout}): {', '.join(wrong)}\n{result.stderr[-2000:]}")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------- the commands' arguments


SERVING = ("worker", "console", "ingress")
"""Commands that serve until signalled: tests/integration (test_worker, test_ingress_cli) run them."""


def _command(name: str) -> click.Command:
    return root.commands[name]


def _options(name: str) -> dict[str, click.Option]:
    return {
        option: param
        for param in _command(name).params
        if isinstance(param, click.Option)
        for option in param.opts
    }


def arguments(name: str, db: str, instance: UUID) -> list[str]:
    """A well-formed command line for ``name``, read from its own parameters (so new commands are covered)."""
    values = {
        "ID": str(instance),
        "[ID]": str(instance),
        "EVENT": "regroup",
        "CHART": CHART,
        "CHARTS": CHARTS,
    }
    argv = [name]
    for param in _command(name).params:
        if isinstance(param, click.Argument):
            argv.append(values.get(str(param.metavar), "x"))
        elif param.required and isinstance(param, click.Option) and param.opts[0] not in ("--charts",):
            argv.extend([param.opts[0], "2" if isinstance(param.type, click.types.IntParamType) else "a=b"])
    options = _options(name)
    extra = {"--db": db, "--charts": CHARTS, "--tasks": TASKS, "--timeout": "2", "--wait": "0"}
    for option, value in extra.items():
        if option in options:
            argv.extend([option, value])
    return argv


def store_commands() -> list[str]:
    """The commands that open a store (they take ``--db``)."""
    return [name for name in root.commands if "--db" in _options(name)]


def test_every_command_is_exercised() -> None:
    """Each command of the group gets a command line from its own parameters that it accepts."""
    for name, command in root.commands.items():
        argv = arguments(name, "store.db", UUID(int=1))
        assert argv[0] == name
        assert command.make_context(name, argv[1:]).command is command


# --------------------------------------------------------------------- the cases


@pytest.mark.slow
def test_no_command_prints_a_traceback(stores: Stores, tmp_path: Path) -> None:
    """Against corrupted stores, closed outputs and malformed arguments, every command exits with
    its documented status and never prints a traceback."""
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(bytes(range(256)) * 64)
    folder = tmp_path / "a-directory.db"
    folder.mkdir()
    broken = stores.fresh("broken-record")
    with sqlite3.connect(broken) as connection:
        changed = connection.execute(
            "UPDATE stored_events SET state = ? WHERE originator_id = ? AND originator_version = 2",
            (b"{not json", stores.parent.hex),
        ).rowcount
    connection.close()
    assert changed == 1

    cases: list[Case] = []
    # 3: recover left timers pending; 4: recover left parked roots
    documented = frozenset({0, OPERATION_FAILED, USAGE_ERROR, 3, 4})
    for name in root.commands:
        if name in SERVING:
            continue
        opens_a_store = name in store_commands()
        # (a) a corrupted store: garbage bytes, a path that is a directory, a record that is not JSON
        for bad in (garbage, folder):
            expected = frozenset({USAGE_ERROR}) if opens_a_store else frozenset({0})
            cases.append(Case(tuple(arguments(name, str(bad), stores.parent)), expected))
        record = frozenset({USAGE_ERROR}) if name == "demo" else documented
        cases.append(Case(tuple(arguments(name, str(broken), stores.parent)), record))
        # (b) standard output closed before the command writes, or after the first byte
        healthy = stores.fresh(f"closed-{name}")
        closed = frozenset({BROKEN_PIPE, OPERATION_FAILED, USAGE_ERROR})
        cases.append(Case(tuple(arguments(name, str(healthy), stores.parent)), closed, stdout="closed"))
        # (c) malformed arguments: an unknown option, a bad id, bad numbers and bad JSON
        cases.append(Case((name, "--no-such-option"), frozenset({USAGE_ERROR})))
        well_formed = arguments(name, str(stores.healthy), stores.parent)
        if str(stores.parent) in well_formed:
            bad_id = [value if value != str(stores.parent) else "not-an-id" for value in well_formed]
            cases.append(Case(tuple(bad_id), frozenset({USAGE_ERROR})))
        for option, action in _options(name).items():
            if not option.startswith("--"):
                continue
            if isinstance(action.type, click.types.IntParamType | click.types.FloatParamType):
                cases.append(Case((*well_formed, option, "abc"), frozenset({USAGE_ERROR})))
            if action.metavar == "JSON":
                cases.extend(
                    Case((*well_formed, f"{option}={text}"), frozenset({USAGE_ERROR})) for text in BAD_JSON
                )
    for name in ("list", "timeline", "diagram"):
        healthy = stores.fresh(f"first-byte-{name}")
        read_one = frozenset({0, BROKEN_PIPE})
        cases.append(Case(tuple(arguments(name, str(healthy), stores.parent)), read_one, stdout="first-byte"))

    results = list(run_cases(cases, tmp_path))
    check(iter(results))
    by_case = {(r.case.argv, r.case.stdout): r for r in results}
    for name in ("list", "timeline", "diagram"):
        [closed_run] = [r for (argv, out), r in by_case.items() if argv[0] == name and out == "closed"]
        assert closed_run.status == BROKEN_PIPE, closed_run
        assert closed_run.stderr == ""
    assert all(r.status != BUG for r in results)
    assert garbage.read_bytes() == bytes(range(256)) * 64, "the demo or a command changed a foreign file"


@pytest.mark.slow
def test_the_installed_entry_points_have_the_same_guard(stores: Stores, tmp_path: Path) -> None:
    """The console script and ``python -m incarnate`` exit 2 on NaN data and 141 on a closed output."""
    script = Path(sys.executable).parent / "incarnate"
    entry_points = [[str(script)]] if script.exists() else []
    entry_points.append([sys.executable, "-m", "incarnate"])
    healthy = stores.fresh("entry-points")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for entry in entry_points:
        nan = subprocess.run(
            [*entry, "send", str(stores.parent), "finish", "--data", "NaN", "--db", str(healthy)],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=env,
            check=False,
            timeout=120,
        )
        assert nan.returncode == USAGE_ERROR
        assert nan.stderr.splitlines() == [
            "incarnate send: error: --data 'NaN' is not accepted: NaN is not a JSON value (JSON has no NaN "
            "or Infinity); send null, a finite number or a string"
        ]
        read, write = os.pipe()
        os.close(read)
        try:
            closed = subprocess.run(
                [*entry, "timeline", str(stores.parent), "--db", str(healthy)],
                stdout=write,
                stderr=subprocess.PIPE,
                text=True,
                cwd=tmp_path,
                env=env,
                check=False,
                timeout=120,
            )
        finally:
            os.close(write)
        assert (closed.returncode, closed.stderr) == (BROKEN_PIPE, "")
