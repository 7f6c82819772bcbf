"""``incarnate console`` without the web libraries: listed by the CLI, and refusing with the install hint."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.console.charts import make_store

# Blocks the console extra's libraries in a fresh interpreter, then runs the CLI.
WITHOUT_EXTRA = """
import sys
for name in ("uvicorn", "starlette", "jinja2"):
    sys.modules[name] = None  # an import of it now raises ImportError
from incarnate.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRA, *argv], capture_output=True, text=True, timeout=60, check=False
    )


def test_help_lists_the_console_without_its_extra() -> None:
    """The command tree (and so the generated reference) holds ``console`` whichever extras are installed."""
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    assert "console" in result.stdout


def test_serving_without_the_extra_names_the_install(tmp_path: Path) -> None:
    """Serving without the web libraries exits 2 with one line naming ``incarnate[console]``."""
    store = make_store(tmp_path / "store.db")
    result = _run("console", "--db", str(store.path), "--port", "0")
    assert result.returncode == 2
    assert "pip install 'incarnate[console]'" in result.stderr
    assert "Traceback" not in result.stderr
