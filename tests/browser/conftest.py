"""Browser tests drive Debian's chromium through Playwright; never a downloaded browser."""

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("TASKHOSTER_CHROMIUM") or shutil.which("chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM:
        if os.environ.get("TASKHOSTER_REQUIRE_BROWSER") == "1":
            pytest.fail("TASKHOSTER_REQUIRE_BROWSER=1 and no chromium on this machine")
        pytest.skip("no chromium on this machine (apt-get install chromium); browser tests skipped")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread, which Django takes
    # for async code; the tests' own ORM calls are plain synchronous ones.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "1"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
            ],
        )  # fmt: skip
        yield browser
        browser.close()
    del os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"]


@pytest.fixture
def page(browser, request):
    context = browser.new_context()
    page = context.new_page()
    yield page
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()


@pytest.fixture
def shoot(request):
    """Save a named screenshot of a page as a test artifact."""

    def save(page, name: str) -> None:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-{name}.png"), full_page=True)

    return save
