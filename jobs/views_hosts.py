"""Hosts and workers pages: lists with the API's filters, detail pages and in-place actions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from hosts import services
from hosts.choices import EventKind, HostStatus
from hosts.filtersets import HostFilterSet, WorkerFilterSet
from hosts.forms import BulkHostsForm, ReasonForm, split_labels
from hosts.models import Host, HostEvent, Label, Worker
from hosts.selectors import with_label_names
from hosts.views_timeline import timeline_context
from jobs import host_selectors as health
from jobs import selectors
from jobs import services as job_services
from jobs.choices import JobKind, ReservationStatus
from jobs.forms import RESERVE_DURATIONS, reserve_durations
from jobs.models import Job, Lease, Reservation
from jobs.recovery import sooner_repair_at
from jobs.scheduling.queue import host_waiters
from schedsite import links, roles
from schedsite.errors import InvalidInput, ServiceError
from schedsite.links import route_url
from schedsite.ui.htmx import (
    action_response,
    clean_query,
    current_list_query,
    detail_view,
    filtered_page,
    page_or_fragment,
    refresh_seconds,
    staff_only,
    ui_login_required,
    wants_fragment,
)

HOSTS_PER_PAGE = 50
WORKERS_PER_PAGE = 50
WAITERS_SHOWN = 10  # queued jobs listed under "Waiting for this host"
EMBEDDED_HOSTS = 100  # hosts listed on a worker's page before "see all"
SUGGESTIONS = 8


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# --- querysets ------------------------------------------------------------------------------


def host_queryset() -> QuerySet[Host]:
    """Hosts with everything a host's page shows, in a fixed number of queries."""
    active = Prefetch(
        "leases",
        queryset=Lease.objects.active().select_related("job__suite", "job__owner", "holder"),
        to_attr="active_leases",
    )
    return Host.objects.select_related("worker", "locked_by").prefetch_related("labels", active)


def host_list_queryset() -> QuerySet[Host]:
    """Hosts with what a table row shows (its labels come from host_rows, not a prefetch)."""
    active = Prefetch(
        "leases",
        queryset=Lease.objects.active().select_related("job__suite", "holder"),
        to_attr="active_leases",
    )
    return Host.objects.select_related("worker", "locked_by").prefetch_related(active)


LABEL_CHIP = '<a class="chip" href="{}" title="{}">{}</a>'


def host_rows(hosts: list[Host]) -> list[Host]:
    """Set what each host's table row shows that costs a lookup per row in a template.

    Its labels (read in one query), its links (each route reversed once per page) and its
    label chips (each label's chip made once per page): a template spent more time on these
    than on the rest of a page of 50 rows (docs/performance.md#the-list-pages).
    """
    with_label_names(hosts)
    host_url = route_url("hosts:host_detail", links.NAMES)
    worker_url = route_url("hosts:worker_detail", links.NAMES)
    suite_url = route_url("jobs:suite_detail")
    label_url = route_url(links.LABEL_PAGE, links.LABELS)
    job_url = route_url("jobs:job_detail")
    # Hosts the latest tick keeps free for a multi-host job, one read of the tick row for the
    # page (docs/scheduling.md#holds-and-backfill).
    holds = selectors.current_holds() if hosts else {}
    chips: dict[str, str] = {}
    for host in hosts:
        host.row_held_for = holds.get(host.pk)
        host.row_held_url = job_url(host.row_held_for) if host.row_held_for else ""
        host.row_url = host_url(host.hostname)
        host.row_worker_url = worker_url(host.worker.name) if host.worker else ""
        lease = host.active_leases[0] if host.active_leases else None
        host.row_lease = lease
        suite_id = lease.job.suite_id if lease and lease.job_id else None
        host.row_suite_url = suite_url(suite_id) if suite_id else ""
        host.row_job_url = job_url(lease.job_id) if lease and lease.job_id else ""
        for name in host.label_names:
            if name not in chips:
                chips[name] = format_html(
                    LABEL_CHIP, label_url(name), links.LABEL_TITLE.format(name), name
                )
        host.row_labels = mark_safe("".join(chips[name] for name in host.label_names))  # noqa: S308
    return hosts


def worker_queryset() -> QuerySet[Worker]:
    """Workers by name, with who paused them and their runner account."""
    return Worker.objects.select_related("paused_by", "runner").order_by("name")


def with_host_counts(workers: list[Worker]) -> list[Worker]:
    """Set n_hosts, n_ready, n_locked, n_leased and n_running on each worker, in one query."""
    # One GROUP BY over the page's hosts; joining workers to hosts to leases instead would make
    # the database count every lease a host ever had.
    active = Lease.objects.active().filter(host=OuterRef("pk"))
    running = Host.objects.taking_capacity().values("pk")  # what the worker's capacity counts
    rows = (
        Host.objects.filter(worker__in=workers)
        .values("worker_id")
        .annotate(
            n_hosts=Count("id"),
            n_ready=Count("id", filter=Q(status=HostStatus.READY)),
            n_locked=Count("id", filter=Q(locked=True)),
            n_leased=Count("id", filter=Exists(active)),
            n_running=Count("id", filter=Q(id__in=running)),
        )
        .order_by()
    )
    counts = {row.pop("worker_id"): row for row in rows}
    for worker in workers:
        for key in ("n_hosts", "n_ready", "n_locked", "n_leased", "n_running"):
            setattr(worker, key, counts.get(worker.pk, {}).get(key, 0))
    return workers


# --- hosts ----------------------------------------------------------------------------------


def host_list_context(request: HttpRequest, query: QueryDict, page_number: str | None) -> dict:
    """What the hosts table needs for the given filters and page."""
    context = filtered_page(
        HostFilterSet,
        host_list_queryset(),
        query,
        page_number,
        per_page=HOSTS_PER_PAGE,
        path=reverse("hosts:host_list"),
    )
    htmx = getattr(request, "htmx", None)
    return {
        **context,
        "hosts": host_rows(list(context["page_obj"].object_list)),
        "labels_selected": query.getlist("label"),
        "status_selected": query.getlist("status"),
        "staff": roles.is_staff(request.user),
        "refresh": refresh_seconds(),
        "statuses": HostStatus.choices,
        # The label chips are re-rendered only when the filter form asked, never on a poll
        # (a poll must not clobber what someone is typing into the filter form).
        "oob_filters": bool(htmx) and htmx.trigger == "host-filters",
    }


@ui_login_required
@require_http_methods(["GET", "POST"])
def host_list(request: HttpRequest) -> HttpResponse:
    """The hosts table, filtered like /api/hosts/; POST locks or unlocks the ticked hosts."""
    if request.method == "POST":
        return _host_bulk(request)
    context = host_list_context(request, clean_query(request.GET), request.GET.get("page"))
    if not wants_fragment(request):
        context["worker_names"] = list(Worker.objects.values_list("name", flat=True))
    return page_or_fragment(
        request, "hosts/host_list.html", "hosts/partials/host_table.html", context
    )


# Each bulk action of the hosts table: the rule of schedsite.roles.PERMISSIONS it needs, what
# its summary says of a host it changed, and of one that was already as asked.
BULK_ACTIONS: dict[str, tuple[str, str, str]] = {
    "lock": ("host.bulk_lock", "Locked", "already locked"),
    "unlock": ("host.bulk_lock", "Unlocked", "already unlocked"),
    "verify": ("host.verify", "Verify queued for", ""),
    "repair": ("host.repair", "Repair queued for", ""),
    "label_add": ("host.partial_update", "Labels added to", "already carrying them"),
    "label_remove": ("host.partial_update", "Labels removed from", "already without them"),
}


def _bulk_apply(
    action: str, hosts: list[Host], by: Any, reason: str, labels: list[str]
) -> tuple[dict[str, str | None], set[str]]:
    """Run one bulk action: each host's result (None: done), and those already as asked."""
    if action in ("lock", "unlock"):
        unlock = action == "unlock"
        results = services.hosts_bulk_lock(hosts=hosts, by=by, reason=reason, unlock=unlock)
        already = {h.hostname for h in hosts if results.get(h.hostname) and h.locked != unlock}
        return results, already
    if action in ("verify", "repair"):
        return job_services.hosts_bulk_health(hosts=hosts, by=by, repair=action == "repair"), set()
    add, remove = (labels, []) if action == "label_add" else ([], labels)
    results = services.hosts_bulk_labels(hosts=hosts, by=by, add=add, remove=remove)
    return results, {h for h, why in results.items() if why == services.LABELS_ALREADY}


def _host_bulk(request: HttpRequest) -> HttpResponse:
    form = BulkHostsForm(request.POST)
    form.is_valid()
    data = form.cleaned_data
    action = data.get("action", "lock")
    rule, verb, already_words = BULK_ACTIONS[action]
    if denied := staff_only(request, rule):
        return denied
    list_path = reverse("hosts:host_list")
    query = current_list_query(request, list_path)
    names = data.get("hosts") or []
    reason = data.get("reason", "")
    labels = split_labels(data.get("labels", ""))
    try:
        if "action" not in data:
            raise InvalidInput("choose what to do with the selected hosts", field="action")
        if not names:
            raise InvalidInput("select at least one host first", field="hosts")
        hosts = list(Host.objects.filter(hostname__in=names).order_by("hostname"))
        results, already = _bulk_apply(action, hosts, request.user, reason, labels)
    except ServiceError as exc:
        context = host_list_context(request, query, query.get("page"))
        context.update(
            bulk_error=exc.message,
            selected=set(names),
            bulk_reason=reason,
            bulk_labels=data.get("labels", ""),
        )
        return action_response(
            request,
            "hosts/partials/host_table.html",
            context,
            message=capfirst(exc.message),
            ok=False,
            status=exc.status_code,
            fallback=list_path,
        )
    done = sorted(h for h, why in results.items() if why is None)
    failed = {h: why for h, why in results.items() if why}
    # A host already as asked is no error: the batch still did what was wanted there.
    errors = {h: why for h, why in failed.items() if h not in already}
    message = f"{verb} {plural(len(done), 'host')}"
    if already:
        message += f", {len(already)} {already_words}"
    message += "."
    if errors:
        message += f" {len(errors)} not changed: " + "; ".join(errors.values()) + "."
    # Red only when nothing changed or something went wrong; a batch with some hosts already
    # as asked is neutral news (docs/ui.md#actions).
    tone = "err" if errors or not done else "info" if already else "ok"
    done_words = verb.lower() if action in ("lock", "unlock") else "done"
    notes = {h: (True, done_words) for h in done}
    notes.update({h: (h in already, why) for h, why in failed.items()})
    context = host_list_context(request, query, query.get("page"))
    context.update(row_notes=notes, bulk_message=message, bulk_tone=tone)
    return action_response(
        request,
        "hosts/partials/host_table.html",
        context,
        message=message,
        ok=tone != "err",
        info=tone == "info",
        status=409 if failed and not done else 200,
        fallback=list_path,
    )


def event_outcomes(events: list[HostEvent]) -> None:
    """Give each `completed` event the result of the try it ended (`outcome`, `outcome_label`):
    the job's final status when that lease ended the job, else `failed` (the runner reported it
    failed on a broken host and it was retried; jobs.job_history reads attempts the same way).
    One query for the page."""
    completed = {e.lease_id: e for e in events if e.kind == EventKind.COMPLETED and e.lease_id}
    if not completed:
        return
    rows = Lease.objects.filter(pk__in=list(completed)).values_list(
        "pk", "released_at", "job__status", "job__finished_at", "job__kind"
    )
    for pk, released_at, status, finished_at, kind in rows:
        outcome = status if finished_at is not None and finished_at == released_at else "failed"
        event = completed[pk]
        event.outcome = outcome
        what = "Job" if kind == JobKind.TEST else f"{kind.capitalize()} job"
        event.outcome_label = f"{what} {outcome}"


def host_detail_context(request: HttpRequest, host: Host, **extra: Any) -> dict:
    """Everything the host page shows: state, who holds and who waits, timeline and health."""
    host = host_queryset().get(pk=host.pk)
    lease = host.active_leases[0] if host.active_leases else None
    waiters = host_waiters(host, limit=WAITERS_SHOWN)
    timeline = timeline_context(host)
    event_outcomes(timeline["events"])
    held_for = selectors.current_holds().get(host.pk)
    context = {
        "host": host,
        "lease": lease,
        "held_for": held_for,
        # Its holder or staff may extend or end a reservation (docs/ui.md#reservations).
        "manages_reservation": bool(lease) and lease.managed_by(request.user),
        "waiters": waiters,
        "waiter_reasons": selectors.wait_reasons_for(waiters.jobs) if waiters.jobs else {},
        **timeline,
        "pinned_queued": Job.objects.queued().filter(host=host).count(),
        "staff": roles.is_staff(request.user),
        "now": timezone.now(),
        "refresh": refresh_seconds(),
        "durations": RESERVE_DURATIONS,
        # A tester's "Reserve this host": the durations within their limit; a host that is
        # not free now is waited for in line (docs/ui.md#a-testers-reservations).
        "tester_durations": reserve_durations(request.user),
        "host_free": lease is None
        and held_for is None
        and Host.objects.filter(pk=host.pk).schedulable(timezone.now()).exists(),
        "my_waiting": _waiting_for(request.user, host),
        "live_url": reverse("hosts:host_detail", args=[host.hostname]),
        **host_health_context(host),
    }
    context.update(extra)
    return context


def _waiting_for(user: Any, host: Host) -> dict | None:  # noqa: ANN401
    """The user's own reservation waiting in line for this host by name, and its place."""
    if not getattr(user, "is_authenticated", False):
        return None
    waiting = Reservation.objects.filter(
        owner=user, host=host, status=ReservationStatus.WAITING
    ).first()
    if waiting is None:
        return None
    return {"reservation": waiting, "position": job_services.reservation_position(waiting)}


# The health card's staff buttons, in the order shown; host_health_context picks which.
HEALTH_BUTTONS = [
    {"action": "verify", "label": "Verify now", "icon": "check"},
    {"action": "repair", "label": "Repair now", "icon": "play"},
    {
        "action": "retire",
        "label": "Retire",
        "danger": True,
        "confirm": "Retire {}? It leaves service for good: no test or maintenance job runs on "
        "it again. Its history is kept.",
    },
]


def host_health_context(host: Host) -> dict:
    """The health card: status, repair count, when the next check is due, maintenance history."""
    check, policies = health.next_check(host, now=timezone.now())
    busy = health.has_maintenance_job(host)
    status = host.status
    # A leased host cannot be retired (a 409): say so instead of asking to confirm first.
    active = getattr(host, "active_leases", None)
    leased = bool(active) if active is not None else host.leases.active().exists()
    # The buttons shown are those the services would accept (docs/health.md#staff-actions).
    shown = {
        "verify": status in (HostStatus.READY, HostStatus.NEEDS_VERIFY) and not busy,
        "repair": status not in (HostStatus.REPAIRING, HostStatus.RETIRED),
        "retire": status != HostStatus.RETIRED and not leased,
    }
    return {
        "next_check": check,
        "policies": policies,
        "history": health.maintenance_history(host),
        "repair_max": settings.REPAIR_MAX_ATTEMPTS,
        # When queued jobs that need it would bring its automatic repair forward (health.md).
        "sooner_repair_at": sooner_repair_at(host.repair_rounds, host.next_repair_at)
        if status == HostStatus.REPAIR_FAILED
        else None,
        "maintenance_busy": busy,
        "retire_blocked": status != HostStatus.RETIRED and leased,
        "health_buttons": [
            {**button, "confirm": button.get("confirm", "").format(host.hostname)}
            for button in HEALTH_BUTTONS
            if shown[button["action"]]
        ],
    }


# One host: its state, health, lease, reservation and event timeline.
host_detail = detail_view(Host, host_detail_context)


# --- workers --------------------------------------------------------------------------------


@ui_login_required
@require_GET
def worker_list(request: HttpRequest) -> HttpResponse:
    """Workers with their online state, pause state and host counts."""
    context = filtered_page(
        WorkerFilterSet,
        worker_queryset(),
        clean_query(request.GET),
        request.GET.get("page"),
        per_page=WORKERS_PER_PAGE,
        path=reverse("hosts:worker_list"),
    )
    context["workers"] = with_host_counts(list(context["page_obj"].object_list))
    context["staff"] = roles.is_staff(request.user)
    return page_or_fragment(
        request, "hosts/worker_list.html", "hosts/partials/worker_table.html", context
    )


def worker_detail_context(request: HttpRequest, worker: Worker, **extra: Any) -> dict:
    worker = with_host_counts([worker_queryset().get(pk=worker.pk)])[0]
    context = {
        "worker": worker,
        "hosts": host_rows(list(host_list_queryset().filter(worker=worker)[:EMBEDDED_HOSTS])),
        "events": list(HostEvent.objects.filter(worker=worker).order_by("-created_at", "-id")[:20]),
        "staff": roles.is_staff(request.user),
        "now": timezone.now(),
        "refresh": refresh_seconds(),
        "embedded": True,
        "live_url": reverse("hosts:worker_detail", args=[worker.name]),
        "hosts_url": reverse("hosts:host_list") + "?" + urlencode({"worker": worker.name}),
    }
    context.update(extra)
    return context


# One worker: online and pause state, its hosts and its recent events.
worker_detail = detail_view(Worker, worker_detail_context)


# --- lock, unlock, pause, resume ------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """A host or a worker as its actions find it and answer with its table row or page body."""

    noun: str  # "host" or "worker": the service's argument, the context key, the templates' stem
    key: str  # the field its URL names it by
    model: type[Host] | type[Worker]
    detail_context: Callable[..., dict]
    row_object: Callable[[Any], Any]  # the object again, with what its table row shows


HOST = Target(
    "host",
    "hostname",
    Host,
    host_detail_context,
    lambda h: host_rows([host_list_queryset().get(pk=h.pk)])[0],
)
WORKER = Target(
    "worker",
    "name",
    Worker,
    worker_detail_context,
    lambda w: with_host_counts([worker_queryset().get(pk=w.pk)])[0],
)


@dataclass(frozen=True)
class Switch:
    """One staff action on a host or worker: whose, which service, and what the page says."""

    target: Target
    service: Callable[..., Any]
    action: str  # its staff-only action in schedsite.roles.PERMISSIONS
    done: str  # the message, formatted with the changed object
    reason_form: str = ""  # a lock or a pause: its form's prefix (lock_reason, lock_error)
    error_form: str = ""  # a form without a reason that shows its own error (health_error)


SWITCHES = {
    "host_lock": Switch(
        HOST, services.host_lock, "host.lock", "Locked {0.hostname}: {0.lock_reason}", "lock"
    ),
    "host_unlock": Switch(HOST, services.host_unlock, "host.unlock", "Unlocked {0.hostname}"),
    "worker_pause": Switch(
        WORKER,
        services.worker_pause,
        "worker.pause",
        "Paused {0.name}: {0.paused_reason}",
        "pause",
    ),
    "worker_resume": Switch(WORKER, services.worker_resume, "worker.resume", "Resumed {0.name}"),
    # The health card's buttons (docs/health.md#staff-actions).
    "host_verify": Switch(
        HOST,
        job_services.host_verify_now,
        "host.verify",
        "Verify job queued for {0.hostname}: it runs when the host is free",
        error_form="health",
    ),
    "host_repair": Switch(
        HOST,
        job_services.host_repair_now,
        "host.repair",
        "Repair job queued for {0.hostname}, with a fresh count of attempts",
        error_form="health",
    ),
    "host_retire": Switch(
        HOST,
        job_services.host_delete,
        "host.destroy",
        "Retired {0.hostname}: kept with its history, out of service",
        error_form="health",
    ),
}


def action_fragment(
    request: HttpRequest,
    target: Target,
    obj: Host | Worker,
    *,
    message: str,
    ok: bool = True,
    status: int = 200,
    **extra: Any,
) -> HttpResponse:
    """Answer an action with the piece it came from: a table row or the page body."""
    fallback = reverse(f"hosts:{target.noun}_detail", args=[getattr(obj, target.key)])
    if request.POST.get("fragment") == "detail":
        context = target.detail_context(request, obj, **extra)
        template = f"hosts/partials/{target.noun}_detail_body.html"
    else:
        context = {
            target.noun: target.row_object(obj),
            "staff": roles.is_staff(request.user),
            "now": timezone.now(),
            "note": (ok, message),
            **extra,
        }
        template = f"hosts/partials/{target.noun}_row.html"
    return action_response(
        request, template, context, message=message, ok=ok, status=status, fallback=fallback
    )


@ui_login_required
@require_POST
def hold_change(request: HttpRequest, change: str, **lookup: str) -> HttpResponse:
    """A staff action on a host or worker: lock, unlock, pause, resume, verify, repair, retire.

    A lock or pause needs a reason. Refusals by the service show next to the form they came
    from (or in the row), and the page stays as it was.
    """
    switch = SWITCHES[change]
    if denied := staff_only(request, switch.action):
        return denied
    target = switch.target
    obj = get_object_or_404(target.model, **lookup)  # the route names hostname= or name=
    arguments: dict[str, Any] = {target.noun: obj, "by": request.user}
    if switch.reason_form:
        form = ReasonForm(request.POST)
        arguments["reason"] = form.cleaned_data["reason"] if form.is_valid() else ""
    try:
        changed = switch.service(**arguments)
    except ServiceError as exc:
        extra = {}
        if prefix := switch.reason_form or switch.error_form:
            extra[f"{prefix}_error"] = exc.message
        if switch.reason_form:
            extra[f"{switch.reason_form}_reason"] = arguments["reason"]
        return action_fragment(
            request,
            target,
            obj,
            message=capfirst(exc.message),
            ok=False,
            status=exc.status_code,
            **extra,
        )
    if changed is None:
        # Retiring a host with no history deletes it: its page is gone, go to the list.
        return gone_to_list(request, f"Deleted {obj}: it had no history to keep")
    return action_fragment(request, target, changed, message=switch.done.format(changed))


def gone_to_list(request: HttpRequest, message: str) -> HttpResponse:
    """Leave the page of a host that no longer exists for the hosts list, saying why."""
    messages.success(request, message)
    url = reverse("hosts:host_list")
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


# --- suggestions ----------------------------------------------------------------------------


def _typed(request: HttpRequest, names: tuple[str, ...]) -> str:
    for name in names:
        for value in request.GET.getlist(name):
            if value.strip():
                # No label or hostname holds a NUL, and PostgreSQL refuses one in a query.
                return value.replace("\x00", "")
    return ""


@ui_login_required
@require_GET
def label_suggest(request: HttpRequest) -> HttpResponse:
    """Existing labels matching what is being typed, and how many hosts carry the whole set."""
    raw = _typed(request, ("job_labels", "role_labels", "fanout_labels", "label", "labels"))
    tokens = split_labels(raw)
    finished = not raw or raw[-1] in " ,"
    current = "" if finished or not tokens else tokens[-1]
    chosen = set(tokens)
    suggestions = [
        (name, n)
        for name, n in selectors.label_suggestions(text=current, limit=SUGGESTIONS + len(chosen))
        if name not in chosen or name == current
    ][:SUGGESTIONS]
    # Count with the labels typed so far; a half-typed last word counts only once it is a label.
    counted = tokens if finished else tokens[:-1]
    if current and Label.objects.filter(name=current).exists():
        counted = tokens
    context = {
        "suggestions": suggestions,
        "current": current,
        "counted": counted,
        "matching": selectors.hosts_with_labels_count(counted) if counted else None,
        "mode": "replace" if request.GET.get("mode") == "replace" else "token",
    }
    return render(request, "hosts/partials/label_suggestions.html", context)


@ui_login_required
@require_GET
def host_suggest(request: HttpRequest) -> HttpResponse:
    """Hostnames matching what is being typed, with their state."""
    text = _typed(request, ("job_host", "host", "hostname")).strip()
    hosts = []
    if text:
        hosts = list(
            Host.objects.filter(hostname__icontains=text)
            .order_by("hostname")
            .values("hostname", "status", "locked")[:SUGGESTIONS]
        )
    return render(request, "hosts/partials/host_suggestions.html", {"hosts": hosts, "text": text})
