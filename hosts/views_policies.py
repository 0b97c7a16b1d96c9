"""The health policies page: everyone reads them; staff add, change, switch and delete them."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.text import capfirst
from django.views.decorators.http import require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from hosts import selectors as health
from hosts import services
from hosts.forms import HealthPolicyForm
from hosts.models import HealthPolicy
from schedsite import roles
from schedsite.errors import ServiceError
from schedsite.ui.htmx import form_answer, staff_only, ui_login_required

LIST_PAGE = "hosts/healthpolicy_list.html"
LIST_BODY = "hosts/partials/policy_body.html"
EDIT_PAGE = "hosts/healthpolicy_detail.html"
EDIT_BODY = "hosts/partials/policy_form.html"
Save = Callable[[dict[str, object]], HealthPolicy]


def policy_initial(policy: HealthPolicy) -> dict[str, object]:
    """A policy's values as its form shows them."""
    return {
        "name": policy.name,
        "labels": " ".join(policy.labels),
        "every_jobs": policy.every_jobs,
        "every_hours": policy.every_hours,
        "enabled": policy.enabled,
    }


def list_context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    context = {
        "policies": health.policies_with_host_counts(),
        "form": HealthPolicyForm(initial={"enabled": True}),
        "staff": roles.is_staff(request.user),
        "form_url": reverse("hosts:policy_list"),
    }
    context.update(extra)
    return context


def save_policy(request: HttpRequest, form: HealthPolicyForm, save: Save) -> tuple[Any, int]:
    """Parse the form and save through the service: the policy, or None and the error's status.

    A refusal is put next to the field it names (on the form for a name in use), so whoever
    typed it sees what to change; nothing is saved.
    """
    if not form.is_valid():
        return None, 400
    try:
        return save(form.policy_fields()), 200
    except ServiceError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, capfirst(exc.message))
        return None, exc.status_code


# The page's body and a toast with htmx; without, back to the page, or the page at fault.
answer = partial(
    form_answer, fragment=LIST_BODY, page=LIST_PAGE, fallback=reverse_lazy("hosts:policy_list")
)


@ui_login_required
@require_http_methods(["GET", "POST"])
def policy_list(request: HttpRequest) -> HttpResponse:
    """Every health policy, how many hosts it selects; POST adds one (staff)."""
    if request.method == "GET":
        return render(request, LIST_PAGE, list_context(request))
    if denied := staff_only(request, "healthpolicy.create"):
        return denied
    form = HealthPolicyForm(request.POST)
    policy, status = save_policy(
        request, form, lambda fields: services.health_policy_create(by=request.user, **fields)
    )
    if policy is None:
        message = "The policy was not added: see the form."
        context = list_context(request, form=form, form_open=True)
        return answer(request, context, message=message, ok=False, status=status)
    message = f"Added health policy {policy.name}."
    return answer(request, list_context(request), message=message, ok=True, status=200)


@ui_login_required
@require_http_methods(["GET", "POST"])
def policy_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One policy: its form (staff change it here), or its values for everyone else."""
    policy = get_object_or_404(HealthPolicy, pk=pk)
    context = {"policy": policy, "staff": roles.is_staff(request.user)}
    context["form_url"] = reverse("hosts:policy_detail", args=[policy.pk])
    if request.method == "GET":
        context["form"] = HealthPolicyForm(initial=policy_initial(policy))
        return render(request, EDIT_PAGE, context)
    if denied := staff_only(request, "healthpolicy.partial_update"):
        return denied
    form = HealthPolicyForm(request.POST)
    saved, status = save_policy(
        request,
        form,
        lambda fields: services.health_policy_update(policy=policy, by=request.user, **fields),
    )
    if saved is None:
        context["form"] = form
        htmx = getattr(request, "htmx", False)
        return render(request, EDIT_BODY if htmx else EDIT_PAGE, context, status=status)
    messages.success(request, f"Saved health policy {saved.name}.")
    url = reverse("hosts:policy_list")
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


@ui_login_required
@require_POST
def policy_change(request: HttpRequest, pk: int, change: str) -> HttpResponse:
    """Enable, disable or delete a policy from its row (staff)."""
    if denied := staff_only(request, "healthpolicy.partial_update"):
        return denied
    policy = get_object_or_404(HealthPolicy, pk=pk)
    try:
        if change == "delete":
            services.health_policy_delete(policy=policy, by=request.user)
            message = f"Deleted health policy {policy.name}."
        else:
            enabled = change == "enable"
            services.health_policy_update(policy=policy, by=request.user, enabled=enabled)
            message = f"{'Enabled' if enabled else 'Disabled'} health policy {policy.name}."
    except ServiceError as exc:
        context = list_context(request, row_error=(policy.pk, exc.message))
        return answer(
            request, context, message=capfirst(exc.message), ok=False, status=exc.status_code
        )
    return answer(request, list_context(request), message=message, ok=True, status=200)
