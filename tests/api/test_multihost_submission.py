"""Submitting multi-host jobs: roles, together_by and allow_unmatched, as a tester sends them."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from jobs import services as job_services
from jobs.models import Job, Suite, SuiteTemplate
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab() -> None:
    """Chamber a: two eve DUTs with Bluetooth and an AP; chamber b: one eve DUT and a phone;
    h9 (retired) in chamber c with an AP; h0 carries no label."""
    f.host("a1", ["board:eve", "bt", "chamber:a"])
    f.host("a2", ["board:eve", "bt", "chamber:a"])
    f.host("a3", ["ap", "chamber:a"])
    f.host("b1", ["board:eve", "bt", "chamber:b"])
    f.host("b2", ["phone", "chamber:b"])
    f.host("h0")
    old = f.host("h9", ["ap", "chamber:c", "board:old"])
    job_services.host_delete(host=old, by="sam")


def role(name: str, *labels: str, **more: object) -> dict:
    return {"name": name, "labels": list(labels), **more}


def suite(*jobs: dict, **fields: object) -> dict:
    return {"name": "S", "jobs": list(jobs), **fields}


def submit(client, *jobs: dict, **fields: object):  # noqa: ANN001, ANN201
    return client.post("/api/suites/", suite(*jobs, **fields), format="json")


def error_at(errors: dict, field: str) -> list[str]:
    """The messages for `field` (jobs[0].roles[1].name): a service names it flat, a serializer
    nests it ({"jobs": {"0": {"roles": {"1": {"name": [...]}}}}})."""
    if field in errors:
        return errors[field]
    here: object = errors
    for part in re.findall(r"[^.\[\]]+", field):
        assert isinstance(here, dict) and part in here, (field, errors)
        here = here[part]
    if isinstance(here, dict):
        here = here["non_field_errors"]
    return here  # type: ignore[return-value]


def refused(response, field: str) -> str:  # noqa: ANN001
    assert response.status_code == 400, response.json()
    (message,) = error_at(response.json(), field)
    assert not Suite.objects.exists() and not Job.objects.exists()
    return message


def test_roles_are_stored_normalized_and_the_jobs_labels_stay_the_jobs(alice_client, lab):
    job = {
        "name": "bt_Pair",
        "labels": ["chamber:a"],
        "roles": [role("dut", "bt", "bt", count=2, max=2), role("peer", "ap")],
        "together_by": "chamber",
    }
    plain = {"name": "login", "labels": ["board:eve"]}

    response = submit(alice_client, job, plain)

    assert response.status_code == 201, response.json()
    pair, one = Job.objects.order_by("id")
    assert pair.roles == [
        {"name": "dut", "labels": ["bt"], "count": 2, "max": 2},
        {"name": "peer", "labels": ["ap"], "count": 1, "max": 1},
    ]
    assert pair.together_by == "chamber" and pair.labels == ["chamber:a"]
    assert (one.roles, one.together_by) == ([], "")


def test_max_defaults_to_count_and_may_ask_for_more(alice_client, lab):
    job = {"name": "t", "roles": [role("dut", "bt", count=1, max=3), role("ap", "ap")]}

    assert submit(alice_client, job).status_code == 201
    assert [(r["count"], r["max"]) for r in Job.objects.get().roles] == [(1, 3), (1, 1)]


def test_a_standalone_job_takes_roles_too(alice_client, lab):
    body = {"name": "t", "roles": [role("client", "bt"), role("server", "ap")]}

    response = alice_client.post("/api/jobs/", body, format="json")

    assert response.status_code == 201, response.json()
    assert [r["name"] for r in Job.objects.get().roles] == ["client", "server"]


@pytest.mark.parametrize(
    ("job", "field", "says"),
    [
        ({"roles": [{"labels": ["bt"]}]}, "jobs[0].roles[0].name", "required"),
        ({"roles": [role("dut"), role("dut")]}, "jobs[0].roles[1].name", "role dut is named twice"),
        ({"roles": [role("my dut")]}, "jobs[0].roles[0].name", "not a role name"),
        ({"roles": [role("dut", count=0)]}, "jobs[0].roles[0].count", "greater than or equal"),
        ({"roles": [role("dut", count=2, max=1)]}, "jobs[0].roles[0].max", "at least its count"),
        (
            {"roles": [role("a", count=8, max=9), role("b", count=8)]},
            "jobs[0].roles",
            "at most 16 hosts; these roles ask for up to 17",
        ),
        ({"roles": [role(f"r{k}") for k in range(9)]}, "jobs[0].roles", "no more than 8"),
        ({"roles": [role("dut", "no spaces")]}, "jobs[0].roles[0].labels", "no spaces"),
        ({"roles": [{**role("dut"), "cnt": 2}]}, "jobs[0].roles[0].cnt", "Unknown field"),
        ({"together_by": "chamber"}, "jobs[0].together_by", "give roles too"),
        (
            {"roles": [role("dut")], "together_by": "chamber:a"},
            "jobs[0].together_by",
            "not a label prefix",
        ),
        ({"roles": [role("dut")], "host": "a1"}, "jobs[0].roles", "give roles or a host"),
    ],
    ids=[
        "no name",
        "same name twice",
        "bad name",
        "count 0",
        "max below count",
        "over 16 hosts",
        "over 8 roles",
        "bad label",
        "unknown role field",
        "together_by without roles",
        "together_by not a prefix",
        "pinned",
    ],
)
def test_a_malformed_role_is_a_400_naming_it(alice_client, lab, job, field, says):
    message = refused(submit(alice_client, {"name": "t", **job}), field)

    assert says in message


def test_roles_on_a_fanout_suite_are_refused(alice_client, lab):
    body = {"name": "S", "fanout": {"labels": ["bt"], "roles": [role("dut")]}}

    response = alice_client.post("/api/suites/", body, format="json")

    assert response.status_code == 400
    assert "roles" in response.json()["fanout"]
    assert not Suite.objects.exists()


def test_a_job_needing_more_hosts_than_the_suites_max_duts_is_refused(alice_client, lab):
    job = {"name": "t", "roles": [role("dut", "bt", count=2), role("peer", "ap")]}

    message = refused(submit(alice_client, job, max_duts=2), "jobs[0].roles")

    assert "needs 3 hosts at once" in message and "max_duts is 2" in message


def test_min_duts_counts_hosts_so_a_3_host_job_meets_a_quota_of_3(alice_client, lab):
    job = {"name": "t", "roles": [role("dut", "bt", count=2), role("peer", "ap")]}

    assert submit(alice_client, job, min_duts=3, max_duts=3).status_code == 201
    Suite.objects.all().delete()
    message = refused(submit(alice_client, job, min_duts=4), "min_duts")
    assert "1 job needing 3 hosts" in message


@pytest.mark.parametrize(
    ("job", "field", "says"),
    [
        (
            {"roles": [role("dut", "bt"), role("peer", "wifi6")]},
            "jobs[0].roles[1].labels",
            "no host in the lab carries label wifi6 (role peer)",
        ),
        (
            {"roles": [role("dut", "bt", count=4)]},
            "jobs[0].roles[0]",
            "role dut needs 4 hosts carrying bt, and the lab has 3",
        ),
        (
            {"labels": ["board:eve"], "roles": [role("dut"), role("ap", "ap")]},
            "jobs[0].roles[1]",
            "role ap needs 1 host carrying ap, board:eve, and the lab has 0",
        ),
        (
            # a3 is the only AP left: h9, retired, is not counted.
            {"roles": [role("ap", "ap", count=2)]},
            "jobs[0].roles[0]",
            "the lab has 1 (retired hosts aside)",
        ),
        (
            # Three DUTs with bt; each role alone fits, but not on four different hosts.
            {"roles": [role("dut", "bt", count=2), role("ref", "board:eve", count=2)]},
            "jobs[0].roles[0]",
            "roles dut and ref need 4 different hosts between them, and the lab has 3",
        ),
        (
            {"roles": [role("dut", "bt")], "together_by": "rack"},
            "jobs[0].together_by",
            "no host in the lab carries a rack:<value> label",
        ),
        (
            # Two bt DUTs and an AP exist, but chamber a has no phone and chamber b one DUT.
            {
                "roles": [role("dut", "bt", count=2), role("phone", "phone")],
                "together_by": "chamber",
            },
            "jobs[0].roles[1]",
            "the closest, chamber:a, is 1 host short, as role phone needs 1 host",
        ),
    ],
    ids=[
        "unknown role label",
        "too few hosts",
        "job labels apply to every role",
        "retired hosts do not count",
        "roles compete for hosts",
        "no such prefix",
        "no group fits every role",
    ],
)
def test_a_role_no_set_of_hosts_could_serve_is_a_400_naming_it_unless_allowed(
    alice_client, lab, job, field, says
):
    fine = {"name": "ok", "labels": ["board:eve"]}
    body = {"name": "t", **job}

    message = refused(submit(alice_client, fine, body), field.replace("jobs[0]", "jobs[1]"))

    assert says in message and "allow unmatched" in message
    allowed = submit(alice_client, fine, body, allow_unmatched=True)
    assert allowed.status_code == 201, allowed.json()
    assert Job.objects.get(name="t").roles


def test_together_by_finds_the_one_group_that_fits(alice_client, lab):
    job = {
        "name": "t",
        "roles": [role("dut", "bt", count=2), role("ap", "ap")],
        "together_by": "chamber",
    }

    assert submit(alice_client, job).status_code == 201


def test_a_standalone_job_is_refused_naming_the_role_without_a_jobs_prefix(alice_client, lab):
    body = {"name": "t", "roles": [role("dut", "bt", count=5)]}

    response = alice_client.post("/api/jobs/", body, format="json")

    assert response.status_code == 400
    assert "role dut needs 5 hosts" in response.json()["roles[0]"][0]
    ok = alice_client.post("/api/jobs/", {**body, "allow_unmatched": True}, format="json")
    assert ok.status_code == 201


def test_a_clone_and_a_template_carry_the_roles(alice_client, lab):
    job = {
        "name": "t",
        "roles": [role("dut", "bt", count=1, max=2), role("ap", "ap")],
        "together_by": "chamber",
    }
    original = submit(alice_client, job, min_duts=2).json()["id"]

    clone = alice_client.post(f"/api/suites/{original}/clone/")
    saved = alice_client.post(
        "/api/suite-templates/",
        {"name": "pair", "body": suite(job, min_duts=2)},
        format="json",
    )
    dispatched = alice_client.post(f"/api/suite-templates/{saved.json()['id']}/dispatch/", {})

    assert clone.status_code == 201, clone.json()
    assert saved.status_code == 201, saved.json()
    assert dispatched.status_code == 201, dispatched.json()
    for suite_id in (clone.json()["id"], dispatched.json()["id"]):
        copy = Suite.objects.get(pk=suite_id)
        (made,) = copy.jobs.all()
        assert made.roles == Job.objects.get(suite_id=original).roles
        assert made.together_by == "chamber" and copy.min_duts == 2
    assert SuiteTemplate.objects.get().body["jobs"][0]["roles"][0]["max"] == 2


def test_a_rerun_of_a_failed_multi_host_job_asks_for_the_same_hosts(alice_client, lab):
    job = {"name": "t", "roles": [role("dut", "bt", count=2, max=3)], "together_by": "chamber"}
    original = submit(alice_client, job, min_duts=2).json()["id"]
    Job.objects.update(status="failed", finished_at=timezone.now())

    response = alice_client.post(f"/api/suites/{original}/rerun/")

    assert response.status_code == 201, response.json()
    rerun = Suite.objects.get(pk=response.json()["id"])
    (again,) = rerun.jobs.all()
    assert again.roles == [{"name": "dut", "labels": ["bt"], "count": 2, "max": 3}]
    assert again.together_by == "chamber" and rerun.min_duts == 2
