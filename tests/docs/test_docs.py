"""Every Python block in the docs and the README runs, in order, one namespace per page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)
PYTEST_MARK = "<!-- docs: pytest -->"
"""A page carrying this mark is also run as one pytest module: its ``test_*`` functions are tests."""
PYTEST_PAGES = [p for p in PAGES if PYTEST_MARK in p.read_text()]

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_code_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's Python blocks run without error, in a scratch directory."""
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for number, block in enumerate(BLOCK.findall(page.read_text())):
        code = compile(block, f"{page.name} block {number + 1}", "exec")
        exec(code, namespace)


@pytest.mark.parametrize("page", PYTEST_PAGES, ids=[str(p.relative_to(ROOT)) for p in PYTEST_PAGES])
def test_page_tests_pass_under_pytest(page: Path, pytester: pytest.Pytester) -> None:
    """A page marked as a pytest module passes under pytest, with incarnate's plugin, and has tests."""
    source = "\n\n".join(BLOCK.findall(page.read_text()))
    pytester.makepyfile(**{f"test_{page.stem.replace('-', '_')}": source})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.parseoutcomes().get("passed", 0) >= 1, result.stdout.str()
    result.assert_outcomes(passed=result.parseoutcomes()["passed"])
