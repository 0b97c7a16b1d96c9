"""A suite written back as its submit body submits the same suite again."""

from __future__ import annotations

import pytest

from hosts.models import Host
from jobs import services
from jobs.api.submit_serializers import SuiteCreateInputSerializer, submit_suite
from jobs.models import Suite
from jobs.suite_body import suite_body
from tests import factories as f

pytestmark = pytest.mark.django_db


def resubmit(body: dict, owner: object = "bob") -> Suite:
    serializer = SuiteCreateInputSerializer(data=body)
    assert serializer.is_valid(), serializer.errors
    return submit_suite(owner, serializer.validated_data)


def test_a_suite_submitted_from_its_body_has_the_same_jobs_and_settings(django_user_model):
    bob = django_user_model.objects.create_user("bob")
    w = f.worker()
    f.host("dut1", ["board:x", "pool:cq"], worker=w)
    original = f.varied_suite("alice", pinned=Host.objects.get(), min_duts=2, max_duts=3)

    again = resubmit(suite_body(original), bob)

    assert f.job_rows(again) == f.job_rows(original)
    assert (again.name, again.build, again.priority, again.min_duts, again.max_duts) == (
        "nightly",
        "R120-1",
        60,
        2,
        3,
    )
    assert again.expires_after == 600
    assert again.owner == bob


def test_some_jobs_of_a_suite_make_a_smaller_suite_with_a_quota_it_can_meet():
    original = f.suite("cq", 3, min_duts=3)
    first = original.jobs.order_by("id").first()

    body = suite_body(original, [first])

    assert [j["name"] for j in body["jobs"]] == [first.name]
    assert body["min_duts"] == 1
    assert f.job_rows(resubmit({**body, "allow_unmatched": True}))[0][0] == first.name


def test_a_fanout_suite_stays_a_fanout_and_a_part_of_it_is_pinned_to_its_hosts():
    w = f.worker()
    for name in ("dut1", "dut2"):
        f.host(name, ["board:eve"], worker=w)
    original = services.suite_submit(
        owner="alice", name="smoke", fanout_labels=["board:eve"], fanout_name="boot"
    )

    body = suite_body(original)
    assert body["fanout"] == {"labels": ["board:eve"], "name": "boot"}
    assert "jobs" not in body
    assert sorted(j[0] for j in f.job_rows(resubmit(body))) == ["boot@dut1", "boot@dut2"]

    one = original.jobs.get(name="boot@dut2")
    part = suite_body(original, [one])
    assert part["jobs"] == [{"name": "boot@dut2", "labels": ["board:eve"], "host": "dut2"}]
