"""/api/scheduler/settings/: everyone reads them, staff change them compare-and-set, audited."""

from __future__ import annotations

import pytest

from jobs import services
from jobs.models import SchedulerSettings, SchedulerSettingsChange

pytestmark = pytest.mark.django_db

URL = "/api/scheduler/settings/"
DEFAULTS = {
    "ordering": "fifo",
    "aging_minutes": 0,
    "aging_cap": 20,
    "host_choice": "affinity",
    "default_duration": 600,
    "preemption": False,
    "preempt_margin": 20,
    "fair_share": False,
    "fair_share_half_life_hours": 24,
    "same_build_first_minutes": 0,
    "version": 0,
    "updated_by": "",
}


def unchanged() -> bool:
    settings = SchedulerSettings.load()
    return settings.version == 0 and not SchedulerSettingsChange.objects.exists()


def test_any_user_reads_the_settings_with_their_version(alice_client):
    response = alice_client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert {key: body[key] for key in DEFAULTS} == DEFAULTS
    assert set(body) == {*DEFAULTS, "updated_at"}


def test_a_stranger_may_not_read_them(anon_client):
    assert anon_client.get(URL).status_code == 401


def test_staff_change_some_settings_and_get_them_all_back(staff_client):
    response = staff_client.patch(
        URL,
        {"ordering": "dynsize", "aging_minutes": 30, "default_duration": 120, "version": 0,
         "reason": "the nightly suites starve"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["ordering"] == "dynsize" and body["aging_minutes"] == 30
    assert body["default_duration"] == 120 and body["aging_cap"] == 20
    assert body["version"] == 1 and body["updated_by"] == "sam"
    change = SchedulerSettingsChange.objects.get()
    assert change.reason == "the nightly suites starve"
    assert change.changes == {
        "ordering": ["fifo", "dynsize"],
        "aging_minutes": [0, 30],
        "default_duration": [600, 120],
    }


def test_a_tester_may_not_change_them(alice_client):
    response = alice_client.patch(URL, {"ordering": "size"}, format="json")
    assert response.status_code == 403
    assert unchanged()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"ordering": "random"}, "ordering"),
        ({"aging_cap": -1}, "aging_cap"),
        ({"aging_cap": 101}, "aging_cap"),
        ({"aging_minutes": "5"}, "aging_minutes"),  # JSON says what it means: a string is not 5
        ({"host_choice": "nearest"}, "host_choice"),
        ({"default_duration": 0}, "default_duration"),
        ({"same_build_first_minutes": -1}, "same_build_first_minutes"),
        ({"same_build_first_minutes": 10081}, "same_build_first_minutes"),
        ({"same_build_first_minutes": True}, "same_build_first_minutes"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_value_or_an_unknown_field_is_a_400_naming_it_and_changes_nothing(
    staff_client, body, field
):
    response = staff_client.patch(URL, {"aging_cap": 50, **body}, format="json")
    assert response.status_code == 400
    assert list(response.json()) == [field] and response.json()[field]
    assert unchanged()


def test_a_stale_version_is_a_409_and_changes_nothing(staff_client, sam):
    services.update_scheduler_settings(sam, host_choice="spread")  # someone else, first
    response = staff_client.patch(URL, {"host_choice": "pack", "version": 0}, format="json")
    assert response.status_code == 409
    assert "changed by someone else" in response.json()["detail"]
    settings = SchedulerSettings.load()
    assert (settings.host_choice, settings.version) == ("spread", 1)


def test_the_history_lists_every_change_newest_first_in_pages(alice_client, sam):
    services.update_scheduler_settings(sam, ordering="size", reason="try size")
    services.update_scheduler_settings(sam, aging_minutes=10)
    response = alice_client.get(f"{URL}history/?page_size=1")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2 and body["next"]
    (latest,) = body["results"]
    assert latest["actor"] == "sam" and latest["version"] == 2
    assert latest["changes"] == {"aging_minutes": [0, 10]} and latest["reason"] == ""
    older = alice_client.get(body["next"]).json()["results"][0]
    assert older["changes"] == {"ordering": ["fifo", "size"]} and older["reason"] == "try size"


def test_the_schema_documents_the_settings_endpoints(anon_client):
    paths = anon_client.get("/api/schema/?format=json").json()["paths"]
    assert set(paths[URL]) >= {"get", "patch"}
    assert "409" in paths[URL]["patch"]["responses"]
    assert "get" in paths[f"{URL}history/"]
