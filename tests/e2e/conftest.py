"""A real browser for the end-to-end tests: Debian's Chromium driven by Playwright.

Never a browser that a tool downloads: ``/usr/bin/chromium`` only (``make test`` installs
it with apt-get when missing). Without it these tests skip, unless
``QUARRY_E2E_REQUIRED=1`` (set by ``make test``) turns the skip into a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("QUARRY_CHROMIUM", "/usr/bin/chromium"))
# No first-run UI, no background traffic (updates, sync, QUIC probes): the browser talks
# only to the test server.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--disable-quic", "--no-first-run",
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: install Debian's chromium (make test does: apt-get install chromium)"
        if os.environ.get("QUARRY_E2E_REQUIRED") == "1":
            pytest.fail(message)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright  # here: only the browser tests need Playwright

    # Playwright's sync API keeps its own event loop registered as running in this thread, so
    # Django's async-safety check would refuse every ORM call of the tests' fixtures (and the
    # database flush) while the browser is open. No ORM call runs inside that loop: lift the
    # check for the browser's lifetime only (one test module), then restore it.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            try:
                yield browser
            finally:
                browser.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def context(browser: Any, base: str) -> Iterator[Any]:
    """A fresh browser context on the module's own server (each module defines ``base``)."""
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    yield context
    context.close()
