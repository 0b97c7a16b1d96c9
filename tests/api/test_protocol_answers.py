"""The runner protocol answers what the job's own page says, byte for byte, however it is built.

`start` and `complete` answer from the lease as read once, compiled once per process
(schedsite.prepared), and a serializer whose fields are built once (schedsite.api_serializers):
neither may change a byte of the answer scripts read.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.db import connections, transaction
from django.db.models import F
from django.db.models.sql.compiler import SQLUpdateCompiler
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from jobs.api.serializers import JobSerializer, ProtocolActiveLeaseSerializer, ProtocolJobSerializer
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from schedsite.api_serializers import FieldsBuiltOnce
from schedsite.prepared import PreparedQuery, PreparedUpdate, update_one
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def test_start_and_complete_answer_what_the_jobs_page_says(runner_client, lab):
    job, lease = lab.leased, active_lease(lab.leased)
    for step, body in (("start", {}), ("complete", {"result": "failed", "message": "boom"})):
        answer = runner_client.post(
            f"/api/jobs/{job.pk}/{step}/", {"lease": lease.pk, **body}, format="json"
        )
        page = runner_client.get(f"/api/jobs/{job.pk}/")
        assert answer.status_code == page.status_code == 200, answer.content
        assert answer.content == page.content
    assert answer.json()["status"] == "failed" and answer.json()["lease"] is None


def test_a_started_job_answers_with_its_lease(runner_client, lab):
    job, lease = lab.leased, active_lease(lab.leased)
    answer = runner_client.post(f"/api/jobs/{job.pk}/start/", {"lease": lease.pk}, format="json")
    body = answer.json()
    assert (body["status"], body["lease"]["id"], body["suite_name"]) == ("running", lease.pk, "S")
    assert body["owner"] == "alice" and body["lease"]["host"] == lease.host.hostname


def test_each_answer_binds_fields_of_its_own(lab):
    first = ProtocolJobSerializer(lab.leased, context={"request": None})
    second = ProtocolJobSerializer(lab.running, context={"request": None})
    for name in ("name", "labels", "wait_reason"):
        assert first.fields[name] is not second.fields[name]
        assert first.fields[name].parent is first and second.fields[name].parent is second
    assert list(first.fields) == list(JobSerializer(lab.leased).fields)


def test_the_answers_lease_is_what_drfs_walk_gives(lab):
    # A started job's lease (heartbeat, no build), a leased one that must provision first, and
    # a manual reservation (no job, a holder): each field as ActiveLeaseSerializer's walk has it.
    Lease.objects.filter(job=lab.leased).update(provision_to="R120-1")
    request = Request(APIRequestFactory().post("/api/jobs/1/start/"))
    serializer = ProtocolActiveLeaseSerializer(context={"request": request})
    leases = Lease.objects.filter(released_at=None).select_related("host", "job", "holder")
    shown = set()
    for lease in leases:
        walked = serializers.ModelSerializer.to_representation(serializer, lease)
        made = serializer.to_representation(lease)
        assert made == walked and list(made) == list(walked), lease.pk
        shown.add((made["kind"], made["heartbeat_at"] is None, made["provision_to"]))
    assert {("test", False, None), ("test", True, "R120-1"), ("reservation", True, None)} <= shown


def test_a_nested_serializer_is_not_built_once():
    class Nested(serializers.Serializer):
        x = serializers.IntegerField()

    class Outer(FieldsBuiltOnce, serializers.Serializer):
        inner = Nested()

    with pytest.raises(TypeError, match="nested serializer"):
        Outer().fields  # noqa: B018 — building them is the point


def test_a_prepared_query_runs_with_each_value_and_finds_nothing_out_of_range(lab):
    by_id = PreparedQuery(lambda pk: Job.objects.select_related("suite").filter(pk=pk), int)
    found = [by_id.first(job.pk) for job in (lab.running, lab.leased, lab.queued)]
    assert [job.name for job in found] == [lab.running.name, lab.leased.name, lab.queued.name]
    assert found[0].suite.name == "S" and found[2].suite is None
    assert by_id.first(2**70) is None and by_id.first(-1) is None


@pytest.mark.postgres
def test_a_prepared_query_runs_on_the_connection_the_thread_has_now():
    # The thread's connection replaced after the query was prepared (as a test or a server
    # thread may): the query runs inside the current connection's transaction and sees its
    # writes; on the old connection it would not.
    by_name = PreparedQuery(lambda name: Job.objects.filter(name=name), str)
    assert by_name.all("prepared-on-the-old-connection") == []
    old = connections["default"]
    new = connections.create_connection("default")
    connections["default"] = new
    try:
        with transaction.atomic():
            job = Job.objects.create(name="seen-in-this-transaction")
            assert [j.pk for j in by_name.all("seen-in-this-transaction")] == [job.pk]
            transaction.set_rollback(True)
    finally:
        connections["default"] = old
        new.close()


def test_a_prepared_value_must_be_one_parameter(lab):
    twice = PreparedQuery(lambda pk: Job.objects.filter(pk=pk) | Job.objects.filter(id=pk), int)
    with pytest.raises(ValueError, match="one parameter"):
        twice.first(lab.running.pk)
    with pytest.raises(TypeError):
        PreparedQuery(lambda pk: Job.objects.filter(pk=pk), int).first("1")


def test_a_job_id_past_bigint_is_a_404_not_a_500(runner_client, lab):
    lease = active_lease(lab.leased)
    answer = runner_client.post(f"/api/jobs/{2**64}/start/", {"lease": lease.pk}, format="json")
    assert answer.status_code == 404


@pytest.mark.postgres
def test_a_prepared_update_is_a_compare_and_set_compiled_once(lab, monkeypatch):
    compiles = []
    compile_update = SQLUpdateCompiler.as_sql
    monkeypatch.setattr(
        SQLUpdateCompiler, "as_sql", lambda self: compiles.append(1) or compile_update(self)
    )
    leased = PreparedUpdate(
        lambda pk, message, at: (
            Job.objects.filter(pk=pk, status="leased"),
            {"message": message, "started_at": at},
        ),
        int,
        str,
        datetime,
    )
    at = timezone.now()
    assert leased.run(lab.leased.pk, "first", at) == 1
    assert leased.run(lab.running.pk, "not leased", at) == 0  # the compare-and-set
    assert leased.run(lab.leased.pk, "second", at + timedelta(seconds=1)) == 1
    assert len(compiles) == 1
    assert leased.run(2**70, "past bigint: built as Django builds it", at) == 0
    job = Job.objects.get(pk=lab.leased.pk)
    assert (job.message, job.started_at) == ("second", at + timedelta(seconds=1))
    assert Job.objects.get(pk=lab.running.pk).message != "not leased"


def test_update_one_sends_a_choice_as_its_text_and_builds_what_it_cannot_prepare(lab):
    rows = Job.objects.all
    assert update_one("job-test", rows, lab.queued.pk, {"status": JobStatus.ABORTED}) == 1
    assert Job.objects.filter(pk=lab.queued.pk, status="aborted").exists()
    assert update_one("job-test", rows, lab.queued.pk, {"not_before": None}) == 1
    assert update_one("job-test", rows, lab.queued.pk, {"attempts": F("attempts") + 2}) == 1
    assert Job.objects.get(pk=lab.queued.pk).attempts == lab.queued.attempts + 2


@pytest.mark.postgres
def test_a_runners_complete_compiles_no_update_after_the_first(runner_client, lab, monkeypatch):
    compiles = []
    compile_update = SQLUpdateCompiler.as_sql
    monkeypatch.setattr(
        SQLUpdateCompiler, "as_sql", lambda self: compiles.append(1) or compile_update(self)
    )
    first, second = (active_lease(job) for job in (lab.running, lab.leased))
    steps = [
        ("complete", lab.running, first, {"result": "passed"}),
        ("start", lab.leased, second, {}),
        ("complete", lab.leased, second, {"result": "passed"}),
    ]
    for step, job, lease, body in steps:
        compiles.clear()
        answer = runner_client.post(
            f"/api/jobs/{job.pk}/{step}/", {"lease": lease.pk, **body}, format="json"
        )
        assert answer.status_code == 200, answer.content
    assert compiles == []  # the job's move and the lease's release, as the first complete's
    assert Job.objects.get(pk=lab.leased.pk).status == "passed"
    assert Lease.objects.get(pk=second.pk).release_reason == "completed"
