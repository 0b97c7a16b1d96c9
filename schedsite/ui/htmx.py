"""What every UI view shares: the page or its htmx fragment, toasts, login, live list URLs."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import wraps
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render, resolve_url
from django.template.loader import render_to_string
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_filters import FilterSet
from django_htmx.http import HttpResponseClientRedirect

from schedsite import roles

View = Callable[..., HttpResponse]
# Answers instead of a view when the person may not do what it does; None lets them.
Refusal = Callable[[HttpRequest, Any], HttpResponse | None]


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


def current_list_query(request: HttpRequest, path: str) -> QueryDict:
    """The filters of the page an htmx action came from, if it is the given list page."""
    current = request.htmx.current_url_abs_path if getattr(request, "htmx", False) else None
    parts = urlsplit(current or "")
    return clean_query(QueryDict(parts.query if current and parts.path == path else ""))


def paginate(items: Any, page_number: str | None, per_page: int) -> Page:
    """One page of a list; a missing or bad page number gives the first or the last page."""
    return Paginator(items, per_page).get_page(page_number)


def live_url(path: str, query: QueryDict, page: Page | None = None) -> str:
    """The URL a live table polls: its filters and its current page."""
    q = query.copy()
    if page is not None and page.number > 1:
        q["page"] = str(page.number)
    encoded = q.urlencode()
    return f"{path}?{encoded}" if encoded else path


def filtered_page(
    filterset_class: type[FilterSet],
    queryset: QuerySet,
    query: QueryDict,
    page_number: str | None,
    *,
    per_page: int,
    path: str,
) -> dict[str, Any]:
    """One page of a list page's rows filtered by `query`, and what every list page shows.

    The context's `page_obj`, `query`, `filter_errors`, `now`, and the `live_url` its table
    polls (the list at `path`, with these filters and this page).
    """
    filterset = filterset_class(query, queryset=queryset)
    page = paginate(filterset.qs, page_number, per_page)
    return {
        "page_obj": page,
        "query": query,
        "filter_errors": filterset.errors,
        "now": timezone.now(),
        "live_url": live_url(path, query, page),
    }


def toast_html(message: str, *, ok: bool = True, info: bool = False) -> str:
    """An out-of-band swap that announces the result of an action in the page's live region.

    `info`: a neutral result, neither a clean success nor a failure (some of a batch skipped).
    """
    return render_to_string("partials/toast.html", {"message": message, "ok": ok, "info": info})


def action_response(
    request: HttpRequest,
    template: str,
    context: dict[str, Any],
    *,
    message: str,
    ok: bool = True,
    status: int = 200,
    fallback: str = "/",
    info: bool = False,
) -> HttpResponse:
    """Render the fragment an action swaps in, plus a toast; without htmx, redirect back."""
    if not getattr(request, "htmx", False):
        # A plain form post (no JavaScript): say what happened on the page we go back to.
        level = messages.INFO if info else messages.SUCCESS if ok else messages.ERROR
        messages.add_message(request, level, message)
        return redirect(safe_next(request, fallback))
    html = render_to_string(template, context, request) + toast_html(message, ok=ok, info=info)
    return HttpResponse(html, status=status)


def form_answer(
    request: HttpRequest,
    context: dict[str, Any],
    *,
    fragment: str,
    page: str,
    fallback: str,
    message: str,
    ok: bool,
    status: int,
) -> HttpResponse:
    """A form page's answer: its fragment and a toast with htmx; without, back to the page on
    success, or the page again with the errors next to the fields when it was refused."""
    if ok or getattr(request, "htmx", False):
        return action_response(
            request,
            fragment,
            context,
            message=message,
            ok=ok,
            status=status,
            fallback=str(fallback),
        )
    return render(request, page, context, status=status)


def error_response(request: HttpRequest, message: str, status: int) -> HttpResponse:
    """An error that belongs to no field: shown as a toast, leaving the page as it is."""
    if not getattr(request, "htmx", False):
        html = render_to_string("partials/error_page.html", {"message": message, "status": status})
        return HttpResponse(html, status=status)
    response = HttpResponse(toast_html(message, ok=False), status=status)
    response["HX-Reswap"] = "none"
    return response


def staff_only(request: HttpRequest, action: str) -> HttpResponse | None:
    """Refuse a staff-only action of schedsite.roles.PERMISSIONS to anyone else (the controls
    are hidden, this is the guard)."""
    rule = roles.PERMISSIONS[action]
    if rule.who is not roles.Who.STAFF:
        raise ValueError(f"{action} is not a staff-only action")
    if roles.may(request.user, action):
        return None
    return error_response(request, f"Only lab staff can {rule.doing}.", 403)


def owners_only(action: str) -> Refusal:
    """Refuse an owner's action of schedsite.roles.PERMISSIONS ("suite.abort") to all but the
    object's owner and lab staff (the buttons hide too)."""
    rule = roles.PERMISSIONS[action]
    if rule.who is not roles.Who.OWNER:
        raise ValueError(f"{action} is not an owner's action")
    noun = action.partition(".")[0]

    def refused(request: HttpRequest, obj: Any) -> HttpResponse | None:
        if obj is None or roles.may(request.user, action, owner_id=obj.owner_id):
            return None
        message = f"Only the {noun}'s owner or lab staff can {rule.doing} it."
        return error_response(request, message, 403)

    return refused


def staff_form_page(action: str) -> Callable[[View], View]:
    """A form page for lab staff (GET shows it, POST saves it): a staff-only `action`."""

    def decorate(view: View) -> View:
        @ui_login_required
        @require_http_methods(["GET", "POST"])
        @wraps(view)
        def page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if denied := staff_only(request, action):
                return denied
            return view(request, *args, **kwargs)

        return page

    return decorate


def object_action(
    found_in: type[Model] | QuerySet, *, refuse: Refusal | None = None
) -> Callable[[View], View]:
    """A signed-in POST on the object the URL's pk names: the view gets the object, not the pk.

    `refuse(request, obj)`, when given, may answer instead (someone else's suite: a 403).
    """

    def decorate(view: View) -> View:
        @ui_login_required
        @require_POST
        @wraps(view)
        def action(request: HttpRequest, pk: int) -> HttpResponse:
            obj = get_object_or_404(found_in, pk=pk)
            if refuse is not None and (refused := refuse(request, obj)):
                return refused
            return view(request, obj)

        return action

    return decorate


def go_to(request: HttpRequest, url: str) -> HttpResponse:
    """To another page: htmx follows with a full load, a plain form post with a redirect."""
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


def safe_next(request: HttpRequest, fallback: str) -> str:
    """Where to go back to after a form post: `next` or the referrer, if it is on this site."""
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


def detail_view(model: type[Model], context: Callable[..., dict[str, Any]]) -> View:
    """The page of one object, found by the URL's lookup, or only its body when htmx asks.

    Django's DetailView names: `<app>/<model>_detail.html` around the body partial
    `<app>/partials/<model>_detail_body.html`, rendered with `context(request, obj)`.
    """
    meta = model._meta
    page = f"{meta.app_label}/{meta.model_name}_detail.html"
    body = f"{meta.app_label}/partials/{meta.model_name}_detail_body.html"

    @ui_login_required
    @require_GET
    def view(request: HttpRequest, **lookup: Any) -> HttpResponse:
        return page_or_fragment(
            request, page, body, context(request, get_object_or_404(model, **lookup))
        )

    # Named like the function it stands for, where it is used (logs, Django's debug pages).
    view.__name__ = view.__qualname__ = f"{meta.model_name}_detail"
    view.__module__ = context.__module__
    return view
