"""Queue, suites (list, detail, submit, abort) and jobs (detail, output) pages."""

from __future__ import annotations

from collections import Counter
from dataclasses import fields
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.middleware.csrf import get_token
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods

from hosts.models import Host
from jobs import badges, job_history, limits, selectors, services, signals
from jobs.choices import JobStatus, SuiteStatus, parse_priority
from jobs.filtersets import JobFilterSet, SuiteFilterSet
from jobs.forms import (
    MAX_ROWS,
    PRIORITY_CHOICES,
    ROW_KEY,
    JobRow,
    RoleRow,
    SuiteForm,
    field_message,
    form_wording,
    job_rows_count,
    job_rows_from,
    job_specs,
    row_error,
)
from jobs.models import Job, Lease, Suite
from jobs.querysets import UNFINISHED_JOB_STATUSES, unfinished_jobs
from jobs.scheduling import whatif
from jobs.scheduling.queue import aging_of, queue_jobs, queue_place, queue_select
from jobs.views_resubmit import clone_form, clone_source, suite_queued
from schedsite import links, roles
from schedsite.counting import RowCount
from schedsite.errors import InvalidInput, LimitExceeded, ServiceError
from schedsite.links import route_url
from schedsite.ui.htmx import (
    action_response,
    clean_query,
    current_list_query,
    detail_view,
    error_response,
    filtered_page,
    live_url,
    object_action,
    owners_only,
    page_or_fragment,
    paginate,
    refresh_seconds,
    ui_login_required,
    wants_fragment,
)

QUEUE_PER_PAGE = 50
SUITES_PER_PAGE = 25
SUITE_JOBS_PER_PAGE = 100
LEASES_PER_PAGE = 50


def _capitalized(message: str) -> str:
    return message[:1].upper() + message[1:]


# --- queue ----------------------------------------------------------------------------------


def queue_context(request: HttpRequest, query: QueryDict, page_number: str | None) -> dict:
    """One page of the queue for the given filters: its rows, counts and the latest tick."""
    filterset = None
    if query:
        filterset = JobFilterSet(query, queryset=Job.objects.queued())
    selection = queue_select(filterset.qs if filterset is not None else None)
    page = paginate(selection.ids, page_number, QUEUE_PER_PAGE)
    jobs = queue_jobs(page.object_list)
    positions = selection.positions([job.pk for job in jobs])
    tick = selectors.latest_tick()
    reasons = selectors.wait_reasons_for(jobs, tick)
    provisions = selectors.tick_provisions(tick)
    # Hosts the tick keeps free for a multi-host job (docs/scheduling.md#holds-and-backfill).
    holding = Counter(selectors.current_holds(tick).values()) if tick else Counter()
    # Each route reversed once per page, not once per row (schedsite/links.py).
    job_url = route_url("jobs:job_detail")
    suite_url = route_url("jobs:suite_detail")
    host_url = route_url("hosts:host_detail", links.NAMES)
    # A row its owner or staff may act on carries the job's Priority and Abort controls.
    managed = {job.pk for job in jobs if roles.can_manage(request.user, job.owner_id)}
    controls = job_controls(request) if managed else None
    rows = [
        {
            "job": job,
            "url": job_url(job.pk),
            "suite_url": suite_url(job.suite_id) if job.suite_id else "",
            "host_url": host_url(job.host.hostname) if job.host_id else "",
            "position": positions.get(job.pk),
            "reason": reasons.get(job.pk),
            "quota": job.pk in selection.quota_ids,
            "aging": aging_of(job, selection.head),
            "holding": holding.get(job.pk, 0),
            "controls": controls if job.pk in managed else None,
            "actions_column": bool(managed),
        }
        for job in jobs
    ]
    return {
        "rows": rows,
        "actions_column": bool(managed),
        "page_obj": page,
        "query": query,
        "filter_errors": filterset.errors if filterset is not None else None,
        "total_queued": selection.total.n,
        "total_estimated": selection.total.estimated,
        "matching": selection.ids.count(),
        "matching_estimated": selection.ids.row_count.estimated,
        "tick": tick,
        # "2 of them after a reimage to R121" (docs/ui.md#pages).
        "tick_provisions": sum(provisions.values()),
        "tick_builds": " or ".join(sorted(provisions)),
        "now": timezone.now(),
        "refresh": refresh_seconds(),
        "live_url": live_url(reverse("jobs:queue"), query, page),
    }


def job_controls(request: HttpRequest) -> dict[str, Any]:
    """What a job's Priority and Abort forms need: the CSRF token (for a post without htmx),
    the named levels and the routes, made once per page."""
    return {
        "csrf": get_token(request),
        "levels": PRIORITY_CHOICES,
        "priority_url": route_url("jobs:job_priority"),
        "abort_url": route_url("jobs:job_abort"),
    }


@ui_login_required
@require_GET
def queue(request: HttpRequest) -> HttpResponse:
    """Queued jobs in the scheduler's order, with priority, age and why each one waits."""
    context = queue_context(request, clean_query(request.GET), request.GET.get("page"))
    return page_or_fragment(request, "jobs/queue.html", "jobs/partials/queue_table.html", context)


# --- suites ---------------------------------------------------------------------------------


def _suite_rows(suites: list[Suite]) -> list[dict[str, Any]]:
    ids = [s.pk for s in suites]
    counts = selectors.suite_job_counts(ids)
    held = selectors.suite_hosts_held(ids)
    return [
        {
            "suite": s,
            "counts": counts.get(s.pk, {}),
            "held": held.get(s.pk, 0),
            "status": s.status_from_counts(counts.get(s.pk, {})),
            "outcome": job_history.suite_outcome(counts.get(s.pk, {})),
        }
        for s in suites
    ]


@ui_login_required
@require_GET
def suite_list(request: HttpRequest) -> HttpResponse:
    """Suites, newest first, with their progress and hosts held against their quota."""
    context = filtered_page(
        SuiteFilterSet,
        Suite.objects.select_related("owner"),
        clean_query(request.GET),
        request.GET.get("page"),
        per_page=SUITES_PER_PAGE,
        path=reverse("jobs:suite_list"),
    )
    context["rows"] = _suite_rows(list(context["page_obj"].object_list))
    return page_or_fragment(
        request, "jobs/suite_list.html", "jobs/partials/suite_table.html", context
    )


def suite_detail_context(request: HttpRequest, suite: Suite, **extra: Any) -> dict[str, Any]:
    """A suite's summary, bars and one page of its jobs with their hosts and wait reasons."""
    suite = Suite.objects.select_related("owner", "rerun_of", "cloned_from").get(pk=suite.pk)
    counts = selectors.suite_job_counts([suite.pk])[suite.pk]
    held = selectors.suite_hosts_held([suite.pk]).get(suite.pk, 0)
    status = suite.status_from_counts(counts)
    query = clean_query(request.GET)
    filterset = JobFilterSet(query, queryset=suite.jobs.select_related("host").order_by("id"))
    page = paginate(filterset.qs, request.GET.get("page"), SUITE_JOBS_PER_PAGE)
    jobs = list(page.object_list)
    # The latest lease: where a job runs now, or the host it last ran on once it finished.
    leases = job_history.last_leases_by_job([j.pk for j in jobs])
    queued = [j for j in jobs if j.status == JobStatus.QUEUED]
    reasons = selectors.wait_reasons_for(queued) if queued else {}
    can_manage = roles.can_manage(request.user, suite.owner_id)
    outcome = job_history.suite_outcome(counts)
    context = {
        "suite": suite,
        "counts": counts,
        "held": held,
        "status": status,
        "outcome": outcome,
        "results_by_name": job_history.suite_results_by_name(suite),
        "fanout": selectors.fanout_host_counts([suite]).get(suite.pk),
        **selectors.suite_derived(suite),
        "job_rows": [
            {"job": j, "lease": leases.get(j.pk), "reason": reasons.get(j.pk)} for j in jobs
        ],
        "page_obj": page,
        "query": query,
        "statuses": JobStatus.choices,
        "can_abort": can_manage and status in (SuiteStatus.QUEUED, SuiteStatus.RUNNING),
        "can_rerun": can_manage and not outcome["unfinished"] and outcome["failed"] > 0,
        "can_clone": can_manage,
        "can_manage": can_manage,
        "unfinished": unfinished_jobs(counts),
        "now": timezone.now(),
        "refresh": refresh_seconds(),
        "live_url": live_url(reverse("jobs:suite_detail", args=[suite.pk]), query, page),
    }
    context.update(extra)
    return context


# One suite and its jobs: status, hosts, attempts and why the queued ones wait.
suite_detail = detail_view(Suite, suite_detail_context)


# --- jobs -----------------------------------------------------------------------------------


def job_detail_context(request: HttpRequest, job: Job, **extra: Any) -> dict[str, Any]:
    """One job: its facts, every attempt with its host and events, and why it waits."""
    job = Job.objects.select_related("suite", "host__worker", "owner").get(pk=job.pk)
    now = timezone.now()
    queued = job.status == JobStatus.QUEUED
    position, length, position_estimated = (
        queue_place(job) if queued else (None, RowCount(0), False)
    )
    context = {
        "job": job,
        "attempts": attempts_by_host_set(job_history.job_attempts(job, now=now)),
        # Every host of the active attempt, by slot: slot 0's worker runs the job.
        "job_hosts": list(
            Lease.objects.active().filter(job=job).select_related("host__worker").order_by("slot")
        ),
        "reason": selectors.wait_reasons_for([job]).get(job.pk) if queued else None,
        # The free hosts the latest tick keeps for it (docs/scheduling.md#holds-and-backfill).
        "held_hosts": _held_hosts(job) if queued and job.roles else [],
        "position": position,
        "position_estimated": position_estimated,
        "queue_length": length.n,
        "queue_length_estimated": length.estimated,
        "unfinished": job.status in UNFINISHED_JOB_STATUSES,
        # Its owner or staff: Abort while it is unfinished, Priority while it is queued.
        "can_manage": roles.can_manage(request.user, job.owner_id),
        "priority_choices": _priority_choices(job.priority),
        "ran_seconds": (
            (job.finished_at - job.started_at).total_seconds()
            if job.finished_at and job.started_at
            else None
        ),
        "now": now,
        "refresh": refresh_seconds(),
        "live_url": reverse("jobs:job_detail", args=[job.pk]),
    }
    context.update(extra)
    return context


def _priority_choices(current: int) -> list[tuple[int, str]]:
    """The named levels, and the job's own priority when it lies between them (set by the API)."""
    if any(value == current for value, _ in PRIORITY_CHOICES):
        return PRIORITY_CHOICES
    return sorted([*PRIORITY_CHOICES, (current, str(current))], reverse=True)


def _held_hosts(job: Job) -> list[Host]:
    held = [host for host, holder in selectors.current_holds().items() if holder == job.pk]
    return list(Host.objects.filter(pk__in=held).order_by("hostname")) if held else []


def attempts_by_host_set(attempts: list[job_history.Attempt]) -> list[SimpleNamespace]:
    """The job's attempts as its page shows them: a multi-host job's leases of one attempt
    (Lease.attempt) make one attempt, with every host (`hosts`, by slot) and their events."""
    groups: dict[object, list[job_history.Attempt]] = {}
    for attempt in attempts:
        lease = attempt.lease
        key = lease.attempt if lease.attempt is not None and lease.role else ("lease", lease.pk)
        groups.setdefault(key, []).append(attempt)
    shown = []
    for number, members in enumerate(groups.values(), start=1):
        members.sort(key=lambda a: a.lease.slot)
        main = members[0]
        values = {f.name: getattr(main, f.name) for f in fields(main)}
        # An attempt that already carries its leases (job_history groups them) keeps them.
        hosts = {
            lease.pk: lease for a in members for lease in (getattr(a, "leases", ()) or (a.lease,))
        }
        events = {e.pk: e for a in members for e in a.events}
        values.update(
            number=number,
            hosts=sorted(hosts.values(), key=lambda lease: (lease.slot, lease.pk)),
            events=sorted(events.values(), key=lambda e: (e.created_at, e.pk)),
        )
        shown.append(SimpleNamespace(**values))
    return shown


# One job and its attempts; anyone signed in may read it, as they may read its suite.
job_detail = detail_view(Job, job_detail_context)


@ui_login_required
@require_GET
def job_output(request: HttpRequest, pk: int) -> HttpResponse:
    """The job's output (its message) as a text file to download."""
    job = get_object_or_404(Job, pk=pk)
    response = HttpResponse(job.message, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="job-{job.pk}-output.txt"'
    return response


@object_action(Suite, refuse=owners_only("suite.abort"))
def suite_abort(request: HttpRequest, suite: Suite) -> HttpResponse:
    """Abort every unfinished job of a suite (its owner, or staff)."""
    fallback = reverse("jobs:suite_detail", args=[suite.pk])
    template = "jobs/partials/suite_detail_body.html"
    try:
        count = services.suite_abort(suite=suite, by=request.user)
    except ServiceError as exc:
        return action_response(
            request,
            template,
            suite_detail_context(request, suite),
            message=_capitalized(exc.message),
            ok=False,
            status=exc.status_code,
            fallback=fallback,
        )
    return action_response(
        request,
        template,
        suite_detail_context(request, suite),
        message=f"Aborted suite {suite.name}: {count} unfinished job{'s' * (count != 1)} stopped.",
        fallback=fallback,
    )


def _job_owners_only(request: HttpRequest, job: Job) -> HttpResponse | None:
    """Abort and Priority: the job's owner or lab staff (the buttons hide for others too).

    One rule with the API's `job.partial_update`; its abort also lets a runner give up a job
    its worker holds, which no page offers.
    """
    if roles.may(request.user, "job.partial_update", owner_id=job.owner_id):
        return None
    return error_response(request, "Only the job's owner or lab staff can change it.", 403)


def _job_answer(
    request: HttpRequest, job: Job, *, message: str, ok: bool = True, status: int = 200
) -> HttpResponse:
    """A job action's answer: the queue table when it came from the queue (its filters and page
    kept), else the job page's body, with the result in a toast and inline."""
    fallback = reverse("jobs:job_detail", args=[job.pk])
    if request.POST.get("from") == "queue":
        query = current_list_query(request, reverse("jobs:queue"))
        context = queue_context(request, query, query.get("page"))
        template = "jobs/partials/queue_table.html"
    else:
        context = job_detail_context(request, job)
        template = "jobs/partials/job_detail_body.html"
    context.update(action_message=message, action_ok=ok, action_job=job.pk)
    return action_response(
        request, template, context, message=message, ok=ok, status=status, fallback=fallback
    )


def _priority_text(value: int) -> str:
    """A priority as its badge reads: "cq 70", or "65" between levels."""
    name = badges.priority_name(value)
    return f"{name} {value}" if name else str(value)


@object_action(Job, refuse=_job_owners_only)
def job_abort(request: HttpRequest, job: Job) -> HttpResponse:
    """Abort one job: queued, leased or running (its owner, or staff)."""
    try:
        services.job_abort(job=job, by=request.user, reason=request.POST.get("reason", ""))
    except ServiceError as exc:
        return _job_answer(
            request, job, message=_capitalized(exc.message), ok=False, status=exc.status_code
        )
    return _job_answer(request, job, message=f"Aborted job {job.pk} {job.name}.")


@object_action(Job, refuse=_job_owners_only)
def job_priority(request: HttpRequest, job: Job) -> HttpResponse:
    """Change a queued job's priority (its owner, or staff); the next tick orders by it."""
    try:
        try:
            value = parse_priority(request.POST.get("priority", ""))
        except ValueError as exc:
            raise InvalidInput(f"priority {exc}", field="priority") from None
        old = job.priority
        job = services.job_set_priority(job=job, by=request.user, priority=value)
    except ServiceError as exc:
        return _job_answer(
            request, job, message=_capitalized(exc.message), ok=False, status=exc.status_code
        )
    if old == value:
        message = f"Job {job.pk} {job.name} is already at priority {_priority_text(value)}."
    else:
        message = (
            f"Job {job.pk} {job.name}: priority {_priority_text(old)} → "
            f"{_priority_text(value)}; the next scheduler tick orders the queue by it."
        )
    return _job_answer(request, job, message=message)


def _job_list(
    request: HttpRequest, rows: list[JobRow], data: dict[str, Any]
) -> tuple[list, list, str]:
    """The form's jobs as specs, the rows that gave them, and what is wrong with the list."""
    if data.get("mode") == "fanout":
        return [], [], ""
    minutes = data.get("timeout_minutes")
    specs, filled = job_specs(
        rows,
        max_retries=data.get("max_retries") or 0,
        timeout=timedelta(minutes=minutes) if minutes else None,
        preemptible=bool(data.get("preemptible")),
    )
    if not filled:
        return specs, filled, "Add at least one job: a name and the labels its host needs."
    if job_rows_count(request.POST) > MAX_ROWS:
        # Refuse rather than drop the rows past the limit: a suite missing jobs looks
        # submitted and complete.
        return (
            specs,
            filled,
            (f"The form takes at most {MAX_ROWS} jobs; submit bigger suites through the API."),
        )
    return specs, filled, ""


def _submit_or_preview(
    request: HttpRequest, data: dict[str, Any], *, specs: list, clone: Suite | None
) -> Suite | str:
    """Submit the form's suite, or with Preview only say what the next tick would do with it."""
    fanout = data.get("mode") == "fanout"
    arguments = {
        "name": data["name"],
        "build": data.get("build", ""),
        "priority": data["priority"],
        "min_duts": data["min_duts"],
        "max_duts": data.get("max_duts"),
        "expires_after": data.get("expires_after"),
        "jobs": specs,
        "fanout_labels": data.get("fanout_label_list") if fanout else None,
        "fanout_name": data.get("fanout_name", ""),
        "allow_unmatched": data.get("allow_unmatched", False),
    }
    if "preview" in request.POST:
        return _suite_preview(request.user, arguments)
    signals.suite_notify_check(request.user, data.get("notify", []))
    with transaction.atomic():
        suite = services.suite_submit(owner=request.user, cloned_from=clone, **arguments)
        signals.suite_notify_set(suite, data.get("notify", []))
    return suite


def _submitted(request: HttpRequest, suite: Suite) -> HttpResponse:
    jobs = suite.jobs.count()
    return suite_queued(
        request,
        suite,
        f"Suite {suite.name} submitted with {jobs} job{'s' * (jobs != 1)}. It is in the queue now.",
    )


def _suite_preview(owner: Any, arguments: dict[str, Any]) -> str:
    """Say what the next tick would do with the suite, checked as a submission, saved nowhere."""
    now = timezone.now()
    suite, jobs = services.suite_prepare(owner=owner, now=now, **arguments)
    return whatif.summary(
        whatif.plan_change(whatif.Change(new_suite=suite, new_jobs=jobs), now=now)
    )


def _form_context(
    request: HttpRequest, form: SuiteForm, rows: list[JobRow], **extra: Any
) -> dict[str, Any]:
    # Offer only the priorities the submitter may use (docs/security.md#submission-limits).
    top = limits.submit_limits_for(request.user).max_priority
    return {
        "form": form,
        "rows": rows,
        "priorities": [(v, text) for v, text in PRIORITY_CHOICES if top is None or v <= top],
        "mode": (form.data.get("mode") if form.is_bound else None) or "jobs",
        "rows_with_errors": any(row.has_errors for row in rows),
        **extra,
    }


def _field_error(form: SuiteForm, exc: InvalidInput) -> str:
    """Show a refusal on the form field it names; return it when it is about the job list."""
    if exc.field in form.fields:
        form.add_error(exc.field, field_message(exc))
        return ""
    message = _capitalized(form_wording(exc.message))
    if exc.field == "jobs":
        return message
    form.add_error(None, message)
    return ""


@ui_login_required
@require_http_methods(["GET", "POST"])
def suite_create(request: HttpRequest) -> HttpResponse:
    """Submit a suite: a list of jobs, or one job per host carrying some labels (fan-out)."""
    clone = clone_source(request)
    if refused := owners_only("suite.clone")(request, clone):
        return refused
    if request.method == "GET":
        form, rows, extra = clone_form(clone) if clone else (SuiteForm(), [JobRow(), JobRow()], {})
        return render(request, "jobs/suite_form.html", _form_context(request, form, rows, **extra))
    form = SuiteForm(request.POST)
    rows = job_rows_from(request.POST)
    valid = form.is_valid()
    data = form.cleaned_data
    refused: ServiceError | None = None
    specs, filled, jobs_error = _job_list(request, rows, data)
    preview = ""
    if valid and not jobs_error and not any(row.has_errors for row in rows):
        try:
            outcome = _submit_or_preview(request, data, specs=specs, clone=clone)
        except InvalidInput as exc:
            refused = exc
            if not row_error(filled, exc):
                jobs_error = _field_error(form, exc)
        except ServiceError as exc:
            refused = exc
            form.add_error(None, _capitalized(exc.message))
        else:
            if isinstance(outcome, str):
                preview = outcome
            else:
                return _submitted(request, outcome)
    context = _form_context(
        request, form, rows or [JobRow()], jobs_error=jobs_error, clone_of=clone, preview=preview
    )
    template = (
        "jobs/partials/suite_form_body.html"
        if wants_fragment(request)
        else ("jobs/suite_form.html")
    )
    status = refused.status_code if refused else (200 if preview else 400)
    response = render(request, template, context, status=status)
    if isinstance(refused, LimitExceeded):
        response["Retry-After"] = str(refused.retry_after)
    return response


@ui_login_required
@require_GET
def suite_job_row(request: HttpRequest) -> HttpResponse:
    """One more empty job row for the submit form."""
    return render(request, "jobs/partials/job_row.html", {"row": JobRow(), "focus": True})


@ui_login_required
@require_GET
def suite_role_row(request: HttpRequest) -> HttpResponse:
    """One more empty role row for a job row of the submit form (?job= its job row's key)."""
    job = request.GET.get("job", "")
    if not ROW_KEY.match(job):
        return HttpResponse("job: the job row's key, 8 hex digits", status=400)
    context = {"role": RoleRow(), "job_key": job, "focus": True}
    return render(request, "jobs/partials/role_row.html", context)
