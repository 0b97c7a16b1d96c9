"""A job reads as DRF's walk over JobSerializer's fields would read it, field for field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from jobs import selectors, services
from jobs.api.serializers import JobSerializer
from jobs.api.views import JobViewSet
from jobs.choices import JobStatus
from jobs.models import Job
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def every_kind_of_job(lab, sam):  # noqa: ANN001, ANN201
    """Beside the lab's running, leased and queued jobs: a finished one, a maintenance job
    pinned to its host, one with every optional field set, one whose owner is gone."""
    services.job_complete(job=lab.running, result=JobStatus.PASSED, by="runner-1")
    services.host_verify_now(host=lab.free, by=sam)
    services.job_submit(
        owner=sam,
        spec=services.JobSpec(
            name="all <set>",
            labels=["board:none"],
            priority=70,
            max_retries=2,
            timeout=timedelta(minutes=5),
            estimated_duration=timedelta(seconds=90.6),
            expires_after=600,
            preemptible=True,
        ),
        allow_unmatched=True,
    )
    Job.objects.filter(name="all <set>").update(
        not_before=timezone.now() + timedelta(minutes=1), attempts=1, message="retry <1>"
    )
    Job.objects.filter(pk=lab.queued.pk).update(owner=None)
    f.job("after the tick", ["board:none"])


def test_each_field_is_what_drf_would_give(every_kind_of_job):
    request = Request(APIRequestFactory().get("/api/jobs/"))
    jobs = list(JobViewSet().get_queryset().order_by("id"))
    context = {"request": request, "wait_reasons": selectors.wait_reasons_for(jobs)}
    serializer = JobSerializer(context=context)
    for job in jobs:
        walked = serializers.ModelSerializer.to_representation(serializer, job)
        made = serializer.to_representation(job)
        assert list(made.items()) == list(walked.items()), job.name
    kinds = {(job.kind, job.status, job.host_id is not None) for job in jobs}
    assert ("verify", "queued", True) in kinds and ("test", "passed", False) in kinds
