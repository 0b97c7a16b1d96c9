"""Suite templates: save, change, delete, dispatch, and the periodic run (docs/scheduling.md).

A template's body is a `POST /api/suites/` body; every suite made from it goes through the same
validation and `suite_submit` as one a tester sends. It validates bodies with the submission
schema (jobs/submission_schema.py), which sits above the services package, so that package does
not re-export it.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from cron_descriptor import Options, get_description
from croniter import CroniterBadDateError, croniter
from django.db import transaction
from django.utils import timezone
from django_q.models import Schedule

from hosts import audit
from hosts.audit import Actor, actor_name, actor_user
from hosts.choices import EventKind
from jobs.choices import SuiteOrigin, TemplateRunOutcome
from jobs.models import Job, Suite, SuiteTemplate, TemplateRun
from jobs.submission_schema import SuiteCreateInputSerializer, submit_suite
from jobs.suite_body import suite_body
from schedsite.errors import Conflict, InvalidInput, ServiceError
from schedsite.field_changes import (
    apply_changes,
    fields_known,
    locked_or_conflict,
    name_clean,
)

RUN_FUNC = "jobs.tasks.run_template"
# What a dispatch may change in the body: keep it small, and document it (docs/api.md).
DISPATCH_PARAMETERS = ("build", "priority")
TEMPLATE_FIELDS = ("name", "body", "cron", "enabled")
# A cron that matches no date within this many years never fires (0 0 31 2 *): refused on save.
CRON_HORIZON_YEARS = 5


def _error_text(errors: Any, where: str = "") -> list[str]:
    """DRF's nested error detail as lines a person reads: `jobs[1].host: No host named x.`"""
    if isinstance(errors, Mapping):
        lines = []
        for key, value in errors.items():
            name = "" if key == "non_field_errors" else str(key)
            inner = f"{where}.{name}" if where and name else where or name
            lines += _error_text(value, inner)
        return lines
    if isinstance(errors, list) and errors and not all(isinstance(e, str) for e in errors):
        lines = []
        for i, value in enumerate(errors):
            lines += _error_text(value, f"{where}[{i}]")
        return lines
    texts = [str(e) for e in errors] if isinstance(errors, list) else [str(errors)]
    return [f"{where}: {t}" if where else t for t in texts]


def body_validated(body: object) -> dict:
    """The serializer's data for a suite body; InvalidInput says what is wrong with it."""
    if not isinstance(body, dict):
        raise InvalidInput("body: a JSON object, as POST /api/suites/ takes", field="body")
    serializer = SuiteCreateInputSerializer(data=body)
    if not serializer.is_valid():
        text = "; ".join(_error_text(serializer.errors))
        raise InvalidInput(f"body: {text}", field="body")
    return serializer.validated_data


def cron_clean(value: object) -> str:
    """A five-field cron expression (or @daily and kin), or '' for none."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput("cron: a cron expression such as '0 2 * * *', or empty", field="cron")
    cron = " ".join(value.split())
    if not cron:
        return ""
    fields = len(cron.split())
    if len(cron) > 100 or (fields != 5 and not cron.startswith("@")) or not croniter.is_valid(cron):
        raise InvalidInput(
            f"cron: {cron!r} is not a cron expression of five fields "
            "(minute hour day-of-month month day-of-week), such as '0 2 * * *'",
            field="cron",
        )
    try:
        start = timezone.localtime()
        croniter(cron, start, max_years_between_matches=CRON_HORIZON_YEARS).get_next(datetime)
    except CroniterBadDateError:
        raise InvalidInput(
            f"cron: {cron!r} never fires (no such date within {CRON_HORIZON_YEARS} years), "
            "such as the 31st of February",
            field="cron",
        ) from None
    return cron


def cron_words(cron: str) -> str:
    """The schedule as a person says it ("At 02:00, only on Monday"); '' for none."""
    if not cron:
        return ""
    options = Options()
    options.use_24hour_time_format = True
    try:
        return get_description(cron, options)
    except Exception:  # noqa: BLE001 - a description is a courtesy; the cron itself is valid
        return ""


def template_clean(
    fields: Mapping[str, object], *, owner: Any, template: SuiteTemplate | None = None
) -> dict[str, object]:
    """The model's values for the given template fields; InvalidInput or Conflict names one."""
    fields_known(fields, TEMPLATE_FIELDS, "template")
    out: dict[str, object] = {}
    if "name" in fields:
        name = name_clean(fields["name"], most=200)
        others = SuiteTemplate.objects.filter(owner=owner, name=name)
        if template is not None:
            others = others.exclude(pk=template.pk)
        if others.exists():
            raise Conflict(f"you already have a template named {name}", field="name")
        out["name"] = name
    if "body" in fields:
        body_validated(fields["body"])
        out["body"] = fields["body"]
    if "cron" in fields:
        out["cron"] = cron_clean(fields["cron"])
    if "enabled" in fields:
        if not isinstance(fields["enabled"], bool):
            raise InvalidInput("enabled: true or false", field="enabled")
        out["enabled"] = fields["enabled"]
    return out


def _schedule_sync(template: SuiteTemplate) -> None:
    """Give an enabled template with a cron its django-q2 schedule; remove it otherwise.

    Written in the template's transaction: the schedule and the template commit together, so
    a failed save leaves no schedule behind and a saved one is never missing its schedule.
    """
    schedule = template.schedule
    if not (template.cron and template.enabled):
        if schedule is not None:
            template.schedule = None
            template.save(update_fields=["schedule"])
            schedule.delete()
        return
    if schedule is None:
        schedule = Schedule(func=RUN_FUNC, args=repr(template.pk))
    schedule.name = f"schedsite: suite template {template.pk}"
    schedule.schedule_type = Schedule.CRON
    schedule.cron = template.cron
    schedule.repeats = -1
    # django-q2 hands the task the slot it fires for: the run's idempotency key.
    schedule.intended_date_kwarg = "slot"
    schedule.next_run = schedule.calculate_next_run()
    schedule.save()
    if template.schedule_id != schedule.pk:
        template.schedule = schedule
        template.save(update_fields=["schedule"])


def _text(field: str, value: object) -> str:
    if field == "body":
        return "(changed)"
    if field == "enabled":
        return "yes" if value else "no"
    return str(value) or "none"


def _audit(kind: str, template: SuiteTemplate, by: Actor, message: str) -> None:
    # A template is about no host: the event names it in `subject`, as health policies do.
    audit.record(kind, actor=by, subject=f"suite template {template.name}", message=message)


@transaction.atomic
def template_create(*, by: Actor, name: str, body: object, **fields: object) -> SuiteTemplate:
    """Save a suite body as a template owned by `by`, with its schedule if it has a cron."""
    owner = actor_user(by)
    if owner is None:
        raise InvalidInput("a template needs an owner")
    values = template_clean({"name": name, "body": body, **fields}, owner=owner)
    template = SuiteTemplate.objects.create(owner=owner, **values)
    _schedule_sync(template)
    cron = template.cron or "none"
    _audit(EventKind.CREATED, template, by, f"template saved; cron {cron}")
    return template


def template_from_suite(*, by: Actor, suite: Suite, name: str, **fields: object) -> SuiteTemplate:
    """Save an existing suite (or fan-out) as a template: its submission body."""
    return template_create(by=by, name=name or suite.name, body=suite_body(suite), **fields)


@transaction.atomic
def template_update(*, template: SuiteTemplate, by: Actor, **fields: object) -> SuiteTemplate:
    """Change a template's name, body, cron or whether it runs; its schedule follows."""
    template = (
        SuiteTemplate.objects.select_for_update(of=("self",))
        .select_related("schedule")
        .get(pk=template.pk)
    )
    values = template_clean(fields, owner=template.owner, template=template)
    changes = apply_changes(template, values, _text)
    if not changes:
        return template
    template.updated_at = timezone.now()
    template.save(update_fields=[*values, "updated_at"])
    _schedule_sync(template)
    _audit(EventKind.UPDATED, template, by, "; ".join(changes))
    return template


@transaction.atomic
def template_delete(*, template: SuiteTemplate, by: Actor) -> None:
    """Delete a template and its schedule; the suites made from it stay."""
    template = locked_or_conflict(SuiteTemplate, template.pk, "the template no longer exists")
    _audit(EventKind.DELETED, template, by, f"template deleted; cron {template.cron or 'none'}")
    schedule_id = template.schedule_id
    template.delete()
    Schedule.objects.filter(pk=schedule_id).delete()


def _submit_from(template: SuiteTemplate, *, owner: Any, params: Mapping[str, object]) -> Suite:
    return submit_suite(owner, body_validated({**template.body, **params}))


@transaction.atomic
def template_dispatch(
    *, template: SuiteTemplate, by: Actor, params: Mapping[str, object] | None = None
) -> Suite:
    """Submit a new suite from the template with the given parameters, owned by `by`.

    A body that no longer validates (say, its pinned host was retired) is refused with the
    reason, and nothing is created.
    """
    unknown = sorted(set(params or {}) - set(DISPATCH_PARAMETERS))
    if unknown:
        raise InvalidInput(f"unknown parameters: {', '.join(unknown)}")
    suite = _submit_from(template, owner=by, params=params or {})
    Suite.objects.filter(pk=suite.pk).update(template=template, origin=SuiteOrigin.DISPATCHED)
    TemplateRun.objects.create(
        template=template, outcome=TemplateRunOutcome.CREATED, suite=suite, actor=actor_name(by)
    )
    suite.refresh_from_db()
    return suite


def _unfinished_run(template: SuiteTemplate) -> Job | None:
    """A job still queued, leased or running of a suite the template's schedule made."""
    return (
        Job.objects.unfinished()
        .filter(suite__template=template, suite__origin=SuiteOrigin.CRON)
        .select_related("suite")
        .order_by("suite_id")
        .first()
    )


def _slot_of(slot: datetime | str | None, cron: str, now: datetime) -> datetime:
    """The cron time a run stands for: given by django-q2, or the latest one up to now."""
    if isinstance(slot, str):
        slot = datetime.fromisoformat(slot)
    if slot is None:
        slot = croniter(cron, timezone.localtime(now)).get_prev(datetime)
    return slot.replace(second=0, microsecond=0)


@transaction.atomic
def template_run(
    *, template_id: int, slot: datetime | str | None = None, now: datetime | None = None
) -> TemplateRun | None:
    """Run a template for one cron slot: a new suite, or a skip that says why (prohibit_overlap).

    Each slot runs once: the template row is locked while the slot is claimed, and the
    database refuses a second run of the same slot.
    """
    now = now or timezone.now()
    template = (
        SuiteTemplate.objects.select_for_update(of=("self",))
        .select_related("owner")
        .filter(pk=template_id)
        .first()
    )
    if template is None:
        # Deleted since the schedule fired. template_delete takes the schedule with it; one
        # left by a cascade (its owner's account deleted) is removed here, once.
        Schedule.objects.filter(func=RUN_FUNC, args=repr(template_id)).delete()
        return None
    at = _slot_of(slot, template.cron or "* * * * *", now)
    done = TemplateRun.objects.filter(template=template, slot=at).first()
    if done is not None:
        return done  # a second cluster, or a retried task, for the same slot
    run = TemplateRun(template=template, slot=at, actor=audit.SCHEDULER, at=now)
    busy = _unfinished_run(template)
    if not template.enabled:
        run.outcome, run.reason = TemplateRunOutcome.SKIPPED, "the template is disabled"
    elif busy is not None:
        run.outcome = TemplateRunOutcome.SKIPPED
        run.reason = (
            f"the previous run, suite {busy.suite.name} (#{busy.suite_id}), is unfinished: "
            f"job {busy.name} is {busy.status}"
        )
    else:
        try:
            suite = _submit_from(template, owner=template.owner, params={})
        except ServiceError as exc:
            run.outcome, run.reason = TemplateRunOutcome.ERROR, exc.message
        else:
            Suite.objects.filter(pk=suite.pk).update(template=template, origin=SuiteOrigin.CRON)
            run.outcome, run.suite = TemplateRunOutcome.CREATED, suite
    run.save()
    return run
