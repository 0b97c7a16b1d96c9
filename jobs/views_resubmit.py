"""Re-run a suite's failed jobs from its page, and pre-fill the submit form with a clone of it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect
from rest_framework.exceptions import ValidationError

from jobs import resubmit
from jobs.forms import SuiteForm, clone_form_values
from jobs.models import Suite
from jobs.suite_body import suite_body
from schedsite import roles
from schedsite.errors import ServiceError
from schedsite.ui.htmx import error_response, ui_login_required


def manage_refused(request: HttpRequest, suite: Suite | None, doing: str) -> HttpResponse | None:
    """Refuse a change to someone else's suite: its owner and lab staff only (the buttons too)."""
    if suite is None or roles.can_manage(request.user, suite.owner_id):
        return None
    return error_response(request, f"Only the suite's owner or lab staff can {doing} it.", 403)


def _go(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


def _messages_of(detail: Any) -> list[str]:
    """Every message of a serializer's error detail, however nested."""
    if isinstance(detail, dict):
        return [m for value in detail.values() for m in _messages_of(value)]
    if isinstance(detail, list):
        return [m for value in detail for m in _messages_of(value)]
    return [str(detail)]


@ui_login_required
@require_POST
def suite_rerun(request: HttpRequest, pk: int) -> HttpResponse:
    """Submit a finished suite's failed jobs again as a new suite (its owner, or staff)."""
    suite = get_object_or_404(Suite, pk=pk)
    if refused := manage_refused(request, suite, "re-run"):
        return refused
    try:
        rerun = resubmit.suite_rerun(suite=suite, owner=request.user)
    except ServiceError as exc:
        messages.error(request, capfirst(exc.message))
    except ValidationError as exc:
        why = " ".join(_messages_of(exc.detail))
        messages.error(request, f"The failed jobs could not be submitted again: {why}")
    else:
        count = rerun.jobs.count()
        messages.success(
            request,
            f"Re-running {count} job{'s' * (count != 1)} of {suite.name} that did not pass. "
            "They are in the queue now.",
        )
        return _go(request, reverse("jobs:suite_detail", args=[rerun.pk]))
    return _go(request, reverse("jobs:suite_detail", args=[suite.pk]))


def clone_source(request: HttpRequest) -> Suite | None:
    """The suite the submit form clones: `?clone=ID` to open it, `cloned_from` when posted."""
    value = (
        request.POST.get("cloned_from") if request.method == "POST" else request.GET.get("clone")
    )
    if not value:
        return None
    if not value.isdigit():
        raise Http404("No such suite.")
    return get_object_or_404(Suite, pk=int(value))


def clone_form(suite: Suite) -> tuple[SuiteForm, list, dict[str, Any]]:
    """The submit form pre-filled with a copy of the suite, and what it could not keep."""
    initial, rows, lost = clone_form_values(suite_body(suite))
    extra = {"clone_of": suite, "clone_lost": lost, "mode": initial.get("mode", "jobs")}
    return SuiteForm(initial=initial), rows, extra
