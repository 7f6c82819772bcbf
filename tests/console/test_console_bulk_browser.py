"""A bulk action in a real headless Chromium (Debian's, via Playwright): filter, dry run, type, act.

The console runs in its own process over a store named ``console.db`` in its
working directory (so a screenshot shows no path of the machine).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.console.charts import make_store
from tests.console.test_console_browser import CHROMIUM, TOKEN, _shoot, browser_kit, serve_console

pytestmark = pytest.mark.slow


def test_an_operator_cancels_every_waiting_gate_in_one_bulk_action(tmp_path: Path) -> None:
    """The list filtered by chart offers the bulk form; its dry run counts; the typed words act."""
    expect, sync_playwright = browser_kit()
    directory = tmp_path / "store"
    directory.mkdir()
    store = make_store(directory / "console.db")
    with (
        serve_console("console.db", directory, "tests.console.charts:CHARTS") as base,
        sync_playwright() as playwright,
    ):
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(15_000)
            page.goto(f"{base}/?token={TOKEN}")
            page.goto(f"{base}/?chart=gate")
            page.click("#bulk summary")
            form = page.locator("#bulk form")
            form.locator("select[name=action]").select_option("cancel")
            form.locator("input[name=reason]").fill("release freeze")
            form.locator("button[type=submit]").click()

            expect(page.locator("h1")).to_have_text("Bulk cancel: dry run")
            expect(page.locator("#selected")).to_have_text("3")  # the waiting, the approved, the cancelled
            expect(page.locator("#targets")).to_have_text("1")
            expect(page.locator("table.reasons")).to_contain_text("finished (done)")
            expect(page.locator("table.targets tbody tr")).to_have_count(1)
            confirm = page.locator("#bulk-confirm")
            confirm.locator("input[name=confirm]").fill("cancel 2")
            confirm.locator("button[type=submit]").click()  # the browser refuses: the pattern does not match
            expect(page.locator("h1")).to_have_text("Bulk cancel: dry run")
            confirm.locator("input[name=confirm]").fill("cancel 1")
            _shoot(page, tmp_path, "bulk")
            confirm.locator("button[type=submit]").click()

            expect(page.locator("p.flash.ok")).to_have_text("bulk cancel: asked to cancel 1 of 1 instance(s)")
            page.goto(f"{base}/instances/{store.gate}")
            expect(page.locator("body")).to_contain_text("release freeze")
        finally:
            browser.close()
