"""The what-if report and a typed confirmation in a real headless Chromium (Debian's, via Playwright).

The console runs in its own process over a store named ``console.db`` in
its working directory (so a screenshot shows no path of the machine), with
a release of the charts whose gate starts in a new state: the migration
dry run shows the recorded gate diverging at its first event. Then the
operator terminates the demo order's call tree, which asks for the id typed.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.console.charts import Store, make_store
from tests.console.test_console_browser import (
    CHROMIUM,
    REPOSITORY,
    TOKEN,
    _free_port,
    _shoot,
    _unavailable,
    _wait_for,
)

pytestmark = pytest.mark.slow

NEW_CHARTS = "tests.console.test_console_whatif:LATE_CHARTS"


@contextlib.contextmanager
def _console(store: Store, charts: str) -> Iterator[str]:
    """``incarnate console --db console.db`` run in the store's directory; yields its address."""
    port = _free_port()
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    process = subprocess.Popen(
        [sys.executable, "-m", "incarnate", "console", "--db", store.path.name, "--port", str(port)]
        + ["--charts", charts, "--token", TOKEN],
        cwd=store.path.parent,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(base + "/", process)
        yield base
    finally:
        process.terminate()
        try:
            process.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()


def test_what_if_report_and_a_typed_confirmation(tmp_path: Path) -> None:
    """The dry run shows the gate diverging, both configurations given; Terminate wants the id typed."""
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'incarnate[test]')")
    directory = tmp_path / "store"
    directory.mkdir()
    store = make_store(directory / "console.db")
    with _console(store, NEW_CHARTS) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(15_000)
            page.goto(f"{base}/?token={TOKEN}")

            page.goto(f"{base}/charts/gate")
            expect(page.locator("svg.diagram g.transition")).to_have_count(3)
            page.click("#migrate button[type=submit]")  # the dry run, with no mapping
            row = page.locator("table.verdicts tbody tr")
            expect(row).to_have_count(1)
            expect(row.locator("td.replay-diverges")).to_have_text("diverges")
            expect(row).to_contain_text("recorded waiting, new chart screening")
            expect(page.locator("table.replay-counts")).to_contain_text("1")
            _shoot(page, tmp_path, "whatif")

            page.goto(f"{base}/instances/{store.order}")
            form = page.locator(f"form[action='/instances/{store.order}/terminate']")
            form.locator("input[name=confirm]").fill("wrong")
            form.locator("button[type=submit]").click()  # the browser refuses: the pattern does not match
            expect(page.locator("p.flash")).to_have_count(0)
            form.locator("input[name=confirm]").fill(str(store.order)[:8])
            _shoot(page, tmp_path, "terminate")
            form.locator("button[type=submit]").click()
            expect(page.locator("p.flash.ok")).to_contain_text("terminated the call tree")
        finally:
            browser.close()
