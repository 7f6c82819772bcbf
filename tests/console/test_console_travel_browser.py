"""Time travel in a real headless Chromium: from the instance page, step back and forth through an order.

The console runs in its own process from the test's directory over a store
named ``orders.db``, so the page (and the screenshot the how-to shows,
``docs/images/console-time-travel.png`` with ``INCARNATE_UPDATE_SCREENSHOTS=1``)
shows nothing of the machine.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

from tests.console.charts import make_store
from tests.console.test_console_browser import CHARTS, CHROMIUM, TOKEN, _shoot, browser_kit, serve_console

pytestmark = pytest.mark.slow


def _console(directory: Path, db: str) -> contextlib.AbstractContextManager[str]:
    """``incarnate console --db DB`` started in ``directory``; yields its address."""
    return serve_console(db, directory, CHARTS)


def test_operator_steps_through_an_order_s_history(tmp_path: Path) -> None:
    """In Chromium an operator opens time travel, steps back and forth, and sees the configuration change."""
    expect, sync_playwright = browser_kit()
    store = make_store(tmp_path / "orders.db")
    with _console(tmp_path, "orders.db") as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(15_000)
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.goto(f"{base}/instances/{store.order}?token={TOKEN}")
            page.click("#time-travel")
            expect(page.locator("#position")).to_contain_text("version")
            expect(page.locator("#next")).to_have_count(0)  # the time-travel link opens at now

            page.click("#first")
            expect(page.locator("#position")).to_have_text(f"version 1 of {_last(page)}")
            expect(page.locator("#configuration")).to_have_text("-")
            expect(page.locator("svg.diagram g.active")).to_have_count(0)

            page.click("#next")
            expect(page.locator("#position")).to_contain_text("version 2 of")
            expect(page.locator("svg.diagram g.active[data-state=packing]")).to_have_count(1)
            for _ in range(4):
                page.click("#next")
            expect(page.locator("#position")).to_contain_text("version 6 of")
            page.click("#previous")
            expect(page.locator("#position")).to_contain_text("version 5 of")
            expect(page.locator("p.event")).to_contain_text("v5")
            _shoot(page, tmp_path, "time-travel")

            page.click("text=its call tree")
            expect(page.locator("#position")).to_contain_text("position 1 of")
            page.click("#last")
            expect(page.locator("h2", has_text="The call tree then")).to_contain_text("(6)")
            assert problems == [], problems
        finally:
            browser.close()


def _last(page: object) -> str:
    """The last version, as the position bar names it."""
    text: str = page.locator("#position").inner_text()  # type: ignore[attr-defined]
    return text.rsplit(" ", 1)[-1]
