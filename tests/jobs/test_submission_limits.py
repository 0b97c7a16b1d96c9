"""Per-user submission limits: priority, min_duts, queued jobs and submissions per minute."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from jobs import services
from jobs.models import Job, SubmitLimit, Suite
from schedsite.errors import InvalidInput, LimitExceeded
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import signed_in
from tests.threads import race

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def board_x(db) -> None:  # noqa: ANN001
    """A host the submissions below could run on: a job no host could run is refused."""
    f.host("x1", ["board:x"])


def one_job(name: str = "t") -> list[services.JobSpec]:
    return [services.JobSpec(name=name, labels=["board:x"])]


def submit(owner: object, *, jobs: int = 1, now: object = None, **kwargs: object) -> Suite:
    specs = [services.JobSpec(name=f"t{i}", labels=["board:x"]) for i in range(jobs)]
    return services.suite_submit(owner=owner, name="S", jobs=specs, now=now, **kwargs)


# --- priority and min_duts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "most"),
    [("priority", 70), ("min_duts", 4)],
    ids=["up to cq priority", "up to four min_duts"],
)
def test_a_tester_may_submit_up_to_the_limit_but_not_above(alice, field, most):
    assert getattr(submit(alice, jobs=5, **{field: most}), field) == most
    with pytest.raises(InvalidInput) as refused:
        submit(alice, jobs=5, **{field: most + 1})
    assert refused.value.field == field
    assert f"at most {most}" in refused.value.message
    assert Suite.objects.count() == 1


def test_a_job_that_raises_its_own_priority_above_the_limit_is_refused_at_its_index(alice):
    specs = [*one_job("a"), services.JobSpec(name="b", labels=["board:x"], priority=100)]
    with pytest.raises(InvalidInput) as refused:
        services.suite_submit(owner=alice, name="S", jobs=specs, priority=40)
    assert refused.value.field == "jobs[1].priority"
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_a_standalone_job_above_the_priority_limit_is_refused(alice):
    spec = services.JobSpec(name="solo", labels=["board:x"], priority=90)
    with pytest.raises(InvalidInput) as refused:
        services.job_submit(owner=alice, spec=spec)
    assert refused.value.field == "priority"
    assert not Job.objects.exists()


def test_lab_staff_are_not_limited(sam, django_user_model):
    assert submit(sam, jobs=50, priority=100, min_duts=50).priority == 100
    staff_group, _ = Group.objects.get_or_create(name="lab-staff")
    lead = django_user_model.objects.create_user("lead")
    lead.groups.add(staff_group)
    assert submit(lead, priority=100).priority == 100


def test_a_group_grant_raises_the_limits_and_the_most_generous_grant_wins(alice, bob):
    release = Group.objects.create(name="release-team")
    perf = Group.objects.create(name="perf")
    SubmitLimit.objects.create(group=release, max_priority=80)
    SubmitLimit.objects.create(group=perf, max_priority=75, max_min_duts=10)
    alice.groups.add(release, perf)

    suite = submit(alice, jobs=10, priority=80, min_duts=10)
    assert (suite.priority, suite.min_duts) == (80, 10)
    with pytest.raises(InvalidInput):
        submit(alice, priority=90)
    with pytest.raises(InvalidInput):  # bob is in no group: the defaults
        submit(bob, priority=80)


def test_system_actors_such_as_scripts_are_not_limited():
    assert submit("import-script", jobs=20, priority=100, min_duts=20).priority == 100


# --- queued jobs ----------------------------------------------------------------------------


def test_a_suite_that_would_exceed_the_queued_jobs_limit_is_refused_whole(alice, settings):
    settings.SUBMIT_MAX_QUEUED_JOBS = 5
    submit(alice, jobs=3)
    with pytest.raises(InvalidInput) as refused:
        submit(alice, jobs=3)
    assert refused.value.field == "jobs"
    assert refused.value.message == (
        "you have 3 queued jobs and may have at most 5: this submission of 3 jobs would exceed it"
    )
    assert Job.objects.count() == 3 and Suite.objects.count() == 1
    assert submit(alice, jobs=2).jobs.count() == 2  # exactly up to the limit


def test_only_queued_jobs_count_and_only_the_users_own(alice, bob, settings):
    settings.SUBMIT_MAX_QUEUED_JOBS = 2
    first = submit(alice, jobs=2)
    services.suite_abort(suite=first, by=alice)
    submit(bob, jobs=2)
    assert submit(alice, jobs=2).jobs.count() == 2


# --- submissions per minute -----------------------------------------------------------------


def test_a_submission_past_the_rate_limit_is_refused_until_the_minute_has_passed(alice, settings):
    settings.SUBMIT_RATE_PER_MINUTE = 3
    start = timezone.now()
    for second in (0, 10, 20):
        submit(alice, now=start + timedelta(seconds=second))
    with pytest.raises(LimitExceeded) as refused:
        services.job_submit(owner=alice, spec=one_job()[0], now=start + timedelta(seconds=30))
    assert refused.value.status_code == 429
    assert refused.value.retry_after == 30  # when the first of the three is a minute old
    assert "3 submissions in the last minute" in refused.value.message
    assert Suite.objects.count() == 3 and Job.objects.count() == 3
    submit(alice, now=start + timedelta(seconds=61))
    assert Suite.objects.count() == 4


# --- the API and the UI give the same answers -----------------------------------------------


def test_the_api_answers_400_for_priority_and_429_with_retry_after_for_the_rate(alice, settings):
    settings.SUBMIT_RATE_PER_MINUTE = 1
    client = token_client(alice)
    payload = {"name": "S", "priority": "super", "jobs": [{"name": "t", "labels": ["board:x"]}]}
    response = client.post("/api/suites/", payload)
    assert response.status_code == 400
    assert response.json() == {
        "priority": ["priority 80 is above your limit: you may submit at most 70 (cq)"]
    }
    assert client.post("/api/suites/", {**payload, "priority": "cq"}).status_code == 201
    response = client.post("/api/jobs/", {"name": "solo", "labels": ["board:x"]})
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "at most 1 per minute" in response.json()["detail"]
    assert Job.objects.count() == 1


def submit_form(name: str, priority: int) -> dict:
    """The submit form as a browser posts it: one job."""
    return {
        "name": name,
        "priority": str(priority),
        "min_duts": "0",
        "max_retries": "0",
        "mode": "jobs",
        "job_name": ["t"],
        "job_labels": ["board:x"],
        "job_host": [""],
    }


def test_the_submit_form_shows_the_limit_next_to_the_priority(alice):
    response = signed_in(alice).post("/suites/new/", submit_form("S", 80))
    assert response.status_code == 400
    assert "Priority 80 is above your limit: you may submit at most 70 (cq)" in (
        response.content.decode()
    )
    assert not Suite.objects.exists()


def test_the_submit_form_answers_429_with_retry_after_past_the_rate(alice, settings):
    settings.SUBMIT_RATE_PER_MINUTE = 1
    submit(alice)
    response = signed_in(alice).post("/suites/new/", submit_form("S2", 40))
    assert response.status_code == 429
    assert int(response["Retry-After"]) >= 1
    assert "at most 1 per minute" in response.content.decode()
    assert Suite.objects.count() == 1


# --- races ----------------------------------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_fifty_concurrent_submits_never_overshoot_the_queued_jobs_limit(
    django_user_model, settings
):
    settings.SUBMIT_MAX_QUEUED_JOBS = 10
    settings.SUBMIT_RATE_PER_MINUTE = 1000
    alice = django_user_model.objects.create_user("alice")
    results = race(*[lambda: submit(alice)] * 50)
    outcomes = [
        "created" if isinstance(r, Suite) else "refused" if isinstance(r, InvalidInput) else repr(r)
        for r in results
    ]
    assert sorted(set(outcomes)) == ["created", "refused"], outcomes
    assert outcomes.count("created") == 10
    assert Job.objects.filter(owner=alice, status="queued").count() == 10
