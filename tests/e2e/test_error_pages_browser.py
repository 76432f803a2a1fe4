"""Quarry's error pages in a real browser, on a server in `make run`'s mode (DEBUG=1): a missing page is
Quarry's 404, styled by the site's stylesheet under the strict Content-Security-Policy, with nothing
blocked (Django's debug pages style themselves inline, which the policy refuses)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, expect

from tests.e2e.test_admin_browser import Violations
from tests.servers import ROOT, asgi_server, child_env


@pytest.fixture(scope="module")
def base(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("error-pages-e2e")
    with asgi_server(child_env(DEBUG="1", QUARRY_DATA_DIR=str(data)), log_name="uvicorn-e2e-error-pages") as url:
        yield url


def test_a_missing_page_is_quarrys_styled_404_under_debug(context: BrowserContext) -> None:
    page = context.new_page()
    seen = Violations(page)
    response = page.goto("/no-such-page/")
    assert response is not None and response.status == 404
    assert "style-src 'self';" in response.headers["content-security-policy"]
    expect(page.get_by_role("heading", name="Not found")).to_be_visible()
    expect(page.get_by_role("link", name="Back to the chat")).to_be_visible()
    # The stylesheet applied: the card's rounded border and the narrow column come from quarry.css only.
    card = page.locator("section.card")
    assert card.evaluate("e => getComputedStyle(e).borderTopLeftRadius") == "12px"
    assert page.locator("main").evaluate("e => getComputedStyle(e).maxWidth") == "416px"  # 26rem
    page.screenshot(path=str(ROOT / "var" / "test-logs" / "error-page-404.png"), full_page=True)
    # The page's own 404 is the one expected failed response; nothing else failed or was refused.
    assert [m for m in seen.messages if not m.endswith("/no-such-page/")] == []
