"""A retried job prefers a host it has not failed on: a preference, never a ban."""

from __future__ import annotations

import dataclasses

from jobs.scheduling.planner import plan
from tests.scheduler.lab import host, job, leases


def retried_on(host_id: int) -> object:
    """Job J1 (board:x) after it broke host `host_id`."""
    return dataclasses.replace(job(1, "board:x"), avoid_hosts=frozenset({host_id}))


def test_a_retried_job_gets_the_other_free_host_though_its_failed_host_sorts_first() -> None:
    hosts = [host(1, "board:x"), host(2, "board:x")]
    assert leases(plan(hosts=hosts, jobs=[job(1, "board:x")], suites=[])) == {1: 1}

    assert leases(plan(hosts=hosts, jobs=[retried_on(1)], suites=[])) == {1: 2}


def test_a_retried_job_still_gets_its_failed_host_when_no_other_is_free() -> None:
    hosts = [host(1, "board:x"), host(2, "board:x", leased=True)]

    assert leases(plan(hosts=hosts, jobs=[retried_on(1)], suites=[])) == {1: 1}


def test_a_retry_never_takes_a_host_another_job_needs() -> None:
    # J2 fits only h2; the retry of J1 takes h1 again rather than leave J2 waiting.
    hosts = [host(1, "board:x"), host(2, "board:x", "pool:gold")]
    jobs = [retried_on(1), job(2, "board:x", "pool:gold", minute=1)]

    assert leases(plan(hosts=hosts, jobs=jobs, suites=[])) == {1: 1, 2: 2}
