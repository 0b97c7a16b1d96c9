"""What the templates pages and /api/suite-templates/ read: each template's last run and status."""

from __future__ import annotations

from collections.abc import Sequence

from django.db.models import OuterRef, QuerySet, Subquery

from jobs import selectors
from jobs.job_history import suite_outcome
from jobs.models import SuiteTemplate, TemplateRun


def templates_list() -> QuerySet[SuiteTemplate]:
    """Templates with what their rows show: owner and schedule in the same query."""
    return SuiteTemplate.objects.select_related("owner", "schedule")


def attach_last_runs(templates: Sequence[SuiteTemplate]) -> list[SuiteTemplate]:
    """Set `last_run` on each template, with its suite's status as `suite_status`: 3 queries."""
    newest = TemplateRun.objects.filter(template=OuterRef("pk")).order_by("-at", "-id")
    run_ids = (
        SuiteTemplate.objects.filter(pk__in=[t.pk for t in templates])
        .annotate(run_id=Subquery(newest.values("pk")[:1]))
        .exclude(run_id=None)
        .values_list("run_id", flat=True)
    )
    latest = TemplateRun.objects.filter(pk__in=list(run_ids)).select_related("suite")
    runs = {run.template_id: run for run in latest}
    annotate_suite_status(list(runs.values()))
    for template in templates:
        template.last_run = runs.get(template.pk)
    return list(templates)


def annotate_suite_status(runs: Sequence[TemplateRun]) -> list[TemplateRun]:
    """Set `suite_status` and `suite_outcome` on each run that made a suite (one query)."""
    suites = [run.suite for run in runs if run.suite is not None]
    counts = selectors.suite_job_counts([s.pk for s in suites]) if suites else {}
    for run in runs:
        suite = run.suite
        mine = counts.get(suite.pk, {}) if suite else {}
        run.suite_status = suite.status_from_counts(mine) if suite else ""
        run.suite_outcome = suite_outcome(mine)
    return list(runs)


def template_runs(template: SuiteTemplate) -> QuerySet[TemplateRun]:
    """The template's runs, newest first (annotate a page with `annotate_suite_status`)."""
    return template.attempts.select_related("suite").order_by("-at", "-id")
