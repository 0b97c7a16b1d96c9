"""The Content-Security-Policy: every page works under it, and the browser reports no violation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from jobs import services
from tests import factories as f
from tests.ui.browser.conftest import screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every securitypolicyviolation event of the page, kept in the window until the test reads it.
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(
    e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile + ":" + e.lineNumber
  );
});
"""


@pytest.fixture
def watched(page):  # noqa: ANN001, ANN201
    """The page, recording CSP violations and every console message about them."""
    console: list[str] = []
    page.on(
        "console",
        lambda msg: console.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    page.add_init_script(RECORD_VIOLATIONS)
    page.csp_console = console  # type: ignore[attr-defined]
    return page


def assert_no_violation(page, where: str) -> None:  # noqa: ANN001
    assert page.evaluate("window.__csp") == [], where
    assert page.csp_console == [], where  # type: ignore[attr-defined]


def test_the_policy_allows_only_the_sites_own_scripts_and_styles(page, sam, lab):  # noqa: ANN001
    response = page.goto("/accounts/login/")
    policy = response.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";") if d.strip())
    assert directives["script-src"] == "'self'"
    assert directives["style-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert "unsafe" not in policy


@pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])
def test_every_page_runs_without_a_csp_violation(watched, sam, alice, lab, settings, debug):  # noqa: ANN001
    # `make run` serves with DEBUG=1: the demo must run under the same policy as production.
    settings.DEBUG = debug
    page = watched
    suite = f.suite("nightly", 4, labels=["board:eve"], owner=alice, min_duts=1)
    services.scheduler_tick()
    lease = lab.h1.leases.filter(released_at=None).first() or lab.h2.leases.first()
    assert lease is not None

    page.goto("/accounts/login/")
    assert_no_violation(page, "/accounts/login/")
    sign_in(page, "sam", "sam-pass")
    tour = [
        ("/", "Lab dashboard"),
        ("/hosts/", "Hosts"),
        ("/hosts/?label=pool:cq", "Hosts"),
        (f"/hosts/{lease.host.hostname}/", lease.host.hostname),
        ("/workers/", "Workers"),
        ("/workers/w1/", "w1"),
        ("/queue/", "Queue"),
        ("/suites/", "Suites"),
        (f"/suites/{suite.pk}/", "nightly"),
        (f"/jobs/{lease.job_id}/", lease.job.name),
        ("/suites/new/", "Submit a suite"),
        ("/leases/", "Leases"),
        ("/accounts/profile/", "sam"),
    ]
    for path, heading in tour:
        page.goto(path)
        expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
        assert_no_violation(page, path)
        name = "csp-" + (path.strip("/").replace("/", "-").replace("?", "-") or "dashboard")
        screenshot(page, name, full_page=True)

    # htmx at work: a live poll, an action swapped in place, label suggestions.
    page.goto("/hosts/")
    row = page.locator(f"#host-{lab.h3.pk}")
    row.get_by_text("Lock…").click()
    row.get_by_label(f"Why lock {lab.h3.hostname}?").fill("servo")
    row.get_by_role("button", name="Lock", exact=True).click()
    expect(row).to_contain_text("servo")
    page.goto("/suites/new/")
    page.locator(".job-row").first.get_by_label("Labels the host needs").fill("board:e")
    expect(page.locator(".suggestions").first).to_contain_text("board:eve")
    assert_no_violation(page, "htmx swaps")

    for path in ("/admin/", "/admin/hosts/host/", "/api/docs/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
        assert_no_violation(page, path)
    # Swagger UI started from its script file and drew the operations.
    expect(page.get_by_text("/api/hosts/{hostname}/lock/").first).to_be_visible()
    screenshot(page, "csp-api-docs")


def test_the_suite_bars_still_show_progress(watched, sam, alice, lab):  # noqa: ANN001
    page = watched
    suite = f.suite("nightly", 4, labels=["board:eve"], owner=alice, min_duts=1)
    services.scheduler_tick()
    sign_in(page, "sam", "sam-pass")
    page.goto(f"/suites/{suite.pk}/")
    bar = page.locator("svg.bar").last
    widths = bar.locator("rect").evaluate_all("rs => rs.map(r => r.getBoundingClientRect().width)")
    assert widths and all(w > 0 for w in widths)
    assert sum(widths) == pytest.approx(bar.bounding_box()["width"], abs=1)
    assert_no_violation(page, "suite detail")
