"""The pool targets pages (staff): each pool against its target, its members, its last swaps,
and what the balancer would do now (docs/health.md#pool-targets).

The rules are jobs.services.balancer's: the form only parses, the service refuses, and its
refusal is shown next to the field it names, as on /api/pool-targets/.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.text import capfirst
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from hosts.forms import PoolTargetForm
from hosts.models import PoolTarget
from jobs.services import balancer
from schedsite.errors import ServiceError
from schedsite.ui.htmx import form_answer, staff_form_page, staff_only, ui_login_required

LIST_PAGE = "hosts/pooltarget_list.html"
LIST_BODY = "hosts/partials/pool_body.html"
DETAIL_PAGE = "hosts/pooltarget_detail.html"
EDIT_PAGE = "hosts/pooltarget_form.html"
EDIT_BODY = "hosts/partials/pool_form.html"
Save = Callable[[dict[str, object]], PoolTarget]


def target_initial(target: PoolTarget) -> dict[str, object]:
    """A target's values as its form shows them."""
    return {
        "pool": target.pool,
        "spare": target.spare,
        "min_ready": target.min_ready,
        "same": " ".join(target.same),
    }


def list_context(**extra: Any) -> dict[str, Any]:
    context = {
        "rows": balancer.pool_overview(),
        "form": PoolTargetForm(initial={"same": "board"}),
        "form_url": reverse("hosts:pool_create"),
    }
    context.update(extra)
    return context


def save_target(form: PoolTargetForm, save: Save) -> tuple[PoolTarget | None, int]:
    """Parse the form and save through the service: the target, or None and the error's status.

    The service's refusal goes next to the field it names, so whoever typed it sees what to
    change; nothing is saved.
    """
    if not form.is_valid():
        return None, 400
    try:
        return save(form.target_fields()), 200
    except ServiceError as exc:
        form.add_error(exc.field if exc.field in form.fields else None, capfirst(exc.message))
        return None, exc.status_code


# The list's body and a toast with htmx; without, back to the list, or the list at fault.
answer = partial(
    form_answer, fragment=LIST_BODY, page=LIST_PAGE, fallback=reverse_lazy("hosts:pool_list")
)


@ui_login_required
@require_GET
def pool_list(request: HttpRequest) -> HttpResponse:
    """Every pool target against its pool now, with its warnings, and a form to add one."""
    if denied := staff_only(request, "pooltarget.list"):
        return denied
    return render(request, LIST_PAGE, list_context())


@ui_login_required
@require_POST
def pool_create(request: HttpRequest) -> HttpResponse:
    """Add a pool target from the list's form."""
    if denied := staff_only(request, "pooltarget.create"):
        return denied
    form = PoolTargetForm(request.POST)
    target, status = save_target(
        form, lambda fields: balancer.pool_target_create(by=request.user, **fields)
    )
    if target is None:
        context = list_context(form=form, form_open=True)
        message = "The pool target was not added: see the form."
        return answer(request, context, message=message, ok=False, status=status)
    message = f"Added the pool target for {target.pool}."
    return answer(request, list_context(), message=message, ok=True, status=200)


@ui_login_required
@require_GET
def pool_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One target: its pool's members, its last swaps and what the balancer would do now."""
    if denied := staff_only(request, "pooltarget.retrieve"):
        return denied
    target = get_object_or_404(PoolTarget, pk=pk)
    context = {
        "target": target,
        "plan": balancer.pool_plan(target),
        "members": balancer.pool_members(target),
        "swaps": balancer.pool_swaps(target),
    }
    return render(request, DETAIL_PAGE, context)


@staff_form_page("pooltarget.partial_update")
def pool_edit(request: HttpRequest, pk: int) -> HttpResponse:
    """Change a target: its form, saved through the service."""
    target = get_object_or_404(PoolTarget, pk=pk)
    context: dict[str, Any] = {
        "target": target,
        "form_url": reverse("hosts:pool_edit", args=[target.pk]),
    }
    if request.method == "GET":
        context["form"] = PoolTargetForm(initial=target_initial(target))
        return render(request, EDIT_PAGE, context)
    form = PoolTargetForm(request.POST)
    saved, status = save_target(
        form,
        lambda fields: balancer.pool_target_update(target=target, by=request.user, **fields),
    )
    if saved is None:
        context["form"] = form
        htmx = getattr(request, "htmx", False)
        return render(request, EDIT_BODY if htmx else EDIT_PAGE, context, status=status)
    messages.success(request, f"Saved the pool target for {saved.pool}.")
    url = reverse("hosts:pool_detail", args=[saved.pk])
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)


@ui_login_required
@require_POST
def pool_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Delete a target; its hosts keep their labels."""
    if denied := staff_only(request, "pooltarget.destroy"):
        return denied
    target = get_object_or_404(PoolTarget, pk=pk)
    try:
        balancer.pool_target_delete(target=target, by=request.user)
    except ServiceError as exc:
        messages.error(request, capfirst(exc.message))
    else:
        messages.success(request, f"Deleted the pool target for {target.pool}.")
    url = reverse("hosts:pool_list")
    return HttpResponseClientRedirect(url) if getattr(request, "htmx", False) else redirect(url)
