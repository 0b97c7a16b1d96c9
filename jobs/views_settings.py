"""The scheduler settings page: everyone reads them and their history; staff change them."""

from __future__ import annotations

from functools import partial
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from django.utils.text import capfirst
from django.views.decorators.http import require_http_methods

from jobs import services
from jobs.forms import SchedulerSettingsForm
from jobs.models import SchedulerSettings, SchedulerSettingsChange
from schedsite import roles
from schedsite.errors import Conflict, ServiceError
from schedsite.ui.htmx import form_answer, paginate, staff_only, ui_login_required

PAGE = "jobs/schedulersettings_form.html"
BODY = "jobs/partials/schedulersettings_body.html"
HISTORY_PER_PAGE = 20
NOT_SAVED = "The scheduler settings were not saved: see the form."


def settings_context(
    request: HttpRequest, form: SchedulerSettingsForm | None = None, conflict: str = ""
) -> dict[str, Any]:
    """The settings as they are now, their form (the given one, or one showing them), history.

    `conflict` says, above a form showing the current values, why the typed ones were dropped.
    """
    current = SchedulerSettings.load()
    return {
        "conflict": conflict,
        "settings": current,
        "form": form or SchedulerSettingsForm.of(current),
        "staff": roles.is_staff(request.user),
        "history": paginate(
            SchedulerSettingsChange.objects.all(), request.GET.get("page"), HISTORY_PER_PAGE
        ),
        "query": {},
        "now": timezone.now(),
        "form_url": reverse("jobs:scheduler_settings"),
    }


def refused(request: HttpRequest, form: SchedulerSettingsForm, exc: ServiceError) -> HttpResponse:
    """The page again with the refusal; after someone else's change, with their values."""
    if isinstance(exc, Conflict):
        # The typed values were meant for settings that no longer exist: show the ones that do
        # (settings_context's fresh form), so that whoever saves next starts from them.
        message = (
            "Someone else changed the scheduler settings while you were editing them: "
            "these are the current values. Make your change again if it still applies."
        )
        context = settings_context(request, conflict=message)
        return answer(request, context, message=message, ok=False, status=exc.status_code)
    # A hidden field (the version) shows nothing: its error goes above the form.
    shown = exc.field in form.fields and not form.fields[exc.field].widget.is_hidden
    form.add_error(exc.field if shown else None, capfirst(exc.message))
    context = settings_context(request, form)
    return answer(request, context, message=NOT_SAVED, ok=False, status=exc.status_code)


# The page's body and a toast with htmx; without, back to the page, or the page at fault.
answer = partial(
    form_answer, fragment=BODY, page=PAGE, fallback=reverse_lazy("jobs:scheduler_settings")
)


@ui_login_required
@require_http_methods(["GET", "POST"])
def scheduler_settings(request: HttpRequest) -> HttpResponse:
    """The scheduler settings and who changed them; POST saves them (staff)."""
    if request.method == "GET":
        return render(request, PAGE, settings_context(request))
    if denied := staff_only(request, "scheduler.scheduler_settings_update"):
        return denied
    form = SchedulerSettingsForm(request.POST)
    if not form.is_valid():
        context = settings_context(request, form)
        return answer(request, context, message=NOT_SAVED, ok=False, status=400)
    try:
        saved = services.update_scheduler_settings(
            request.user,
            expected_version=form.cleaned_data["version"],
            reason=form.cleaned_data["reason"],
            **form.settings_fields(),
        )
    except ServiceError as exc:
        return refused(request, form, exc)
    if saved.version == form.cleaned_data["version"]:
        message = "Nothing to save: the scheduler settings already have these values."
    else:
        message = f"Saved the scheduler settings (version {saved.version})."
    return answer(request, settings_context(request), message=message, ok=True, status=200)
