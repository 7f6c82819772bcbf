"""The console in a real headless Chromium: the real server in its own process, a real worker's recovery.

Uses Debian's ``/usr/bin/chromium`` driven by Playwright's Python package
(never a browser Playwright downloads). Skips when either is missing,
except when ``INCARNATE_REQUIRE_BROWSER`` is set (CI), where it fails.
With ``INCARNATE_UPDATE_SCREENSHOTS=1`` the screenshots it takes are also
copied to ``docs/images/console-*.png`` for the how-to.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.console.charts import Store, make_store

CHROMIUM = Path("/usr/bin/chromium")
REPOSITORY = Path(__file__).resolve().parents[2]
IMAGES = REPOSITORY / "docs" / "images"
CHARTS = "tests.console.charts:CHARTS"
TOKEN = "console-test-token"

pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    if os.environ.get("INCARNATE_REQUIRE_BROWSER"):
        pytest.fail(f"{reason}, and INCARNATE_REQUIRE_BROWSER is set")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(url: str, process: subprocess.Popen[str], timeout: float = 20.0) -> None:
    """Wait, bounded, until the server at ``url`` answers (any status)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the console exited with {process.returncode}: {process.communicate()[1]}")
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # it answers: with 401, as a console with a token should
        except OSError:
            time.sleep(0.1)
    pytest.fail(f"the console did not answer at {url} within {timeout:g}s")


def _console(store: Store) -> contextlib.AbstractContextManager[str]:
    """The real ``incarnate console`` over ``store`` in its own process; yields its address."""
    return serve_console(str(store.path), REPOSITORY, CHARTS)


def browser_kit() -> Any:
    """Playwright's ``(expect, sync_playwright)``, once Chromium and the package are known to be here."""
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'incarnate[test]')")
    return expect, sync_playwright


@contextlib.contextmanager
def serve_console(db: str, directory: Path, charts: str) -> Iterator[str]:
    """``incarnate console --db DB --charts CHARTS`` run in ``directory`` in its own process; its address.

    Run from the store's own directory with a relative ``db``, the pages (and
    the screenshots taken of them) show nothing of the machine's paths.
    """
    port = _free_port()
    command = [sys.executable, "-m", "incarnate", "console", "--db", db, "--port", str(port)]
    process = subprocess.Popen(
        [*command, "--charts", charts, "--token", TOKEN],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
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


def _recover(store: Store) -> subprocess.CompletedProcess[str]:
    """Run ``incarnate recover`` on the store: it processes what the console accepted."""
    return subprocess.run(
        [
            *(sys.executable, "-m", "incarnate", "recover", "--db", str(store.path)),
            *("--charts", CHARTS, "--tasks", "incarnate._demo:TASKS", "--wait", "0", "--timeout", "30"),
        ],
        cwd=REPOSITORY,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _shoot(page: Any, tmp_path: Path, name: str) -> Path:
    """Save a full-page screenshot under the test's directory (and the docs', when asked to)."""
    path = tmp_path / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("INCARNATE_UPDATE_SCREENSHOTS") == "1":
        IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, IMAGES / path.name)
    return path


def test_operator_filters_opens_an_instance_and_approves_it(tmp_path: Path) -> None:
    """In Chromium an operator filters the list, sees the highlighted configuration and tree, and approves."""
    if not CHROMIUM.exists():
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _unavailable("the playwright package is not installed (pip install 'incarnate[test]')")
    store = make_store(tmp_path / "console.db")
    with _console(store) as base, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            page.set_default_timeout(15_000)
            problems: list[str] = []
            page.on(
                "console", lambda message: problems.append(message.text) if message.type == "error" else None
            )

            assert page.goto(f"{base}/").status == 401  # type: ignore[union-attr]
            page.goto(f"{base}/?token={TOKEN}")  # sets the cookie and drops the token from the address
            assert "token=" not in page.url
            problems.clear()  # the refused first visit (the page and its icon) logged two 401s
            expect(page.locator("table.instances tbody tr")).to_have_count(9)
            _shoot(page, tmp_path, "instances")

            page.select_option("select[name=chart]", "order")
            page.click("form.filters button[type=submit]")
            rows = page.locator("table.instances tbody tr")
            expect(rows).to_have_count(1)
            expect(rows.first).to_contain_text("running")

            page.click(f"a[href='/instances/{store.order}']")
            active = page.locator("svg.diagram g.state.active")
            expect(page.locator("svg.diagram g.active[data-state=awaiting_approval]")).to_have_count(1)
            assert active.count() == 1
            tree = page.locator("table.tree tbody tr")
            expect(tree).to_have_count(6)  # the order, three packers, the failed charge and its retry
            expect(tree.filter(has_text="teapot")).to_contain_text("done")
            expect(page.locator("select[name=event] option")).to_have_text(["approve", "reject"])
            _shoot(page, tmp_path, "instance")

            page.click("a[href='/charts/order']")
            expect(page.locator("svg.diagram g.active[data-state=awaiting_approval]")).to_contain_text("1")
            _shoot(page, tmp_path, "chart")

            page.go_back()
            page.select_option("select[name=event]", "approve")
            page.fill("textarea[name=data]", '{"approved_by": "ops"}')
            page.click("form.send button[type=submit]")
            expect(page.locator("p.flash.ok")).to_contain_text("accepted 'approve'")

            page.goto(f"{base}/?chart=order")
            status = page.locator("table.instances tbody tr").first.locator(".badge")
            expect(status).to_have_text("running")
            recovered = _recover(store)
            assert recovered.returncode == 0, recovered.stdout + recovered.stderr
            expect(status).to_have_text("done")  # the live refresh swapped the table in

            page.goto(f"{base}/instances/{store.order}")
            expect(page.locator("table.timeline")).to_contain_text("event 'approve' -> shipped")
            expect(page.locator("svg.diagram g.active[data-state=shipped]")).to_have_count(1)
            expect(page.locator("h1 .badge")).to_have_text("done")

            page.goto(f"{base}/charts/order")
            expect(page.locator("svg.diagram g.active")).to_have_count(0)  # no order is in flight now
            assert problems == [], problems  # no script error, no refused resource
        finally:
            browser.close()
