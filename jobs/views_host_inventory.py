"""Inventory pages for staff: add and edit hosts, add and edit workers, import and export.

Plain form posts that answer with the page (errors next to the fields, status 400/409) or
redirect with a message; every change goes through hosts.services or jobs.host_inventory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import messages
from django.core import signing
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.text import capfirst
from django.views.decorators.http import require_GET

from hosts import inventory_files as files
from hosts import services
from hosts.filtersets import HostFilterSet
from hosts.forms import (
    HostCreateForm,
    HostEditForm,
    HostImportApplyForm,
    HostImportForm,
    WorkerForm,
)
from hosts.models import Host, Worker
from jobs import host_inventory as inventory
from jobs.models import Lease
from jobs.views_hosts import host_queryset
from schedsite.errors import InvalidInput, ServiceError
from schedsite.ui.htmx import clean_query, error_response, staff_form_page, ui_login_required

HOST_FORM = "hosts/host_form.html"
WORKER_FORM = "hosts/worker_form.html"
IMPORT_PAGE = "hosts/host_import.html"
IMPORT_SALT = "hosts.import"
PREVIEW_MAX_AGE = 3600  # seconds a preview may be applied after it was shown


def saved_or_errors(form: forms.Form, save: Callable[[dict[str, Any]], Any]) -> tuple[Any, int]:
    """Save the valid form through the service: the result, or None and the refusal's status.

    A refusal goes next to the field it names, or above the form; nothing is saved.
    """
    if not form.is_valid():
        return None, 400
    try:
        return save(form.cleaned_data), 200
    except ServiceError as exc:
        # A hidden field (the edit's version) shows nothing: its error goes above the form.
        shown = exc.field in form.fields and not form.fields[exc.field].widget.is_hidden
        form.add_error(exc.field if shown else None, capfirst(exc.message))
        return None, exc.status_code


def posted(request: HttpRequest) -> QueryDict | None:
    """The form's data on a POST, even an empty one (then the form says what is missing)."""
    return request.POST if request.method == "POST" else None


def done(request: HttpRequest, message: str, url: str) -> HttpResponse:
    messages.success(request, message)
    return redirect(url)


# --- hosts ----------------------------------------------------------------------------------


@staff_form_page("host.create")
def host_create(request: HttpRequest) -> HttpResponse:
    """Add a host: hostname, worker, labels (with suggestions) and build."""
    form = HostCreateForm(posted(request))
    if request.method == "POST":
        host, status = saved_or_errors(
            form, lambda _: services.host_create(by=request.user, **form.host_fields())
        )
        if host is not None:
            url = reverse("hosts:host_detail", args=[host.hostname])
            return done(request, f"Added host {host.hostname}.", url)
    else:
        status = 200
    return render(request, HOST_FORM, {"form": form, "host": None}, status=status)


@staff_form_page("host.partial_update")
def host_edit(request: HttpRequest, hostname: str) -> HttpResponse:
    """Change a host's labels, worker and build; refused if someone changed them meanwhile."""
    host = get_object_or_404(host_queryset(), hostname=hostname)
    status = 200
    if request.method == "POST":
        form = HostEditForm(request.POST)
        saved, status = saved_or_errors(
            form,
            lambda data: inventory.host_edit(
                host=host, by=request.user, version=data["version"], **form.host_fields()
            ),
        )
        if saved is not None:
            url = reverse("hosts:host_detail", args=[host.hostname])
            return done(request, f"Saved host {host.hostname}.", url)
    else:
        values = inventory.inventory_values(host)
        form = HostEditForm(
            initial={
                **values,
                "labels": " ".join(values["labels"]),  # type: ignore[arg-type]
                "version": inventory.inventory_version(host),
            }
        )
    lease = Lease.objects.active().filter(host=host).select_related("job").first()
    return render(request, HOST_FORM, {"form": form, "host": host, "lease": lease}, status=status)


# --- workers --------------------------------------------------------------------------------


@staff_form_page("worker.create")
def worker_create(request: HttpRequest) -> HttpResponse:
    """Add a worker (a lab server); its runner then starts with --worker NAME."""
    form = WorkerForm(posted(request))
    status = 200
    if request.method == "POST":
        worker, status = saved_or_errors(
            form, lambda _: services.worker_create(by=request.user, **form.worker_fields())
        )
        if worker is not None:
            url = reverse("hosts:worker_detail", args=[worker.name])
            return done(request, f"Added worker {worker.name}.", url)
    return render(request, WORKER_FORM, {"form": form, "worker": None}, status=status)


@staff_form_page("worker.partial_update")
def worker_rename(request: HttpRequest, name: str) -> HttpResponse:
    """Rename a worker or change its max jobs; a renamed worker's runner must be restarted."""
    worker = get_object_or_404(Worker, name=name)
    form = WorkerForm(posted(request), initial={"name": worker.name, "max_jobs": worker.max_jobs})
    status = 200
    if request.method == "POST":
        saved, status = saved_or_errors(
            form,
            lambda _: services.worker_update(
                worker=worker, by=request.user, **form.worker_fields()
            ),
        )
        if saved is not None:
            url = reverse("hosts:worker_detail", args=[saved.name])
            message = f"Saved worker {saved.name}."
            if saved.name != name:
                message = (
                    f"Renamed worker {name} to {saved.name}. Restart its runner with "
                    f"--worker {saved.name}: the old name no longer answers."
                )
            return done(request, message, url)
    return render(request, WORKER_FORM, {"form": form, "worker": worker}, status=status)


# --- import and export ----------------------------------------------------------------------


def _preview(request: HttpRequest, form: HostImportForm, plan: inventory.ImportPlan) -> dict:
    payload = ""
    if plan.to_apply and not plan.errors:
        # The rows as they were checked, signed: applying them re-checks exactly what was
        # shown, and a file changed in between is a new preview, never a silent apply.
        rows = [row.entry() for row in plan.rows]
        payload = signing.dumps(
            {"entries": rows, "digest": plan.digest()}, salt=IMPORT_SALT, compress=True
        )
    counts = {a: plan.count(a) for a in ("new", "changed", "unchanged", "error")}
    return {"form": form, "plan": plan, "counts": counts, "payload": payload}


def _apply(request: HttpRequest) -> HttpResponse:
    apply_form = HostImportApplyForm(request.POST)
    if not apply_form.is_valid():
        return _refused(request, "The preview is missing: preview the file again.", 400)
    try:
        data = signing.loads(
            apply_form.cleaned_data["payload"], salt=IMPORT_SALT, max_age=PREVIEW_MAX_AGE
        )
    except signing.SignatureExpired:
        return _refused(request, "The preview is over an hour old: preview the file again.")
    except signing.BadSignature:
        return _refused(request, "The preview was altered: preview the file again.", 400)
    entries = data["entries"]
    try:
        plan = inventory.hosts_import(entries=entries, by=request.user, digest=data["digest"])
    except ServiceError as exc:
        # Show what applying would do now, so the person can check it and apply that instead.
        plan = inventory.import_plan(entries, [f"hosts[{i}]" for i in range(len(entries))])
        context = _preview(request, HostImportForm(), plan)
        context["apply_error"] = capfirst(exc.message)
        return render(request, IMPORT_PAGE, context, status=exc.status_code)
    added, changed = plan.count("new"), plan.count("changed")
    return done(
        request,
        f"Imported {added} new and {changed} changed host{'s' if added + changed != 1 else ''}.",
        reverse("hosts:host_list"),
    )


def _refused(request: HttpRequest, message: str, status: int = 409) -> HttpResponse:
    context = {"form": HostImportForm(), "apply_error": message}
    return render(request, IMPORT_PAGE, context, status=status)


@staff_form_page("host.import")
def host_import(request: HttpRequest) -> HttpResponse:
    """Bulk import: a preview of every row first (nothing saved), then apply it all or nothing."""
    if request.method == "GET":
        return render(request, IMPORT_PAGE, {"form": HostImportForm(initial={"format": "auto"})})
    if "payload" in request.POST:
        return _apply(request)
    form = HostImportForm(request.POST, request.FILES)
    if not form.is_valid():
        return render(request, IMPORT_PAGE, {"form": form}, status=400)
    data = form.cleaned_data
    fmt = data.get("format") or "auto"
    if fmt == "auto":
        fmt = files.guess_format(data["text"], data.get("filename", ""))
    try:
        entries, wheres, notes = files.read(data["text"], fmt)
    except InvalidInput as exc:
        form.add_error(None, f"{fmt.upper()}: {exc.message}")
        return render(request, IMPORT_PAGE, {"form": form}, status=400)
    plan = inventory.import_plan(entries, wheres)
    plan.notes = notes
    context = _preview(request, form, plan)
    context["format"] = fmt
    return render(request, IMPORT_PAGE, context, status=400 if plan.errors else 200)


EXPORTS = {
    "csv": ("text/csv; charset=utf-8", files.write_csv),
    "yaml": ("application/yaml; charset=utf-8", files.write_yaml),
}


@ui_login_required
@require_GET
def host_export(request: HttpRequest, fmt: str) -> HttpResponse:
    """The hosts the list's filters select, as CSV or YAML the import reads back unchanged."""
    filterset = HostFilterSet(clean_query(request.GET, drop=("page",)), queryset=(
        Host.objects.select_related("worker").prefetch_related("labels")
    ))  # fmt: skip
    if not filterset.is_valid():
        message = "; ".join(f"{k}: {' '.join(v)}" for k, v in filterset.errors.items())
        return error_response(request, message, 400)
    content_type, write = EXPORTS[fmt]
    response = HttpResponse(write(filterset.qs), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="hosts.{fmt}"'
    return response
