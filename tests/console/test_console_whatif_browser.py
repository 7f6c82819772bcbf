"""The what-if report and a typed confirmation in a real headless Chromium (Debian's, via Playwright).

The console runs in its own process over a store named ``console.db`` in
its working directory (so a screenshot shows no path of the machine), with
a release of the charts whose gate starts in a new state: the migration
dry run shows the recorded gate diverging at its first event. Then the
operator terminates the demo order's call tree, which asks for the id typed.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.console.charts import Store, make_store
from tests.console.test_console_browser import CHROMIUM, TOKEN, _shoot, browser_kit, serve_console

pytestmark = pytest.mark.slow

NEW_CHARTS = "tests.console.test_console_whatif:LATE_CHARTS"


def _console(store: Store, charts: str) -> contextlib.AbstractContextManager[str]:
    """``incarnate console --db console.db`` run in the store's directory; yields its address."""
    return serve_console(store.path.name, store.path.parent, charts)


def test_what_if_report_and_a_typed_confirmation(tmp_path: Path) -> None:
    """The dry run shows the gate diverging, both configurations given; Terminate wants the id typed."""
    expect, sync_playwright = browser_kit()
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
