"""Suite templates pages: everyone reads them; the owner or staff dispatch, change and delete."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_http_methods

from jobs import suite_templates, template_selectors
from jobs.choices import DEFAULT_PRIORITY, parse_priority
from jobs.forms import DispatchForm, TemplateForm
from jobs.models import Suite, SuiteTemplate
from jobs.views_resubmit import suite_queued
from schedsite import roles
from schedsite.errors import ServiceError
from schedsite.ui.htmx import error_response, go_to, object_action, owners_only, ui_login_required

DETAIL_PAGE = "jobs/suitetemplate_detail.html"
RUNS_SHOWN = 50


def _priority(value: object) -> int:
    """The body's priority as a number: it may name a level ("daily"), as the API allows."""
    try:
        return parse_priority(value)
    except ValueError:
        return DEFAULT_PRIORITY


def body_summary(body: dict[str, Any]) -> dict[str, Any]:
    """What a template's body submits, as its page lists it."""
    fanout = body.get("fanout") or {}
    jobs = body.get("jobs") or []
    return {
        "name": body.get("name", ""),
        "build": body.get("build", ""),
        "priority": _priority(body.get("priority", DEFAULT_PRIORITY)),
        "min_duts": body.get("min_duts") or 0,
        "max_duts": body.get("max_duts"),
        "fanout_labels": fanout.get("labels", []),
        "jobs": [
            {"name": j.get("name", ""), "labels": j.get("labels", []), "host": j.get("host")}
            for j in jobs
        ],
    }


@ui_login_required
@require_GET
def template_list(request: HttpRequest) -> HttpResponse:
    """Every suite template: its schedule, next run and last run with its suite's status."""
    templates = template_selectors.attach_last_runs(list(template_selectors.templates_list()))
    for template in templates:
        template.cron_words = suite_templates.cron_words(template.cron)
    context = {"templates": templates, "now": timezone.now()}
    return render(request, "jobs/suitetemplate_list.html", context)


def detail_context(request: HttpRequest, template: SuiteTemplate, **extra: Any) -> dict[str, Any]:
    template = template_selectors.templates_list().get(pk=template.pk)
    runs = template_selectors.template_runs(template)[:RUNS_SHOWN]
    context = {
        "template": template,
        "summary": body_summary(template.body),
        "cron_words": suite_templates.cron_words(template.cron),
        "runs": template_selectors.annotate_suite_status(list(runs)),
        "can_manage": roles.can_manage(request.user, template.owner_id),
        "form": TemplateForm(
            initial={"name": template.name, "cron": template.cron, "enabled": template.enabled}
        ),
        "dispatch_form": DispatchForm(),
        "now": timezone.now(),
    }
    context.update(extra)
    return context


def _with_error(form: Any, exc: ServiceError) -> None:
    form.add_error(exc.field if exc.field in form.fields else None, capfirst(exc.message))


@ui_login_required
@require_http_methods(["GET", "POST"])
def template_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One template: what it submits, its runs; POST changes its name, cron or state."""
    template = get_object_or_404(SuiteTemplate, pk=pk)
    if request.method == "GET":
        return render(request, DETAIL_PAGE, detail_context(request, template))
    if denied := owners_only("template.partial_update")(request, template):
        return denied
    form = TemplateForm(request.POST)
    form.is_valid()  # every field is optional text or a tick box: the service checks them
    try:
        suite_templates.template_update(
            template=template, by=request.user, **form.template_fields()
        )
    except ServiceError as exc:
        _with_error(form, exc)
        context = detail_context(request, template, form=form, edit_open=True)
        return render(request, DETAIL_PAGE, context, status=exc.status_code)
    messages.success(request, f"Saved template {form.cleaned_data['name'].strip()}.")
    return go_to(request, reverse("jobs:template_detail", args=[template.pk]))


@object_action(SuiteTemplate, refuse=owners_only("template.dispatch_template"))
def template_dispatch(request: HttpRequest, template: SuiteTemplate) -> HttpResponse:
    """Submit a new suite from the template, then show it."""
    form = DispatchForm(request.POST)
    status = 400
    if form.is_valid():
        try:
            suite = suite_templates.template_dispatch(
                template=template, by=request.user, params=form.params()
            )
        except ServiceError as exc:
            _with_error(form, exc)
            status = exc.status_code
        else:
            return suite_queued(
                request, suite, f"Dispatched {template.name}: suite {suite.name} queued."
            )
    context = detail_context(request, template, dispatch_form=form)
    return render(request, DETAIL_PAGE, context, status=status)


@object_action(SuiteTemplate, refuse=owners_only("template.destroy"))
def template_delete(request: HttpRequest, template: SuiteTemplate) -> HttpResponse:
    """Delete the template and its schedule; its suites stay."""
    try:
        suite_templates.template_delete(template=template, by=request.user)
    except ServiceError as exc:
        return error_response(request, capfirst(exc.message), exc.status_code)
    messages.success(request, f"Deleted template {template.name}.")
    return go_to(request, reverse("jobs:template_list"))


@object_action(Suite, refuse=owners_only("suite.save_as_template"))
def suite_save_template(request: HttpRequest, suite: Suite) -> HttpResponse:
    """Save a suite as a template (its owner, or staff), then show the template."""
    name = request.POST.get("name", "").strip() or suite.name
    try:
        template = suite_templates.template_from_suite(by=request.user, suite=suite, name=name)
    except ServiceError as exc:
        return error_response(request, capfirst(exc.message), exc.status_code)
    messages.success(request, f"Saved suite {suite.name} as template {template.name}.")
    return go_to(request, reverse("jobs:template_detail", args=[template.pk]))
