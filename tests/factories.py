"""Small builders for test data: a lab in a few lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, Worker
from jobs import services, suite_templates
from jobs.models import Job, Suite, SuiteTemplate, decode_labels


def signed_in(user: object | None, **kwargs: object) -> Client:
    """A browser client, signed in as the user (or anonymous for None)."""
    client = Client(**kwargs)
    if user is not None:
        client.force_login(user)
    return client


def client_fixture(actor: str | None, sign_in: Callable[[object | None], object]) -> Callable:
    """A fixture: `sign_in(user)` for the user fixture named `actor` (None: nobody)."""

    @pytest.fixture
    def client(request: pytest.FixtureRequest) -> object:
        return sign_in(request.getfixturevalue(actor) if actor else None)

    return client


def worker(name: str = "w1", *, online: bool = True, paused: bool = False) -> Worker:
    w = Worker.objects.create(name=name, last_seen=timezone.now() if online else None)
    if paused:
        host_services.worker_pause(worker=w, by="sam", reason="maintenance")
        w.refresh_from_db()
    return w


def rack() -> Worker:
    """Worker rack-1 with two free hosts, h1 and h2, both board:x."""
    rack_1 = worker("rack-1")
    host("h1", ["board:x"], worker=rack_1)
    host("h2", ["board:x"], worker=rack_1)
    return rack_1


def tick(at: datetime, *workers: Worker) -> services.TickSummary:
    """A tick at `at`, with the runners of `workers` alive (heartbeating) until then."""
    for w in workers:
        host_services.worker_heartbeat(worker=w, at=at)
    return services.scheduler_tick(now=at)


def run(job: Job, result: str, *, host_ok: bool = True, at: datetime | None = None) -> Job:
    """The runner starts the leased job and completes it."""
    services.job_start(job=job, by="runner-1", at=at)
    return services.job_complete(job=job, result=result, by="runner-1", host_ok=host_ok, at=at)


def host(
    hostname: str,
    labels: Sequence[str] = (),
    *,
    worker: Worker | None = None,
    build: str = "",
    **kwargs: object,
) -> Host:
    return host_services.host_create(
        hostname=hostname, labels=labels, worker=worker, by="sam", current_build=build, **kwargs
    )


def suite(
    name: str,
    jobs: Sequence[Sequence[str]] | int,
    *,
    owner: object = "alice",
    labels: Sequence[str] = ("board:x",),
    max_retries: int = 0,
    **options: object,
) -> Suite:
    """A submitted suite: one job per label list, or `jobs` jobs needing `labels`.

    `options` are suite_submit's (priority, min_duts, max_duts, build), with its defaults.
    """
    label_lists = [labels] * jobs if isinstance(jobs, int) else jobs
    specs = [
        services.JobSpec(name=f"{name}-t{i}", labels=job_labels, max_retries=max_retries)
        for i, job_labels in enumerate(label_lists)
    ]
    options.setdefault("allow_unmatched", True)  # tests build labs where no host fits
    return services.suite_submit(owner=owner, name=name, jobs=specs, **options)


def job(
    name: str,
    labels: Sequence[str] = ("board:x",),
    *,
    priority: int = 40,
    host: Host | None = None,
    max_retries: int = 0,
    owner: object = "alice",
) -> Job:
    return services.job_submit(
        owner=owner,
        spec=services.JobSpec(
            name=name, labels=labels, priority=priority, host=host, max_retries=max_retries
        ),
        allow_unmatched=True,
    )


def clonable_suite(owner: object, jobs: Sequence[services.JobSpec], **options: object) -> Suite:
    """Suite "nightly R120" whose every setting the submit form holds, so a clone keeps it whole.

    Build R120-1, priority 70 (a named level), at most 2 hosts; `options` are suite_submit's,
    over those. Give the jobs one retries count and one timeout: the form has one of each.
    """
    settings = {"name": "nightly R120", "build": "R120-1", "priority": 70, "max_duts": 2, **options}
    return services.suite_submit(owner=owner, jobs=jobs, **settings)


def varied_suite(
    owner: object, *, pinned: Host, extra: Sequence[services.JobSpec] = (), **options: object
) -> Suite:
    """Suite "nightly", whose jobs differ in everything a copy of a job must keep.

    boot has retries, wifi its own priority, timeout, estimate and expiry, pinned a host;
    `options` are suite_submit's, over build R120-1, priority 60 and expires_after 600.
    """
    jobs = [
        services.JobSpec(name="boot", labels=["board:x"], max_retries=2),
        services.JobSpec(
            name="wifi",
            labels=["board:x", "pool:cq"],
            priority=50,
            timeout=timedelta(seconds=120),
            estimated_duration=timedelta(seconds=60),
            expires_after=30,
        ),
        services.JobSpec(name="pinned", labels=["board:x"], host=pinned),
        *extra,
    ]
    settings = {"build": "R120-1", "priority": 60, "expires_after": 600, **options}
    return services.suite_submit(owner=owner, name="nightly", jobs=jobs, **settings)


def templates_run_once(n: int, *, owner: object, body: dict) -> None:
    """n more nightly suite templates of `body`, each dispatched once (so each has a last run)."""
    for _ in range(n):
        template = suite_templates.template_create(
            by=owner, name=f"t{SuiteTemplate.objects.count()}", body=body, cron="0 2 * * *"
        )
        suite_templates.template_dispatch(template=template, by=owner, params={})


def job_rows(suite: Suite | int) -> list[tuple]:
    """What a copy of each of the suite's jobs must keep, in submission order."""
    return [
        (
            j.name,
            decode_labels(j.label_key),
            j.host.hostname if j.host else None,
            j.priority,
            j.max_retries,
            j.timeout,
            j.estimated_duration,
            j.expires_after,
        )
        for j in Job.objects.filter(suite=suite).select_related("host").order_by("id")
    ]


def outcome(**counts: int) -> dict[str, int]:
    """A suite's `outcome` as the API and the notifications give it: each count, 0 unless given."""
    return {"passed": 0, "failed": 0, "aborted": 0, "skipped": 0, "unfinished": 0, **counts}
