"""/scheduler/settings/: everyone reads the settings and their history; staff change them."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.models import SchedulerSettings, SchedulerSettingsChange
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

URL = "/scheduler/settings/"
FORM = {
    "ordering": "fifo",
    "aging_minutes": "0",
    "aging_cap": "20",
    "host_choice": "affinity",
    "default_duration": "600",
    "preemption": "off",
    "preempt_margin": "20",
    "fair_share": "off",
    "fair_share_half_life_hours": "24",
    "same_build_first_minutes": "0",
    "version": "0",
    "reason": "",
}


@pytest.mark.parametrize("who", ["sam_client", "alice_client"])
def test_everyone_reads_the_settings_what_each_does_and_who_changed_them(request, sam, who):
    services.update_scheduler_settings(sam, aging_minutes=15, reason="nightly suites starved")
    client = request.getfixturevalue(who)

    response = client.get(URL)

    html = response.content.decode()
    assert response.status_code == 200
    assert 'href="/scheduler/settings/"' in html and "Scheduler settings</a>" in html  # nav
    assert "shortest first, with a job&#x27;s size shrinking the longer it waits" in html
    assert "aging_minutes: 0 → 15" in html and "nightly suites starved" in html
    assert ('id="settings-form"' in html) is (who == "sam_client")
    if who == "alice_client":
        assert "every 15 min" in html and "Only lab staff change these." in html


def test_staff_change_the_settings_and_the_change_is_audited(sam_client):
    response = sam_client.post(
        URL,
        {**FORM, "ordering": "dynsize", "aging_cap": "30", "reason": "nothing starves"},
        headers=HTMX,
    )

    assert response.status_code == 200, response.content.decode()
    settings = SchedulerSettings.load()
    assert (settings.ordering, settings.aging_cap, settings.version) == ("dynsize", 30, 1)
    assert settings.updated_by == "sam"
    html = response.content.decode()
    assert "Saved the scheduler settings (version 1)" in html
    assert "ordering: fifo → dynsize" in html  # the history below the form, already updated
    change = SchedulerSettingsChange.objects.get()
    assert change.changes == {"ordering": ["fifo", "dynsize"], "aging_cap": [20, 30]}
    assert change.reason == "nothing starves" and change.actor == "sam"


def test_without_javascript_a_change_redirects_back_to_the_page(sam_client):
    response = sam_client.post(URL, {**FORM, "host_choice": "spread"})
    assert response.status_code == 302 and response["Location"] == URL
    assert SchedulerSettings.load().host_choice == "spread"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"aging_cap": "101"}, "aging_cap", "a whole number from 0 to 100"),
        ({"aging_cap": "-1"}, "aging_cap", "a whole number from 0 to 100"),
        ({"aging_minutes": "soon"}, "aging_minutes", "Enter a whole number"),
        ({"ordering": "random"}, "ordering", "Select a valid choice"),
        ({"default_duration": "0"}, "default_duration", "more than 0"),
    ],
)
def test_a_bad_value_shows_the_error_next_to_its_field_and_changes_nothing(
    sam_client, change, field, words
):
    response = sam_client.post(URL, {**FORM, "aging_minutes": "5", **change}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 400
    assert f'id="id_{field}-error"' in html and words in html
    settings = SchedulerSettings.load()
    assert settings.version == 0 and settings.aging_minutes == 0
    assert not SchedulerSettingsChange.objects.exists()


def test_a_stale_form_says_someone_else_changed_them_and_shows_their_values(sam_client, bob):
    services.update_scheduler_settings(bob, host_choice="pack")  # while sam had the form open

    response = sam_client.post(URL, {**FORM, "aging_cap": "50"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 409
    assert "Someone else changed the scheduler settings" in html
    assert '<option value="pack" selected>' in html and 'value="20"' in html  # theirs
    assert 'name="version" value="1"' in html  # saving again starts from their version
    settings = SchedulerSettings.load()
    assert (settings.aging_cap, settings.host_choice, settings.version) == (20, "pack", 1)


def test_a_tester_may_not_change_them(alice_client):
    response = alice_client.post(URL, {**FORM, "ordering": "size"}, headers=HTMX)
    assert response.status_code == 403
    assert SchedulerSettings.load().ordering == "fifo"
