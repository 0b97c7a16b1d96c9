"""The profile's notifications card keeps what was ticked when a save is refused."""

from __future__ import annotations

import pytest

from notifications.models import Subscription
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

sam_ui = f.client_fixture("sam", f.signed_in)


def _checked(html: str, value: str) -> bool:
    tag = html.split(f'name="events" value="{value}"')[1].split(">")[0]
    return "checked" in tag


def test_a_refused_save_keeps_the_ticked_events_and_a_second_save_stores_them(sam_ui, sam):
    form = {
        "email": "on",
        "email_address": "sam@lab.example",
        "webhook_url": "http://plain.example/hook",  # refused: not https
        "events": ["host_repair_failed", "worker_offline"],
    }
    response = sam_ui.post("/notifications/settings/", form, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 400
    # As typed, not as stored (suite_finished on, the staff events off by default).
    assert _checked(html, "host_repair_failed") and _checked(html, "worker_offline")
    assert not _checked(html, "suite_finished")

    # Saving the form again as it came back, the URL fixed, stores the ticked events.
    form["webhook_url"] = "https://ci.example/hook"
    assert sam_ui.post("/notifications/settings/", form, headers=HTMX).status_code == 200
    sub = Subscription.objects.get(user=sam)
    assert (sub.suite_finished, sub.host_repair_failed, sub.worker_offline) == (False, True, True)


def test_an_event_the_form_cannot_read_is_refused_not_dropped(sam_ui, sam):
    sam_ui.post(
        "/notifications/settings/",
        {"email": "on", "email_address": "sam@lab.example", "events": ["worker_offline"]},
        headers=HTMX,
    )
    response = sam_ui.post(
        "/notifications/settings/",
        {"email": "on", "email_address": "sam@lab.example", "events": ["worker_offlin"]},
        headers=HTMX,
    )
    assert response.status_code == 400
    assert "worker_offlin is not one of the available choices" in response.content.decode()
    assert Subscription.objects.get(user=sam).worker_offline


def test_saving_a_destination_with_no_event_says_nothing_will_be_sent(sam_ui):
    response = sam_ui.post(
        "/notifications/settings/",
        {"email": "on", "email_address": "sam@lab.example"},
        headers=HTMX,
    )
    assert response.status_code == 200
    assert "No event is ticked, so nothing will be sent." in response.content.decode()
