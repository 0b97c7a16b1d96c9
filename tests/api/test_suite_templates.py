"""/api/suite-templates/: save, change, delete, dispatch with a build, and the cron schedule."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from hosts.choices import HostStatus
from hosts.models import HostEvent
from jobs import services as job_services
from jobs import suite_templates
from jobs.choices import SuiteOrigin
from jobs.models import Job, Suite, SuiteTemplate, TemplateRun
from tests import factories as f

pytestmark = pytest.mark.django_db


def runs():  # noqa: ANN201 - the templates' schedules, not the tick's safety net
    return Schedule.objects.filter(func="jobs.tasks.run_template")


BODY = {
    "name": "bvt-inline",
    "build": "R120-1",
    "priority": "daily",
    "jobs": [
        {"name": "login_Smoke", "labels": ["board:eve"]},
        {"name": "power_Resume", "labels": ["board:eve"], "max_retries": 1},
    ],
}


def create(client, **fields: object):  # noqa: ANN001, ANN201
    return client.post("/api/suite-templates/", {"name": "bvt", "body": BODY, **fields})


def test_a_tester_saves_a_template_and_everyone_reads_it(alice_client, bob_client, eve):
    response = create(alice_client)

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["name"], body["owner"], body["cron"]) == ("bvt", "alice", "")
    assert body["enabled"] is True
    assert body["body"] == BODY and body["next_run"] is None and body["last_run"] is None
    assert body["dispatch_parameters"] == ["build", "priority"]
    listed = bob_client.get("/api/suite-templates/").json()["results"]
    assert [t["name"] for t in listed] == ["bvt"]
    event = HostEvent.objects.get(subject="suite template bvt")
    assert (event.kind, event.actor) == ("created", "alice")


@pytest.mark.parametrize(
    ("fields", "field", "says"),
    [
        ({"cron": "0 25 * * *"}, "cron", "not a cron expression"),
        ({"cron": "0 2 * * * *"}, "cron", "five fields"),
        ({"cron": "0 0 31 2 *"}, "cron", "never fires"),
        ({"cron": "0 0 30 2 *"}, "cron", "never fires"),
        ({"cron": "0 0 31 4 *"}, "cron", "never fires"),
        ({"body": {"name": "x", "jobs": []}}, "body", "at least one job"),
        ({"body": {"name": "x", "jobs": [{"name": "a", "host": "nope.lab"}]}}, "body", "nope.lab"),
        ({"body": ["not", "an", "object"]}, "body", "JSON object"),
    ],
)
def test_a_bad_cron_or_body_is_a_400_that_saves_nothing(alice_client, eve, fields, field, says):
    response = create(alice_client, **fields)

    assert response.status_code == 400, response.json()
    assert says in str(response.json())
    assert field in response.json()
    assert not SuiteTemplate.objects.exists() and not runs().exists()


def test_a_second_template_of_the_same_name_is_a_409(alice_client, bob_client, eve):
    assert create(alice_client).status_code == 201
    assert create(alice_client).status_code == 409
    assert create(bob_client).status_code == 201  # names are per owner
    assert SuiteTemplate.objects.count() == 2


def test_only_the_owner_or_staff_change_delete_or_dispatch(
    alice_client, bob_client, staff_client, eve
):
    pk = create(alice_client).json()["id"]
    url = f"/api/suite-templates/{pk}/"

    assert bob_client.patch(url, {"cron": "0 2 * * *"}).status_code == 403
    assert bob_client.post(f"{url}dispatch/", {"build": "R1"}).status_code == 403
    assert bob_client.delete(url).status_code == 403
    assert staff_client.patch(url, {"enabled": False}).status_code == 200
    assert alice_client.delete(url).status_code == 204
    assert not SuiteTemplate.objects.exists() and not Suite.objects.exists()


def test_dispatch_submits_a_new_suite_with_the_build_linked_to_its_template(alice_client, eve):
    pk = create(alice_client).json()["id"]

    response = alice_client.post(f"/api/suite-templates/{pk}/dispatch/", {"build": "R121-2"})

    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["build"], body["priority"], body["owner"]) == ("R121-2", 20, "alice")
    assert body["status"] == "queued" and body["jobs_total"] == 2
    suite = Suite.objects.get(pk=body["id"])
    assert suite.template_id == pk and suite.origin == SuiteOrigin.DISPATCHED
    assert sorted(Job.objects.filter(suite=suite).values_list("name", flat=True)) == [
        "login_Smoke",
        "power_Resume",
    ]
    template = alice_client.get(f"/api/suite-templates/{pk}/").json()
    assert template["last_run"]["suite"] == suite.pk
    assert template["last_run"]["outcome"] == "created"
    assert template["last_run"]["actor"] == "alice"


def test_dispatch_may_set_the_priority_and_refuses_other_parameters_by_name(alice_client, eve):
    pk = create(alice_client).json()["id"]
    url = f"/api/suite-templates/{pk}/dispatch/"

    refused = alice_client.post(url, {"build": "R1", "min_duts": 2, "jobs": []})
    assert refused.status_code == 400
    assert "Unknown parameters: jobs, min_duts" in str(refused.json())
    assert not Suite.objects.exists()

    ok = alice_client.post(url, {"priority": "weekly"})
    assert ok.status_code == 201 and ok.json()["priority"] == 10
    assert ok.json()["build"] == "R120-1"  # the template's own


def test_a_body_that_no_longer_runs_is_refused_with_the_reason_and_creates_nothing(
    alice_client, sam, eve
):
    body = {"name": "pinned", "jobs": [{"name": "t", "labels": ["board:eve"], "host": "eve1.lab"}]}
    pk = create(alice_client, body=body).json()["id"]
    job_services.host_set_status(host=eve, status=HostStatus.RETIRED, by=sam, message="dead")

    response = alice_client.post(f"/api/suite-templates/{pk}/dispatch/", {"build": "R2"})

    assert response.status_code == 400
    assert "eve1.lab is retired" in str(response.json())
    assert not Suite.objects.exists() and not TemplateRun.objects.exists()


def test_a_suite_is_saved_as_a_template_from_its_id(alice_client, bob_client, alice, eve):
    suite = f.suite("nightly", [["board:eve"], ["board:eve"]], owner=alice)

    assert bob_client.post("/api/suite-templates/", {"from_suite": suite.pk}).status_code == 403
    response = alice_client.post(
        "/api/suite-templates/", {"from_suite": suite.pk, "name": "nightly eve"}
    )

    assert response.status_code == 201, response.json()
    body = response.json()["body"]
    assert body["name"] == "nightly" and len(body["jobs"]) == 2
    assert {j["labels"][0] for j in body["jobs"]} == {"board:eve"}


def test_create_takes_a_body_or_a_suite_not_both(alice_client, alice, eve):
    suite = f.suite("s", [["board:eve"]], owner=alice)
    both = {"name": "x", "body": BODY, "from_suite": suite.pk}
    assert alice_client.post("/api/suite-templates/", both).status_code == 400
    assert alice_client.post("/api/suite-templates/", {"name": "x"}).status_code == 400
    missing = alice_client.post("/api/suite-templates/", {"from_suite": suite.pk + 1})
    assert missing.status_code == 400
    assert missing.json()["from_suite"] == [f"No suite {suite.pk + 1}."]
    assert not SuiteTemplate.objects.exists()


def test_the_schedule_follows_the_cron_enabled_and_delete(alice_client, eve):
    pk = create(alice_client, cron="0 2 * * *").json()["id"]
    url = f"/api/suite-templates/{pk}/"
    schedule = runs().get()
    assert (schedule.schedule_type, schedule.cron, schedule.func) == (
        Schedule.CRON,
        "0 2 * * *",
        "jobs.tasks.run_template",
    )
    assert schedule.args == repr(pk) and schedule.intended_date_kwarg == "slot"
    assert (schedule.next_run.hour, schedule.next_run.minute) == (2, 0)
    shown = alice_client.get(url).json()
    assert shown["cron_description"] == "At 02:00"
    assert shown["next_run"] is not None

    alice_client.patch(url, {"cron": "30 4 * * 1"})
    schedule = runs().get()
    assert schedule.cron == "30 4 * * 1" and schedule.next_run.weekday() == 0

    alice_client.patch(url, {"enabled": False})
    assert not runs().exists()
    alice_client.patch(url, {"enabled": True})
    assert runs().count() == 1
    alice_client.patch(url, {"cron": ""})
    assert not runs().exists()
    alice_client.patch(url, {"cron": "@daily"})
    assert alice_client.delete(url).status_code == 204
    assert not runs().exists()


def test_runs_lists_every_run_newest_first_with_its_suites_status(alice_client, alice, eve):
    pk = create(alice_client, cron="0 2 * * *").json()["id"]
    template = SuiteTemplate.objects.get(pk=pk)
    suite_templates.template_run(template_id=pk, slot=datetime(2026, 11, 23, 2, tzinfo=UTC))
    suite_templates.template_run(template_id=pk, slot=datetime(2026, 11, 24, 2, tzinfo=UTC))

    runs = alice_client.get(f"/api/suite-templates/{pk}/runs/").json()["results"]

    assert [r["outcome"] for r in runs] == ["skipped", "created"]
    assert runs[1]["suite_status"] == "queued" and runs[1]["actor"] == "scheduler"
    assert "is unfinished" in runs[0]["reason"] and runs[0]["suite"] is None
    assert template.runs.count() == 1


def test_the_list_makes_as_many_queries_for_2_templates_as_for_12(
    alice_client, alice, eve, django_assert_max_num_queries
):
    f.templates_run_once(2, owner=alice, body=BODY)
    with CaptureQueriesContext(connection) as few:
        assert alice_client.get("/api/suite-templates/").status_code == 200
    f.templates_run_once(10, owner=alice, body=BODY)
    with django_assert_max_num_queries(len(few.captured_queries)):
        body = alice_client.get("/api/suite-templates/").json()
    assert body["count"] == 12 and all(t["last_run"]["suite_status"] for t in body["results"])
