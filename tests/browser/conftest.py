"""The browser the browser tests drive: one Chromium per test process, a fresh context per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    """Debian's Chromium under Playwright, launched once for the browser tests a process (an xdist
    worker) runs: a launch (Playwright's node driver, then the browser's processes) costs ~1.3 s of
    CPU, once per module of ~15 when each module launched its own. Each test gets a context of its
    own (``browser_page``): its own cookies, storage and viewport, as a browser of its own gave it.
    A module's tests need not run on one worker for it: a worker launches Chromium at its first
    browser test."""
    from playwright.sync_api import sync_playwright

    from tests.browser.test_pages_in_a_browser import CHROMIUM

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield browser
        finally:
            browser.close()
