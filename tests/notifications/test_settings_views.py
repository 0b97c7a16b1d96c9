"""Notification settings: the profile panel, the staff delivery log, notify on submission."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Suite
from notifications.choices import Channel, DeliveryStatus, EventKind
from notifications.models import Delivery, Event, Subscription, SuiteNotify
from tests import factories as f
from tests.api.conftest import token_client
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

alice_ui = f.client_fixture("alice", f.signed_in)
sam_ui = f.client_fixture("sam", f.signed_in)
alice_api = f.client_fixture("alice", token_client)


def settings_form(**overrides: object) -> dict:
    data: dict = {
        "email": "on",
        "email_address": "",
        "webhook_url": "",
        "events": ["suite_finished"],
    }
    data.update(overrides)
    return data


def test_the_profile_shows_a_tester_only_their_own_suites_event(alice_ui):
    html = alice_ui.get("/accounts/profile/").content.decode()
    assert 'id="notifications"' in html and "My suites finish" in html
    assert "A host reaches repair_failed" not in html and "A worker goes offline" not in html
    assert "Nothing sent to you yet." in html


def test_the_profile_offers_staff_the_host_and_worker_events(sam_ui):
    html = sam_ui.get("/accounts/profile/").content.decode()
    assert "A host reaches repair_failed" in html and "A worker goes offline" in html
    assert "/notifications/deliveries/" in html


def test_saving_sets_the_email_address_and_the_events(alice_ui, alice):
    data = settings_form(email_address="alice@lab.example")
    response = alice_ui.post("/notifications/settings/", data, headers=HTMX)
    assert response.status_code == 200
    assert "Notification settings saved." in response.content.decode()
    sub = Subscription.objects.get(user=alice)
    alice.refresh_from_db()
    assert alice.email == "alice@lab.example"
    assert sub.email and sub.suite_finished and not sub.host_repair_failed
    assert sub.channels() == [Channel.EMAIL]


def test_email_on_without_an_address_is_refused_and_changes_nothing(alice_ui, alice):
    response = alice_ui.post("/notifications/settings/", settings_form(), headers=HTMX)
    assert response.status_code == 400
    assert "Give an e-mail address to send to." in response.content.decode()
    assert not Subscription.objects.filter(user=alice).exists()


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://hooks.example.com/x", "Webhook URLs must use https."),
        ("http://127.0.0.1:8080/x", "Webhook URLs must use https."),  # loopback not allowed here
        ("not a url", "Enter a full URL"),
        ("https://user:pw@hooks.example.com/", "Leave credentials out of the URL"),
        ("ftp://hooks.example.com/", "Enter a full URL"),
    ],
)
def test_a_bad_webhook_url_is_refused_with_the_reason(alice_ui, alice, url, error):
    data = settings_form(email="", webhook_url=url)
    response = alice_ui.post("/notifications/settings/", data, headers=HTMX)
    assert response.status_code == 400
    assert error in response.content.decode()
    assert not Subscription.objects.filter(user=alice).exists()


def test_loopback_http_is_allowed_only_where_the_setting_says(alice_ui, alice, settings):
    settings.NOTIFY_WEBHOOK_ALLOW_LOOPBACK_HTTP = True
    data = settings_form(email="", webhook_url="http://127.0.0.1:8080/x")
    assert alice_ui.post("/notifications/settings/", data, headers=HTMX).status_code == 200
    data = settings_form(email="", webhook_url="http://hooks.example.com/x")
    assert alice_ui.post("/notifications/settings/", data, headers=HTMX).status_code == 400


def test_a_first_webhook_shows_its_secret_once(alice_ui, alice):
    data = settings_form(email="", webhook_url="https://ci.example.com/hook")
    html = alice_ui.post("/notifications/settings/", data, headers=HTMX).content.decode()
    secret = Subscription.objects.get(user=alice).secret
    assert secret in html and "Copy your signing secret now" in html
    # Saved again, or the page opened later: the secret is not shown.
    assert (
        secret not in alice_ui.post("/notifications/settings/", data, headers=HTMX).content.decode()
    )
    assert secret not in alice_ui.get("/accounts/profile/").content.decode()


def test_regenerating_the_secret_shows_the_new_one(alice_ui, alice):
    data = settings_form(email="", webhook_url="https://ci.example.com/hook")
    alice_ui.post("/notifications/settings/", data, headers=HTMX)
    old = Subscription.objects.get(user=alice).secret
    html = alice_ui.post("/notifications/secret/", headers=HTMX).content.decode()
    new = Subscription.objects.get(user=alice).secret
    assert new != old and new in html and old not in html


def test_a_tester_cannot_subscribe_to_host_events(alice_ui, alice):
    data = settings_form(email_address="a@lab.example", events=["host_repair_failed"])
    response = alice_ui.post("/notifications/settings/", data, headers=HTMX)
    assert response.status_code == 400
    assert "Only lab staff" in response.content.decode()
    assert not Subscription.objects.filter(user=alice).exists()


def test_without_htmx_a_save_redirects_back_to_the_profile(alice_ui):
    data = settings_form(email_address="alice@lab.example")
    response = alice_ui.post("/notifications/settings/", data)
    assert response.status_code == 302
    page = alice_ui.get(response["Location"]).content.decode()
    assert "Notification settings saved." in page


def test_the_profile_lists_the_users_last_deliveries(alice_ui, alice, bob):
    event = Event.objects.create(kind=EventKind.SUITE_FINISHED, key="suite_finished:1", payload={})
    Delivery.objects.create(
        event=event, user=alice, channel=Channel.EMAIL, destination="alice@lab.example"
    )
    Delivery.objects.create(event=event, user=bob, channel=Channel.EMAIL, destination="bob@x.y")
    html = alice_ui.get("/accounts/profile/").content.decode()
    assert "alice@lab.example" in html and "bob@x.y" not in html


# --- the delivery log -----------------------------------------------------------------------


@pytest.fixture
def log_rows(alice):  # noqa: ANN001, ANN201
    event = Event.objects.create(
        kind=EventKind.WORKER_OFFLINE, key="worker_offline:1:t", payload={}
    )
    sent = Delivery.objects.create(
        event=event, user=alice, channel=Channel.WEBHOOK, destination="https://a.example/ok",
        status=DeliveryStatus.SENT, attempts=1, sent_at=timezone.now(),
    )  # fmt: skip
    failed = Delivery.objects.create(
        event=event, user=alice, channel=Channel.WEBHOOK, destination="https://b.example/down",
        status=DeliveryStatus.FAILED, attempts=5, last_error="HTTP 503 Service Unavailable",
    )  # fmt: skip
    return sent, failed


def test_staff_see_every_delivery_and_filter_by_status(sam_ui, log_rows):
    html = sam_ui.get("/notifications/deliveries/").content.decode()
    assert "https://a.example/ok" in html and "https://b.example/down" in html
    assert "HTTP 503 Service Unavailable" in html and "2 deliveries" in html
    html = sam_ui.get("/notifications/deliveries/?status=failed").content.decode()
    assert "https://b.example/down" in html and "https://a.example/ok" not in html
    fragment = sam_ui.get("/notifications/deliveries/?status=sent", headers=HTMX)
    html = fragment.content.decode().strip()
    assert html.startswith('<div id="deliveries-table"') and "<html" not in html
    assert "https://a.example/ok" in html and "https://b.example/down" not in html


def test_a_bad_filter_is_said_and_shows_nothing(sam_ui, log_rows):
    response = sam_ui.get("/notifications/deliveries/?status=lost")
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()


def test_a_tester_may_not_read_the_delivery_log(alice_ui, log_rows):
    response = alice_ui.get("/notifications/deliveries/")
    assert response.status_code == 403
    assert "https://a.example/ok" not in response.content.decode()


# --- notify on submission ---------------------------------------------------------------------


def suite_body(**extra: object) -> dict:
    return {
        "name": "bvt",
        "jobs": [{"name": "t1", "labels": ["board:x"]}],
        "allow_unmatched": True,
        **extra,
    }


def test_the_api_takes_notify_and_remembers_it_on_the_suite(alice_api, alice):
    alice.email = "alice@lab.example"
    alice.save()
    response = alice_api.post("/api/suites/", suite_body(notify=["email"]), format="json")
    assert response.status_code == 201, response.json()
    notify = SuiteNotify.objects.get(suite_id=response.json()["id"])
    assert notify.email and not notify.webhook


@pytest.mark.parametrize(
    ("notify", "error"),
    [
        (["email"], "You have no e-mail address: set one on your profile page first."),
        (["webhook"], "You have no webhook URL: set one on your profile page first."),
        (["sms"], '"sms" is not a valid choice.'),
        ("email", 'Expected a list of items but got type "str".'),
    ],
)
def test_notify_without_a_destination_is_a_400_and_submits_nothing(alice_api, notify, error):
    response = alice_api.post("/api/suites/", suite_body(notify=notify), format="json")
    assert response.status_code == 400
    assert error in str(response.json()["notify"])
    assert Suite.objects.count() == 0 and SuiteNotify.objects.count() == 0


def test_notify_refused_while_it_is_recorded_rolls_the_submission_back(alice_api, alice):
    # The webhook URL goes away between the check before submitting and the record made in
    # the submission's transaction: the refusal there undoes the suite, with the same 400.
    from jobs import signals

    sub = Subscription.objects.create(user=alice, webhook_url="https://ci.example.com/hook")

    def url_gone(**_kwargs: object) -> None:
        Subscription.objects.filter(pk=sub.pk).update(webhook_url="")

    signals.suite_notify_checked.connect(url_gone, dispatch_uid="test-url-gone")
    try:
        response = alice_api.post("/api/suites/", suite_body(notify=["webhook"]), format="json")
    finally:
        signals.suite_notify_checked.disconnect(dispatch_uid="test-url-gone")
    assert response.status_code == 400
    assert response.json()["notify"] == [
        "You have no webhook URL: set one on your profile page first."
    ]
    assert Suite.objects.count() == 0 and SuiteNotify.objects.count() == 0


def test_a_suite_without_notify_records_nothing(alice_api):
    response = alice_api.post("/api/suites/", suite_body(), format="json")
    assert response.status_code == 201
    assert SuiteNotify.objects.count() == 0


def form(**overrides: object) -> dict:
    data: dict = {
        "name": "bvt-inline", "build": "", "priority": "40", "min_duts": "0", "max_duts": "",
        "max_retries": "0", "timeout_minutes": "", "mode": "jobs", "allow_unmatched": "on",
        "job_name": ["login_Smoke"], "job_labels": ["board:x"], "job_host": [""],
        "fanout_labels": "", "fanout_name": "",
    }  # fmt: skip
    data.update(overrides)
    return data


def test_the_submit_form_asks_for_a_webhook_when_the_suite_finishes(alice_ui, alice):
    Subscription.objects.create(user=alice, webhook_url="https://ci.example.com/hook")
    response = alice_ui.post("/suites/new/", form(notify=["webhook"]))
    assert response.status_code == 302
    notify = SuiteNotify.objects.get(suite=Suite.objects.get())
    assert notify.webhook and not notify.email


def test_the_submit_form_refuses_email_without_an_address_on_the_field(alice_ui):
    response = alice_ui.post("/suites/new/", form(notify=["email"]), headers=HTMX)
    assert response.status_code == 400
    html = response.content.decode()
    assert 'id="notify-error"' in html and "set one on your profile page first" in html
    assert Suite.objects.count() == 0
