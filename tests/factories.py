"""Small builders for test data: a lab in a few lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from django.test import Client
from django.utils import timezone

from hosts import services as host_services
from hosts.models import Host, Worker
from jobs import services
from jobs.models import Job, Suite


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
    priority: int = 40,
    min_duts: int = 0,
    max_duts: int | None = None,
    labels: Sequence[str] = ("board:x",),
    max_retries: int = 0,
    build: str = "",
) -> Suite:
    if isinstance(jobs, int):
        specs = [
            services.JobSpec(name=f"{name}-t{i}", labels=labels, max_retries=max_retries)
            for i in range(jobs)
        ]
    else:
        specs = [
            services.JobSpec(name=f"{name}-t{i}", labels=job_labels, max_retries=max_retries)
            for i, job_labels in enumerate(jobs)
        ]
    return services.suite_submit(
        owner=owner,
        name=name,
        jobs=specs,
        priority=priority,
        min_duts=min_duts,
        max_duts=max_duts,
        build=build,
    )


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
    )
