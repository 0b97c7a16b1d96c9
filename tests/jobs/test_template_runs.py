"""Periodic suites: one suite per cron slot, or a skip while the last run is unfinished."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone
from django_q.conf import Conf
from django_q.models import Schedule, Task
from django_q.scheduler import scheduler

from hosts.choices import HostStatus
from jobs import services, suite_templates, tasks
from jobs import services as job_services
from jobs.choices import SuiteOrigin, TemplateRunOutcome
from jobs.models import Suite, SuiteTemplate, TemplateRun
from tests import factories as f
from tests.threads import race

TWO_AM = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)
NEXT_DAY = datetime(2026, 11, 24, 2, 0, tzinfo=UTC)
BODY = {"name": "nightly", "priority": "weekly", "jobs": [{"name": "t", "labels": ["board:eve"]}]}


def nightly(owner) -> SuiteTemplate:  # noqa: ANN001
    f.host("eve1.lab", ["board:eve"])
    return suite_templates.template_create(by=owner, name="nightly", body=BODY, cron="0 2 * * *")


@pytest.mark.django_db
def test_a_cron_run_makes_a_suite_owned_by_the_template_owner(alice):
    template = nightly(alice)

    result = tasks.run_template(template.pk, slot=TWO_AM.isoformat())

    run = TemplateRun.objects.get()
    assert result == {
        "template": template.pk,
        "slot": TWO_AM.isoformat(),
        "outcome": "created",
        "suite": run.suite_id,
        "reason": "",
    }
    suite = Suite.objects.get()
    assert (suite.owner, suite.template, suite.origin) == (alice, template, SuiteOrigin.CRON)
    assert suite.priority == 10 and run.actor == "scheduler"


@pytest.mark.django_db
def test_the_same_slot_twice_makes_one_suite(alice):
    template = nightly(alice)

    first = suite_templates.template_run(template_id=template.pk, slot=TWO_AM)
    again = suite_templates.template_run(template_id=template.pk, slot=TWO_AM.isoformat())

    assert again.pk == first.pk
    assert Suite.objects.count() == 1 and TemplateRun.objects.count() == 1


@pytest.mark.django_db
def test_a_run_is_skipped_while_the_previous_one_is_unfinished_and_says_why(alice):
    template = nightly(alice)
    first = suite_templates.template_run(template_id=template.pk, slot=TWO_AM)

    skipped = suite_templates.template_run(template_id=template.pk, slot=NEXT_DAY)

    assert skipped.outcome == TemplateRunOutcome.SKIPPED and skipped.suite is None
    assert skipped.reason == (
        f"the previous run, suite nightly (#{first.suite_id}), is unfinished: job t is queued"
    )
    assert Suite.objects.count() == 1
    # Once it has finished, the next slot runs again.
    services.suite_abort(suite=first.suite, by=alice)
    later = suite_templates.template_run(
        template_id=template.pk, slot=datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
    )
    assert later.outcome == TemplateRunOutcome.CREATED and Suite.objects.count() == 2


@pytest.mark.django_db
def test_a_suite_dispatched_by_hand_does_not_hold_back_the_cron(alice):
    template = nightly(alice)
    suite_templates.template_dispatch(template=template, by=alice, params={"build": "R1"})

    run = suite_templates.template_run(template_id=template.pk, slot=TWO_AM)

    assert run.outcome == TemplateRunOutcome.CREATED


@pytest.mark.django_db
def test_a_run_whose_body_no_longer_validates_is_an_error_with_the_reason(alice, sam):
    host = f.host("h1.lab", ["a"])
    body = {"name": "p", "jobs": [{"name": "t", "host": "h1.lab"}]}
    template = suite_templates.template_create(by=alice, name="pinned", body=body, cron="0 2 * * *")
    job_services.host_set_status(host=host, status=HostStatus.RETIRED, by=sam, message="gone")

    run = suite_templates.template_run(template_id=template.pk, slot=TWO_AM)

    assert run.outcome == TemplateRunOutcome.ERROR and run.suite is None
    assert "h1.lab is retired" in run.reason
    assert not Suite.objects.exists()


@pytest.mark.django_db
def test_a_disabled_template_or_a_deleted_one_makes_nothing(alice):
    template = nightly(alice)
    suite_templates.template_update(template=template, by=alice, enabled=False)

    run = suite_templates.template_run(template_id=template.pk, slot=TWO_AM)
    assert run.outcome == TemplateRunOutcome.SKIPPED and run.reason == "the template is disabled"

    suite_templates.template_delete(template=template, by=alice)
    assert tasks.run_template(template.pk, slot=NEXT_DAY.isoformat())["outcome"] == "gone"
    assert not Suite.objects.exists()


@pytest.mark.django_db
def test_a_template_gone_with_its_owners_account_stops_its_schedule(alice):
    template = nightly(alice)
    alice.delete()  # the template goes by cascade; its schedule row is not the template's
    assert Schedule.objects.filter(func=suite_templates.RUN_FUNC).exists()

    assert tasks.run_template(template.pk, slot=TWO_AM.isoformat())["outcome"] == "gone"

    assert not Schedule.objects.filter(func=suite_templates.RUN_FUNC).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_clusters_running_one_slot_at_once_make_one_suite(alice):
    assert connection.vendor == "postgresql"
    template = nightly(alice)

    def run() -> int:
        return suite_templates.template_run(template_id=template.pk, slot=TWO_AM).pk

    for _ in range(5):
        results = race(run, run, run)
        assert not [r for r in results if isinstance(r, BaseException)], results
        assert len(set(results)) == 1
    assert Suite.objects.count() == 1 and TemplateRun.objects.count() == 1


@pytest.mark.postgres
@pytest.mark.django_db
def test_django_q2_fires_the_schedule_for_its_slot_and_a_second_cluster_adds_nothing(
    monkeypatch: pytest.MonkeyPatch, alice
) -> None:
    template = nightly(alice)
    schedule = Schedule.objects.get(pk=template.schedule_id)
    slot = (timezone.now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    # The slot comes due; a cluster's scheduler runs the task (sync: here, as a worker would).
    Schedule.objects.filter(pk=schedule.pk).update(next_run=slot)
    monkeypatch.setattr(Conf, "SYNC", True)
    scheduler()

    task = Task.objects.get(func="jobs.tasks.run_template")
    assert task.success, task.result
    assert task.result["outcome"] == "created" and task.kwargs["slot"] == slot.isoformat()
    run = TemplateRun.objects.get()
    assert run.slot == slot and run.suite.template == template
    schedule.refresh_from_db()
    assert schedule.next_run > timezone.now() and schedule.next_run.hour == 2

    # Another cluster that read the same due slot runs it too: still one suite.
    Schedule.objects.filter(pk=schedule.pk).update(next_run=slot)
    scheduler()
    assert Suite.objects.count() == 1 and TemplateRun.objects.count() == 1
