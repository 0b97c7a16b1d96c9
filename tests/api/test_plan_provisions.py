"""The what-if preview says how many of the leases it plans would provision their host first."""

from __future__ import annotations

import pytest

from jobs.models import Job, Suite
from tests import factories as f

pytestmark = pytest.mark.django_db

PLAN = "/api/scheduler/plan/"


def test_a_suite_preview_says_how_many_would_start_after_a_reimage(alice_client) -> None:
    for i in range(4):
        f.host(f"x{i}", ["board:x"], build="R121" if i < 2 else "R120")
    body = {
        "name": "nightly",
        "build": "R121",
        "jobs": [{"name": f"t{i}", "labels": ["board:x"]} for i in range(3)],
    }

    answer = alice_client.post(PLAN, {"suite": body}, format="json").json()

    # Two hosts carry R121 already: the third job's host is reimaged first.
    assert answer["summary"] == (
        "3 of your 3 jobs would start now, 1 of them after a reimage to R121."
    )
    assert answer["counts"]["provisions"] == 1
    assert sorted(row.get("provision_to", "") for row in answer["leases"]) == ["", "", "R121"]
    assert Suite.objects.count() == 0


def test_a_preview_names_no_reimage_when_the_hosts_carry_the_build(alice_client) -> None:
    f.host("x0", ["board:x"], build="R121")
    body = {"name": "n", "build": "R121", "jobs": [{"name": "t", "labels": ["board:x"]}]}

    answer = alice_client.post(PLAN, {"suite": body}, format="json").json()

    assert answer["summary"] == "1 of your 1 job would start now."
    assert answer["counts"]["provisions"] == 0
    assert "provision_to" not in answer["leases"][0]


def test_a_preview_of_a_standalone_job_reads_its_own_build(staff_client) -> None:
    f.host("x0", ["board:x"], build="R120")
    alone = f.job("alone")
    Job.objects.filter(pk=alone.pk).update(build="R121")

    answer = staff_client.post(
        PLAN, {"lock_hosts": [], "settings": {"ordering": "size"}}, format="json"
    ).json()

    assert answer["leases"] == [
        {"job": alone.pk, "new_job": None, "name": "alone", "host": "x0", "provision_to": "R121"}
    ]


def test_a_what_if_with_same_build_first_shows_the_later_suite_taking_the_host(staff_client):
    """The proposed setting changes which job of a priority gets the free host: the what-if
    plans it as the tick would, and changes nothing."""
    f.host("x0", ["board:x"], build="R1")
    f.suite("a", 1, labels=["board:x"], build="R2")
    b = f.suite("b", 1, labels=["board:x"], build="R1")

    now = staff_client.post(
        PLAN, {"settings": {"same_build_first_minutes": 0}}, format="json"
    ).json()
    proposed = staff_client.post(
        PLAN, {"settings": {"same_build_first_minutes": 30}}, format="json"
    ).json()

    assert [row["name"] for row in now["leases"]] == ["a-t0"]
    assert now["leases"][0]["provision_to"] == "R2"
    assert proposed["leases"] == [
        {"job": b.jobs.get().pk, "new_job": None, "name": "b-t0", "host": "x0"}
    ]
    bad = staff_client.post(PLAN, {"settings": {"same_build_first_minutes": -5}}, format="json")
    assert bad.status_code == 400 and "same_build_first_minutes" in bad.json()["settings"]
