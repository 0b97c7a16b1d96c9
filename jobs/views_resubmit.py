"""Re-run a suite's failed jobs from its page, and pre-fill the submit form with a clone of it."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.text import capfirst
from rest_framework.exceptions import ValidationError

from jobs import resubmit
from jobs.forms import SuiteForm, clone_form_values
from jobs.models import Suite
from jobs.suite_body import suite_body
from schedsite.errors import ServiceError
from schedsite.ui.htmx import go_to, object_action, owners_only


def _messages_of(detail: Any) -> list[str]:
    """Every message of a serializer's error detail, however nested."""
    if isinstance(detail, dict):
        return [m for value in detail.values() for m in _messages_of(value)]
    if isinstance(detail, list):
        return [m for value in detail for m in _messages_of(value)]
    return [str(detail)]


def suite_queued(request: HttpRequest, suite: Suite, message: str) -> HttpResponse:
    """Say that a new suite is in the queue, and take the person to its page."""
    messages.success(request, message)
    return go_to(request, reverse("jobs:suite_detail", args=[suite.pk]))


@object_action(Suite, refuse=owners_only("suite.rerun"))
def suite_rerun(request: HttpRequest, suite: Suite) -> HttpResponse:
    """Submit a finished suite's failed jobs again as a new suite (its owner, or staff)."""
    try:
        rerun = resubmit.suite_rerun(suite=suite, owner=request.user)
    except ServiceError as exc:
        messages.error(request, capfirst(exc.message))
    except ValidationError as exc:
        why = " ".join(_messages_of(exc.detail))
        messages.error(request, f"The failed jobs could not be submitted again: {why}")
    else:
        count = rerun.jobs.count()
        return suite_queued(
            request,
            rerun,
            f"Re-running {count} job{'s' * (count != 1)} of {suite.name} that did not pass. "
            "They are in the queue now.",
        )
    return go_to(request, reverse("jobs:suite_detail", args=[suite.pk]))


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
