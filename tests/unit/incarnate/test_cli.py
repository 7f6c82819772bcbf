"""The ``incarnate`` command line: ``incarnate diagram CHART`` and its error messages."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from incarnate.cli import main, root
from statechart.diagram import to_dot, to_mermaid
from tests.unit.incarnate import sample_charts

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = "tests.unit.incarnate.sample_charts"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``incarnate`` in-process; return the exit status, standard output and standard error."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_diagram_prints_mermaid_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    """``incarnate diagram module:CHART`` prints the chart's Mermaid diagram and exits 0."""
    status, out, err = run(capsys, "diagram", f"{SAMPLE}:ORDER")
    assert (status, err) == (0, "")
    assert out == to_mermaid(sample_charts.ORDER)
    assert "stateDiagram-v2" in out


def test_diagram_prints_dot(capsys: pytest.CaptureFixture[str]) -> None:
    """``--format dot`` prints the Graphviz DOT text instead."""
    status, out, err = run(capsys, "diagram", f"{SAMPLE}:ORDER", "--format", "dot")
    assert (status, err) == (0, "")
    assert out == to_dot(sample_charts.ORDER)
    assert out.startswith('digraph "order" {')


def test_diagram_accepts_a_function_returning_a_chart(capsys: pytest.CaptureFixture[str]) -> None:
    """A zero-argument function is called and its chart drawn."""
    status, out, _ = run(capsys, "diagram", f"{SAMPLE}:order", "-f", "mermaid")
    assert status == 0
    assert out == to_mermaid(sample_charts.ORDER)


def test_diagram_writes_the_output_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``--output FILE`` writes the diagram to the file and prints nothing."""
    target = tmp_path / "order.dot"
    status, out, err = run(capsys, "diagram", f"{SAMPLE}:ORDER", "--format", "dot", "--output", str(target))
    assert (status, out, err) == (0, "", "")
    assert target.read_text(encoding="utf-8") == to_dot(sample_charts.ORDER)


@pytest.mark.parametrize(
    ("chart", "expected"),
    [
        (SAMPLE, "is not an import path; write CHART as 'package.module:attribute'"),
        (f"{SAMPLE}:", "is not an import path"),
        (":ORDER", "is not an import path"),
        (f"{SAMPLE}:ORDER:again", "is not an import path"),
        (
            "tests.unit.incarnate.no_such_module:ORDER",
            "module 'tests.unit.incarnate.no_such_module' not found",
        ),
        ("no_such_package.charts:ORDER", "module 'no_such_package.charts' not found"),
        (f"{SAMPLE}:MISSING", f"module '{SAMPLE}' has no attribute 'MISSING'; charts it defines: ORDER"),
        (f"{SAMPLE}:ORDER.missing", "has no attribute 'ORDER.missing'"),
        (f"{SAMPLE}:NOT_A_CHART", "is of type int, not a Chart; name a Chart or a function"),
        (f"{SAMPLE}:order_named", "cannot be called without arguments"),
        (f"{SAMPLE}:not_a_chart", "returned a value of type str, not a Chart"),
    ],
)
def test_diagram_rejects_a_bad_chart_path(
    capsys: pytest.CaptureFixture[str], chart: str, expected: str
) -> None:
    """A chart path that does not lead to a chart exits 2 with a message saying what is wrong."""
    status, out, err = run(capsys, "diagram", chart)
    assert (status, out) == (2, "")
    assert err.startswith("incarnate diagram: error: ")
    assert expected in err


def test_diagram_lists_every_problem_of_an_invalid_chart(capsys: pytest.CaptureFixture[str]) -> None:
    """A chart that fails validation exits 2 and prints each definition problem on its own line."""
    status, out, err = run(capsys, "diagram", f"{SAMPLE}:broken")
    assert (status, out) == (2, "")
    lines = err.splitlines()
    header = f"calling '{SAMPLE}:broken' failed: chart 'broken' has 2 definition problem(s):"
    assert lines[0] == f"incarnate diagram: error: {header}"
    assert lines[1].startswith("  - chart 'broken', state 'a': the id is used by more than one state")
    assert lines[2].startswith("  - chart 'broken', transition #0 (on go) of state 'a': target 'nowhere'")
    assert len(lines) == 3


def test_diagram_reports_a_chart_invalid_at_import(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A module whose chart fails validation while it is imported exits 2 listing the problems."""
    (tmp_path / "invalid_at_import.py").write_text(
        "from statechart import Chart, state, transition\n"
        "BAD = Chart('bad', state('a', on=[transition('go', 'nowhere')]))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    status, _, err = run(capsys, "diagram", "invalid_at_import:BAD")
    assert status == 2
    assert "importing module 'invalid_at_import' failed: chart 'bad' has 1 definition problem(s):" in err
    assert "\n  - chart 'bad', transition #0 (on go) of state 'a': target 'nowhere' does not exist" in err


def test_diagram_reports_a_missing_dependency_of_the_chart_module(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chart module that imports a missing module is reported as an import failure, not as missing."""
    (tmp_path / "needs_missing.py").write_text("import no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    status, _, err = run(capsys, "diagram", "needs_missing:ORDER")
    assert status == 2
    assert "importing module 'needs_missing' failed: No module named 'no_such_dependency'" in err


def test_diagram_reports_an_unwritable_output(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """An output file that cannot be written exits 2 naming the file."""
    target = tmp_path / "missing" / "order.mmd"
    status, _, err = run(capsys, "diagram", f"{SAMPLE}:ORDER", "--output", str(target))
    assert status == 2
    assert f"cannot write the diagram to {str(target)!r}" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["diagram"],
        ["diagram", f"{SAMPLE}:ORDER", "--format", "svg"],
        ["no-such-command"],
    ],
)
def test_a_bad_command_line_exits_2_with_usage(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """A command line click rejects exits 2: the usage, then one ``incarnate COMMAND: error:`` line."""
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    usage, error = err.splitlines()
    assert usage.startswith("Usage: incarnate")
    assert error.startswith(f"incarnate{' diagram' if argv[:1] == ['diagram'] else ''}: error: ")
    assert error.endswith("--help`")


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` lists the subcommands and exits 0."""
    status, out, _ = run(capsys, "--help")
    assert status == 0
    assert "diagram" in out


def test_every_command_is_registered() -> None:
    """Each command of the group parses a well-formed command line of its own."""
    some_id = "0d3e0000-0000-4000-8000-00000000d3e0"
    arguments = {
        "diagram": [f"{SAMPLE}:ORDER"],
        "demo": ["--db", "x.db"],
        "show": [some_id],
        "tree": [some_id],
        "timeline": [some_id],
        "plan": [some_id],
        "start": ["gate"],
        "send": [some_id, "approve"],
        "cancel": [some_id],
        "check": ["tests.unit.incarnate.v2_charts:ALL"],
        "migrate": [some_id, "--map", "a=b"],
        "resolve": [some_id],
        "terminate": [some_id],
        "fork": [some_id, "--at", "2"],
        "redrive": [some_id],
        "worker": ["--charts", f"{SAMPLE}:ORDER"],
    }
    assert {"list", "show", "check", "migrate", "recover", "worker"} <= set(root.commands)
    for name, command in root.commands.items():
        context = command.make_context(name, list(arguments.get(name, [])))
        assert context.command is command


def test_version_prints_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    """``incarnate --version`` prints ``incarnate X.Y.Z`` from the installed metadata and exits 0."""
    status, out, err = run(capsys, "--version")
    assert (status, err) == (0, "")
    assert out == f"incarnate {importlib.metadata.version('incarnate')}\n"


@pytest.mark.slow
def test_python_dash_m_engine_runs_the_command_line() -> None:
    """``python -m incarnate diagram …`` runs the same command line in a fresh process."""
    result = subprocess.run(
        [sys.executable, "-m", "incarnate", "diagram", f"{SAMPLE}:ORDER", "--format", "dot"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == to_dot(sample_charts.ORDER)


# ------------------------------------------------------------ the last guard

MAKERS = (
    "from statechart.errors import StepError\n"
    "def broken():\n"
    "    raise RuntimeError('the chart maker broke\\non two lines')\n"
    "def refused():\n"
    "    raise StepError('no chart today; ask again tomorrow')\n"
    "def interrupted():\n"
    "    raise KeyboardInterrupt\n"
)


@pytest.fixture
def makers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of chart makers that raise, on the import path; its name."""
    (tmp_path / "raising_makers.py").write_text(MAKERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("INCARNATE_DEBUG", raising=False)
    return "raising_makers"


def test_an_unexpected_error_is_one_line_naming_a_bug(
    capsys: pytest.CaptureFixture[str], makers: str
) -> None:
    """An exception no command expects exits 70 with one line naming it, and no traceback."""
    status, out, err = run(capsys, "diagram", f"{makers}:broken")
    assert (status, out) == (70, "")
    assert err.splitlines() == [
        "incarnate diagram: error: unexpected RuntimeError: the chart maker broke on two lines; this is a "
        "bug in incarnate: please report it with the command line and the traceback (run it again with "
        "INCARNATE_DEBUG=1 to print it)"
    ]


def test_incarnate_debug_prints_the_traceback(
    capsys: pytest.CaptureFixture[str], makers: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With INCARNATE_DEBUG=1 the traceback precedes the one-line error."""
    monkeypatch.setenv("INCARNATE_DEBUG", "1")
    status, _, err = run(capsys, "diagram", f"{makers}:broken")
    assert status == 70
    assert err.startswith("Traceback (most recent call last):")
    assert err.splitlines()[-1].startswith("incarnate diagram: error: unexpected RuntimeError: ")
    assert err.splitlines()[-1].endswith("(printed above)")


def test_a_project_error_is_one_line_with_status_2(capsys: pytest.CaptureFixture[str], makers: str) -> None:
    """An IncarnateError no command translated exits 2 with its message on one line."""
    status, out, err = run(capsys, "diagram", f"{makers}:refused")
    assert (status, out) == (2, "")
    assert err == "incarnate diagram: error: no chart today; ask again tomorrow\n"


def test_an_interrupt_exits_130_quietly(capsys: pytest.CaptureFixture[str], makers: str) -> None:
    """Ctrl-C during a command exits 130 and prints nothing."""
    assert run(capsys, "diagram", f"{makers}:interrupted") == (130, "", "")


@pytest.mark.slow
def test_python_dash_m_incarnate_runs_the_command_line(tmp_path: Path) -> None:
    """``python -m incarnate`` runs the command line like the installed script (no import cycle)."""
    empty = tmp_path / "store.db"
    empty.write_text("")  # an empty SQLite file: a store with no tables yet
    result = subprocess.run(
        [sys.executable, "-m", "incarnate", "list", "--db", str(empty)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert "Traceback" not in result.stderr
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("no instances in flight")


EXAMPLE = ROOT / "docs" / "examples" / "scxml"


def test_diagram_draws_an_scxml_document(capsys: pytest.CaptureFixture[str]) -> None:
    """``incarnate diagram order.scxml`` loads the document and draws it."""
    status, out, err = run(capsys, "diagram", str(EXAMPLE / "order.scxml"))
    assert (status, err) == (0, "")
    assert "paying" in out and "confirming" in out


def test_an_invalid_scxml_document_is_one_line_per_problem(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A document the loader refuses exits 2 with each problem and its line."""
    bad = tmp_path / "bad.scxml"
    bad.write_text(
        '<scxml xmlns="http://www.w3.org/2005/07/scxml" datamodel="ecmascript"><state id="s"/></scxml>'
    )
    status, _, err = run(capsys, "diagram", str(bad))
    assert status == 2
    assert "datamodel='ecmascript' is not supported" in err


def test_charts_options_accept_an_scxml_document_with_the_documents_it_invokes() -> None:
    """``--charts order.scxml`` loads the order and the payment it invokes."""
    from incarnate.cli._store import load_charts

    assert [chart.name for chart in load_charts(str(EXAMPLE / "order.scxml"))] == ["order", "payment"]
