"""One rule for "this suite is finished", in Python and in SQL, held to one table of cases."""

from __future__ import annotations

import pytest
from django.db.models import Count

from jobs.choices import JobStatus, SuiteStatus
from jobs.job_history import suite_outcome
from jobs.models import Job, Suite
from jobs.querysets import suite_finished
from jobs.templatetags.schedsite_ui import unfinished_count
from tests import factories as f

pytestmark = pytest.mark.django_db

S = JobStatus
# A suite's jobs by status, and whether the suite is finished.
CASES: list[tuple[tuple[str, ...], bool]] = [
    ((), True),  # no job at all: nothing left to run
    ((S.QUEUED,), False),
    ((S.LEASED,), False),
    ((S.RUNNING,), False),
    ((S.PASSED,), True),
    ((S.FAILED,), True),
    ((S.ABORTED,), True),
    ((S.ERROR,), True),
    ((S.EXPIRED,), True),
    ((S.SKIPPED,), True),
    ((S.PASSED, S.FAILED, S.ERROR, S.EXPIRED, S.ABORTED, S.SKIPPED), True),
    ((S.PASSED, S.QUEUED), False),
    ((S.PASSED, S.LEASED), False),
    ((S.FAILED, S.RUNNING), False),
    ((S.SKIPPED, S.SKIPPED, S.QUEUED), False),
]


def test_the_table_covers_every_status():
    assert {status for statuses, _ in CASES for status in statuses} == set(JobStatus.values)


@pytest.fixture
def suites(alice) -> dict[int, tuple[tuple[str, ...], bool]]:  # noqa: ANN001
    """One suite per case, its jobs in the case's statuses."""
    made = {}
    for i, (statuses, finished) in enumerate(CASES):
        suite = f.suite(f"s{i}", len(statuses), owner=alice) if statuses else None
        if suite is None:
            suite = Suite.objects.create(name=f"s{i}", owner=alice)
        for job, status in zip(suite.jobs.order_by("id"), statuses, strict=True):
            Job.objects.filter(pk=job.pk).update(status=status)
        made[suite.pk] = (statuses, finished)
    return made


def counts_of(suite_ids) -> dict[int, dict[str, int]]:  # noqa: ANN001
    rows = Job.objects.filter(suite_id__in=suite_ids).values_list("suite_id", "status")
    counts: dict[int, dict[str, int]] = {pk: {} for pk in suite_ids}
    for suite_id, status, n in rows.annotate(n=Count("id")).order_by():
        counts[suite_id][status] = n
    return counts


def test_the_python_rule_and_its_sql_twin_agree_with_the_table(suites):
    counts = counts_of(list(suites))
    expected = {pk for pk, (_, finished) in suites.items() if finished}
    assert {pk for pk in suites if suite_finished(counts[pk])} == expected
    assert set(Suite.objects.finished().values_list("pk", flat=True)) == expected
    assert set(Suite.objects.unfinished().values_list("pk", flat=True)) == set(suites) - expected


def test_what_the_pages_and_the_api_show_follows_the_rule(suites):
    for pk, (statuses, finished) in suites.items():
        suite = Suite.objects.get(pk=pk)
        counts = counts_of([pk])[pk]
        completed = suite.status_from_counts(counts) == SuiteStatus.COMPLETED
        assert completed == finished, statuses
        assert (suite_outcome(counts)["unfinished"] == 0) == finished, statuses
        assert (unfinished_count(counts) == 0) == finished, statuses
