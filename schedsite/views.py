"""The dashboard, the profile page, and the helpers every UI view shares (htmx partials, toasts)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Page, Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render, resolve_url
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect
from rest_framework.authtoken.models import Token

from jobs import selectors
from schedsite import roles
from schedsite.ui.charts import Series, line_chart
from schedsite.ui.durations import human_duration

View = Callable[..., HttpResponse]

CHART_TICKS = 120  # ticks drawn on the dashboard charts
SUITES_ON_DASHBOARD = 8


# --- helpers shared by the UI views ---------------------------------------------------------


def refresh_seconds() -> int:
    """How often live tables poll; tests turn it down to keep browser tests quick."""
    return int(getattr(settings, "UI_REFRESH_SECONDS", 5))


def wants_fragment(request: HttpRequest) -> bool:
    """An htmx request for a piece of the page (not a boosted navigation or a history restore)."""
    htmx = getattr(request, "htmx", None)
    return bool(htmx) and not htmx.boosted and not htmx.history_restore_request


def ui_login_required(view: View) -> View:
    """login_required that sends htmx requests to the login page with a full-page redirect."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if request.user.is_authenticated:
            return view(request, *args, **kwargs)
        if getattr(request, "htmx", False):
            # A poll from a page whose session expired: reload into the login form instead of
            # swapping the login page into a table cell.
            back = request.htmx.current_url_abs_path or "/"
            login = resolve_url(settings.LOGIN_URL)
            return HttpResponseClientRedirect(f"{login}?{urlencode({'next': back})}")
        return redirect_to_login(request.get_full_path())

    return wrapper


def clean_query(data: QueryDict, *, drop: Iterable[str] = ("page",)) -> QueryDict:
    """The filter parameters without empty values (an empty ?label= would match nothing)."""
    cleaned = QueryDict(mutable=True)
    for key in data:
        if key in drop:
            continue
        values = [v.strip() for v in data.getlist(key) if v.strip()]
        if values:
            cleaned.setlist(key, values)
    return cleaned


def query_from_current_url(request: HttpRequest, path: str) -> QueryDict:
    """The query string of the page an htmx action came from, if it is the given list page."""
    current = request.htmx.current_url_abs_path if getattr(request, "htmx", False) else None
    if current:
        parts = urlsplit(current)
        if parts.path == path:
            return QueryDict(parts.query)
    return QueryDict()


def paginate(items: Any, page_number: str | None, per_page: int) -> Page:
    return Paginator(items, per_page).get_page(page_number)


def live_url(path: str, query: QueryDict, page: Page | None = None) -> str:
    """The URL a live table polls: its filters and its current page."""
    q = query.copy()
    if page is not None and page.number > 1:
        q["page"] = str(page.number)
    encoded = q.urlencode()
    return f"{path}?{encoded}" if encoded else path


def toast_html(message: str, *, ok: bool = True) -> str:
    """An out-of-band swap that announces the result of an action in the page's live region."""
    return render_to_string("partials/toast.html", {"message": message, "ok": ok})


def action_response(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    message: str,
    ok: bool = True,
    status: int = 200,
    fallback: str = "/",
) -> HttpResponse:
    """Render the fragment an action swaps in, plus a toast; without htmx, redirect back."""
    if not getattr(request, "htmx", False):
        # A plain form post (no JavaScript): say what happened on the page we go back to.
        messages.add_message(request, messages.SUCCESS if ok else messages.ERROR, message)
        return redirect(safe_next(request, fallback))
    html = render_to_string(template, context, request) + toast_html(message, ok=ok)
    return HttpResponse(html, status=status)


def error_response(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """An error that belongs to no field: shown as a toast, leaving the page as it is."""
    if not getattr(request, "htmx", False):
        html = render_to_string("partials/error_page.html", {"message": message, "status": status})
        return HttpResponse(html, status=status)
    response = HttpResponse(toast_html(message, ok=False), status=status)
    response["HX-Reswap"] = "none"
    return response


def staff_only(request: HttpRequest, what: str) -> HttpResponse | None:
    """Refuse a staff-only action to anyone else (the controls are hidden, this is the guard)."""
    if roles.is_staff(request.user):
        return None
    return error_response(request, f"Only lab staff can {what}.", 403)


def safe_next(request: HttpRequest, fallback: str) -> str:
    target = request.POST.get("next") or request.headers.get("Referer") or fallback
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


def page_or_fragment(
    request: HttpRequest, page: str, fragment: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """NetBox style: the whole page, or only its fragment when htmx asks for it."""
    context.setdefault("refresh", refresh_seconds())
    response = render(
        request, fragment if wants_fragment(request) else page, context, status=status
    )
    # The same URL answers with a page or a fragment: caches must keep them apart.
    patch_vary_headers(response, ["HX-Request"])
    trigger = getattr(request, "htmx", None) and request.htmx.trigger
    if trigger and trigger.endswith("-filters") and context.get("live_url"):
        # A filter form sends its empty fields too; put the clean address in the location bar.
        response["HX-Push-Url"] = context["live_url"]
    return response


# --- dashboard ------------------------------------------------------------------------------


def dashboard_charts(ticks: list) -> list:
    """Queue length, hosts leased and oldest wait over the recent ticks."""
    times = [t.started_at for t in ticks]
    last = ticks[-1] if ticks else None
    queued = [t.queued_after for t in ticks]
    leased = [t.hosts_leased for t in ticks]
    total = [t.hosts_total for t in ticks]
    wait = [t.oldest_wait_s for t in ticks]
    util = round(100 * last.hosts_leased / last.hosts_total) if last and last.hosts_total else 0
    tz = timezone.get_current_timezone()
    return [
        line_chart(
            chart_id="chart-queue",
            title="Queue length",
            times=times,
            series=[Series("Queued jobs", queued, tone="indigo", area=True)],
            tz=tz,
            summary=f"{last.queued_after} queued now" if last else "",
        ),
        line_chart(
            chart_id="chart-leased",
            title="Hosts leased",
            times=times,
            series=[
                Series("Leased", leased, tone="blue", area=True),
                Series("All hosts", total, tone="slate", dashed=True),
            ],
            tz=tz,
            summary=f"{last.hosts_leased} of {last.hosts_total} ({util}%)" if last else "",
        ),
        line_chart(
            chart_id="chart-wait",
            title="Oldest wait",
            times=times,
            series=[Series("Oldest queued job", wait, tone="amber", area=True)],
            seconds=True,
            tz=tz,
            summary=f"{human_duration(last.oldest_wait_s)} now" if last else "",
        ),
    ]


@ui_login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    """Counts, utilization, charts over the recent ticks and the suites in progress."""
    now = timezone.now()
    counts = selectors.dashboard_counts(now=now)
    ticks = selectors.recent_ticks(limit=CHART_TICKS)
    suites, suites_total = selectors.suites_in_progress(limit=SUITES_ON_DASHBOARD)
    ids = [s.pk for s in suites]
    job_counts = selectors.suite_job_counts(ids)
    held = selectors.suite_hosts_held(ids)
    rows = [
        {"suite": s, "counts": job_counts.get(s.pk, {}), "held": held.get(s.pk, 0)} for s in suites
    ]
    total = counts["hosts_total"]
    context = {
        "now": now,
        "counts": counts,
        "utilization": round(100 * counts["hosts_leased"] / total) if total else 0,
        "charts": dashboard_charts(ticks),
        "last_tick": ticks[-1] if ticks else None,
        "suite_rows": rows,
        "suites_total": suites_total,
        "live_url": request.path,
    }
    return page_or_fragment(request, "dashboard.html", "partials/dashboard_panels.html", context)


# --- profile --------------------------------------------------------------------------------


@ui_login_required
@require_http_methods(["GET", "POST"])
def profile(request: HttpRequest) -> HttpResponse:
    """Who you are, your roles, and your API token (created or regenerated here)."""
    token = Token.objects.filter(user=request.user).first()
    if request.method == "POST":
        with transaction.atomic():
            # Regenerating revokes the old token at once: scripts using it get 401 from now on.
            replaced = Token.objects.filter(user=request.user).delete()[0] > 0
            token = Token.objects.create(user=request.user)
        message = (
            "New API token created; the old one no longer works."
            if replaced
            else ("API token created.")
        )
        return action_response(
            request,
            "accounts/partials/token_panel.html",
            {"token": token, "just_created": True},
            message=message,
            fallback=request.path,
        )
    context = {
        "token": token,
        "is_staff": roles.is_staff(request.user),
        "is_runner": roles.is_runner(request.user),
        "api_base": request.build_absolute_uri("/api/"),
    }
    return render(request, "accounts/profile.html", context)


@ui_login_required
@require_POST
def token_revoke(request: HttpRequest) -> HttpResponse:
    """Delete your API token: scripts using it get 401 from now on, and none replaces it."""
    revoked = Token.objects.filter(user=request.user).delete()[0] > 0
    message = "API token revoked; it no longer works." if revoked else "You had no API token."
    return action_response(
        request,
        "accounts/partials/token_panel.html",
        {"token": None},
        message=message,
        fallback=resolve_url("profile"),
    )
