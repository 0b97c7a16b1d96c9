"""Notifications in a real browser: the profile's settings card and the staff delivery log."""

from __future__ import annotations

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from notifications.choices import Channel, DeliveryStatus, EventKind
from notifications.models import Delivery, Event, Subscription
from tests.ui.browser.conftest import VIEWPORT, assert_not_reloaded, mark_page, screenshot, sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DEBUG = pytest.mark.parametrize("debug", [True, False], ids=["DEBUG=1", "DEBUG=0"])


def keep(page, name: str, *, full_page: bool = True) -> None:  # noqa: ANN001
    screenshot(page, name, full_page=full_page)


@DEBUG
def test_a_tester_sets_up_email_and_a_webhook_on_the_profile(page, alice, settings, debug):  # noqa: ANN001
    settings.DEBUG = debug  # pytest-django forces it off; the live server reads it per request
    sign_in(page, "alice", "alice-pass")
    page.goto("/accounts/profile/")
    mark_page(page)
    card = page.locator("#notifications")
    expect(card.get_by_label("My suites finish")).to_be_checked()
    expect(card.get_by_label("A host reaches repair_failed")).to_have_count(0)

    # E-mail on, but the account has no address: refused, saying why, nothing saved.
    card.get_by_label("E-mail me").check()
    card.get_by_role("button", name="Save notification settings").click()
    expect(page.locator("#notify-error")).to_have_text("Give an e-mail address to send to.")
    assert not Subscription.objects.filter(user=alice).exists()
    # The keyboard goes to the field in error once the answer settles (schedsite.js); typing
    # before that could land in it, whichever field Playwright's fill had focused.
    card = page.locator("#notifications")
    expect(card.get_by_label("E-mail address")).to_be_focused()

    # A plain-http webhook is refused too; what was typed stays.
    card.get_by_label("E-mail address").fill("alice@lab.example")
    card.get_by_label("Webhook URL").fill("http://ci.example.com/hook")
    expect(card.get_by_label("E-mail address")).to_have_value("alice@lab.example")
    card.get_by_role("button", name="Save notification settings").click()
    expect(page.locator("#notify-error")).to_have_text("Webhook URLs must use https.")
    expect(page.locator("#notifications").get_by_label("E-mail address")).to_have_value(
        "alice@lab.example"
    )

    card = page.locator("#notifications")
    expect(card.get_by_label("Webhook URL")).to_be_focused()
    card.get_by_label("Webhook URL").fill("https://ci.example.com/hook")
    card.get_by_role("button", name="Save notification settings").click()
    expect(page.locator("#toast")).to_contain_text("Notification settings saved.")
    sub = Subscription.objects.get(user=alice)
    assert sub.email and sub.webhook_url == "https://ci.example.com/hook"
    # The secret, shown this once, matches the one that signs.
    expect(page.locator("#webhook-secret-value")).to_have_value(sub.secret)
    expect(page.locator("#notify-error")).to_have_count(0)
    assert_not_reloaded(page)
    keep(page, f"profile-notifications-debug{int(debug)}")

    # Opened again later: the secret is not on the page; regenerating shows a new one.
    page.goto("/accounts/profile/")
    expect(page.locator("#webhook-secret-value")).to_have_count(0)
    expect(page.locator("#notifications").get_by_label("E-mail me")).to_be_checked()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Regenerate secret").click()
    expect(page.locator("#toast")).to_contain_text("New signing secret made")
    new = Subscription.objects.get(user=alice).secret
    assert new != sub.secret
    expect(page.locator("#webhook-secret-value")).to_have_value(new)


def log_rows(alice) -> None:  # noqa: ANN001
    now = timezone.now()
    suite = Event.objects.create(
        kind=EventKind.SUITE_FINISHED,
        key="suite_finished:41",
        payload={"suite": {"name": "bvt R120"}},
        created_at=now,
    )
    host = Event.objects.create(
        kind=EventKind.HOST_REPAIR_FAILED,
        key=f"host_repair_failed:3:{now}",
        payload={"host": {"hostname": "dut4.lab"}},
    )
    Delivery.objects.create(
        event=suite, user=alice, channel=Channel.EMAIL, destination="alice@lab.example",
        status=DeliveryStatus.SENT, attempts=1, sent_at=now,
    )  # fmt: skip
    Delivery.objects.create(
        event=suite, user=alice, channel=Channel.WEBHOOK, destination="https://ci.example.com/hook",
        status=DeliveryStatus.PENDING, attempts=2, last_error="HTTP 503 Service Unavailable",
        next_attempt_at=now + timezone.timedelta(minutes=2),
    )  # fmt: skip
    Delivery.objects.create(
        event=host, user=alice, channel=Channel.WEBHOOK, destination="https://pager.example.com/in",
        status=DeliveryStatus.FAILED, attempts=5,
        last_error="ConnectionError: connection refused",
    )  # fmt: skip


@DEBUG
def test_staff_read_the_delivery_log_and_filter_it(page, sam, alice, settings, debug):  # noqa: ANN001
    settings.DEBUG = debug
    log_rows(alice)
    sign_in(page, "sam", "sam-pass")
    page.goto("/accounts/profile/")
    page.get_by_role("link", name="Every delivery (the delivery log)").click()
    expect(page.get_by_role("heading", name="Notification deliveries")).to_be_visible()
    table = page.locator("#deliveries-table")
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table).to_contain_text("HTTP 503 Service Unavailable")
    expect(table).to_contain_text("suite bvt R120")
    keep(page, f"delivery-log-debug{int(debug)}")

    mark_page(page)
    page.get_by_label("Status").select_option("failed")
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table).to_contain_text("ConnectionError: connection refused")
    expect(table).to_contain_text("host dut4.lab")
    expect(table).to_contain_text("Failed")
    assert_not_reloaded(page)
    assert "status=failed" in page.url

    # At phone width the table scrolls inside its frame; the page does not widen.
    page.goto("/notifications/deliveries/")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0
    keep(page, f"delivery-log-narrow-debug{int(debug)}")
    page.set_viewport_size(VIEWPORT)


@DEBUG
def test_a_tester_is_refused_the_delivery_log(page, alice, settings, debug):  # noqa: ANN001
    settings.DEBUG = debug
    log_rows(alice)
    sign_in(page, "alice", "alice-pass")
    page.goto("/accounts/profile/")
    expect(page.get_by_role("link", name="Every delivery (the delivery log)")).to_have_count(0)
    # Her own deliveries are on her profile.
    expect(page.locator("#my-deliveries tbody tr")).to_have_count(3)
    response = page.goto("/notifications/deliveries/")
    assert response is not None and response.status == 403
    expect(page.get_by_text("Only lab staff can see the delivery log.")).to_be_visible()


@DEBUG
def test_a_tester_asks_the_submit_form_for_a_webhook_when_the_suite_finishes(
    page, alice, settings, debug
):  # noqa: ANN001
    from jobs.models import Suite
    from notifications.models import SuiteNotify

    settings.DEBUG = debug
    Subscription.objects.create(user=alice, webhook_url="https://ci.example.com/hook")
    sign_in(page, "alice", "alice-pass")
    page.goto("/suites/new/")
    page.get_by_label("Name (required)").fill("bvt-notify")
    page.locator(".job-row").first.locator("input[name=job_name]").fill("login_Smoke")
    page.locator(".job-row").first.locator("input[name=job_labels]").fill("board:x")
    page.get_by_label("Wait for such hosts").check()
    # E-mail too, but Alice has no address: refused on the box, nothing submitted.
    page.get_by_label("E-mail me").check()
    page.get_by_label("Call my webhook").check()
    page.get_by_role("button", name="Submit suite").click()
    expect(page.locator("#notify-error")).to_contain_text("You have no e-mail address")
    keep(page, f"submit-notify-error-debug{int(debug)}")
    assert Suite.objects.count() == 0

    page.get_by_label("E-mail me").uncheck()
    page.get_by_role("button", name="Submit suite").click()
    expect(page.get_by_role("heading", name="bvt-notify")).to_be_visible()
    notify = SuiteNotify.objects.get(suite=Suite.objects.get())
    assert notify.webhook and not notify.email
