"""Re-run a suite's failed jobs, or clone it: a new suite from its body, linked to it.

The body (jobs.suite_body) is checked as `POST /api/suites/` checks a tester's and submitted by
the same service, which sets the link in the transaction that creates the suite
(docs/api.md#re-run-and-clone).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from jobs.choices import JobKind
from jobs.job_history import FAILED_STATUSES
from jobs.limits import bounds
from jobs.models import Job, Suite
from jobs.submission_schema import SuiteCreateInputSerializer, submit_suite
from jobs.suite_body import suite_body
from schedsite.errors import Conflict, InvalidInput


def rerun_candidates(suite: Suite) -> QuerySet[Job]:
    """The suite's test jobs that did not pass: failed, error or expired (not aborted)."""
    return suite.jobs.filter(kind=JobKind.TEST, status__in=FAILED_STATUSES)


def _submit(owner: Any, body: dict[str, Any], **links: Suite) -> Suite:
    # The original was accepted once; a host that lost a label since must not refuse a copy
    # the tester asked for, so it waits for such a host as an unmatched job does.
    serializer = SuiteCreateInputSerializer(data={**body, "allow_unmatched": True})
    serializer.is_valid(raise_exception=True)
    return submit_suite(owner, serializer.validated_data, **links)


@transaction.atomic
def suite_rerun(*, suite: Suite, owner: Any, job_ids: Sequence[int] | None = None) -> Suite:
    """Submit the finished suite's failed, errored and expired jobs again, as a new suite."""
    if not Suite.objects.filter(pk=suite.pk).finished().exists():
        raise Conflict(
            f"suite {suite.name} has not finished: re-run its failed jobs once none is "
            "queued, leased or running"
        )
    failed = list(rerun_candidates(suite).select_related("host"))
    if not failed:
        raise Conflict(f"nothing failed in suite {suite.name}: there is nothing to re-run")
    if job_ids is not None:
        wanted = set(job_ids)
        if unknown := sorted(wanted - {job.pk for job in failed}):
            raise InvalidInput(
                f"not failed jobs of suite {suite.name}: {', '.join(map(str, unknown))}",
                field="jobs",
            )
        failed = [job for job in failed if job.pk in wanted]
    body = {**suite_body(suite, failed), "name": rerun_name(suite.name)}
    return _submit(owner, body, rerun_of=suite)


RERUN_SUFFIX = re.compile(r" \(re-run(?: (\d+))?\)\Z")


def rerun_name(name: str) -> str:
    """A re-run's name, told apart from its original's: "nightly (re-run)", and a re-run of
    that "nightly (re-run 2)", and so on; the original's name cut to fit the name's bounds."""
    match = RERUN_SUFFIX.search(name)
    if match is None:
        base, suffix = name, " (re-run)"
    else:
        base, suffix = name[: match.start()], f" (re-run {int(match.group(1) or 1) + 1})"
    return base[: bounds("name").high - len(suffix)] + suffix


@transaction.atomic
def suite_clone(*, suite: Suite, owner: Any, changes: Mapping[str, Any] | None = None) -> Suite:
    """Submit a copy of the suite, all its jobs (a fan-out stays one), with `changes` applied."""
    return _submit(owner, {**suite_body(suite), **(changes or {})}, cloned_from=suite)
