"""Playwright fixtures: one Debian Chromium for the session, a fresh page per test."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Playwright's sync API keeps an event loop in the test thread; the ORM calls the tests make
# there (building data, checking the database) are still plain synchronous calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
# Screenshots go to a pytest temporary folder (kept for the last few runs: see its `basetemp`)
# unless this names a folder: to look at them, or to refresh docs/screenshots
# (`make screenshots`, scripts/refresh_screenshots.py).
SCREENSHOTS_ENV = "SCHEDSITE_SCREENSHOTS"
VIEWPORT = {"width": 1280, "height": 800}


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's Chromium, launched once for every browser test."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash scripts/install_browser.sh` first")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshots_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where `screenshot` saves: SCHEDSITE_SCREENSHOTS if set, else a temporary folder."""
    chosen = os.environ.get(SCREENSHOTS_ENV)
    if not chosen:
        return tmp_path_factory.mktemp("screenshots")
    folder = Path(chosen).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser, live_server, settings, screenshots_dir) -> Iterator[object]:  # noqa: ANN001
    """A fresh browser context on the live server; live tables poll every second here."""
    from playwright.sync_api import expect

    settings.UI_REFRESH_SECONDS = 1
    expect.set_options(timeout=8_000)
    context = browser.new_context(viewport=VIEWPORT, base_url=live_server.url)
    page = context.new_page()
    page.set_default_timeout(8_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if _unexpected(msg) else None)
    page.js_errors = errors  # type: ignore[attr-defined]
    page.screenshots_dir = screenshots_dir  # type: ignore[attr-defined]
    yield page
    context.close()
    # A script error anywhere is a bug even when the test's own checks passed.
    assert not errors, f"JavaScript errors in the page: {errors}"


# A refused action (400/403/409) is an expected answer: the browser and htmx both log it. So
# is an aborted request: leaving a page, or an action superseding a poll, aborts the poll.
EXPECTED_ERRORS = (
    "the server responded with a status of 4",
    "Response Status Error Code 4",
    "htmx:sendAbort",
    "htmx:afterRequest",
)


def _unexpected(msg) -> bool:  # noqa: ANN001
    return msg.type == "error" and not any(text in msg.text for text in EXPECTED_ERRORS)


@pytest.fixture(params=[True, False], ids=["DEBUG=1", "DEBUG=0"])
def debug(request: pytest.FixtureRequest, settings) -> bool:  # noqa: ANN001
    """The test twice: DEBUG on, as `make run` serves, and off, as production does.

    pytest-django forces it off; the live server reads it per request.
    """
    settings.DEBUG = request.param
    return request.param


def sign_in(page, username: str, password: str) -> None:  # noqa: ANN001
    """Sign in through the login form, as a person would."""
    from playwright.sync_api import expect

    page.goto("/accounts/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Lab dashboard")).to_be_visible()


def screenshot(page, name: str, *, full_page: bool = False) -> Path:  # noqa: ANN001
    """Save a screenshot of the page as `<name>.png` in the session's screenshots folder."""
    path = page.screenshots_dir / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def mark_page(page) -> None:  # noqa: ANN001
    """Leave a marker in the window: it survives htmx swaps and is gone after any reload."""
    page.evaluate("window.__schedsite_marker = 'same page'")


def assert_not_reloaded(page) -> None:  # noqa: ANN001
    assert page.evaluate("window.__schedsite_marker") == "same page", "the page was reloaded"


def overflow(page) -> int:  # noqa: ANN001
    """How many pixels the page is wider than the window (0: it fits)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def one_eve_host_reserved(sam, *, free_too: bool = True) -> None:  # noqa: ANN001
    """board:eve hosts e2, reserved by staff for an hour, and (free_too) e1, free."""
    from datetime import timedelta  # noqa: PLC0415

    from jobs import services  # noqa: PLC0415
    from tests import factories as f  # noqa: PLC0415

    if free_too:
        f.host("e1", ["board:eve"])
    held = f.host("e2", ["board:eve"])
    services.lease_reserve(host=held, holder=sam, duration=timedelta(hours=1), reason="lab")
