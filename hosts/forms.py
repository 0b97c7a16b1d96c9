"""Forms that parse the hosts and workers actions of the web UI (the services validate)."""

from __future__ import annotations

import re

from django import forms

from hosts.models import Worker
from schedsite.filters import AnyValueMultipleField

LABEL_SPLIT = re.compile(r"[\s,]+")


def split_labels(text: str) -> list[str]:
    """Labels typed into one box, separated by spaces or commas."""
    return [part for part in LABEL_SPLIT.split(text or "") if part]


class ReasonForm(forms.Form):
    """A lock or pause: the reason is required by the service, which says so if it is missing."""

    reason = forms.CharField(required=False)  # the service checks it


class BulkHostsForm(forms.Form):
    """Lock, unlock, verify, repair, or add or remove labels on the hosts ticked in the hosts
    table."""

    action = forms.ChoiceField(
        choices=[
            ("lock", "Lock"),
            ("unlock", "Unlock"),
            ("verify", "Verify now"),
            ("repair", "Repair now"),
            ("label_add", "Add labels"),
            ("label_remove", "Remove labels"),
        ]
    )
    hosts = AnyValueMultipleField(required=False)
    reason = forms.CharField(required=False)  # the service checks it
    labels = forms.CharField(required=False)  # split by split_labels; the service checks them


class HealthPolicyForm(forms.Form):
    """A health policy as typed on the policies page; hosts.services.health_policy_clean checks it.

    Only the parsing is here (a number is a number, labels are split on spaces and commas);
    every rule is the service's, so the page, the API and the admin refuse the same things.
    """

    name = forms.CharField(required=False, label="Name")
    labels = forms.CharField(required=False, label="Labels")
    every_jobs = forms.IntegerField(required=False, label="Every N test jobs")
    every_hours = forms.IntegerField(required=False, label="Every N hours")
    enabled = forms.BooleanField(required=False, label="Enabled")

    def policy_fields(self) -> dict[str, object]:
        """The service's keyword arguments (call after is_valid)."""
        data = dict(self.cleaned_data)
        data["labels"] = split_labels(data.get("labels", ""))
        return data


class WorkerChoiceField(forms.ModelChoiceField):
    """A worker picked by name among those in service; empty is "no worker"."""

    def __init__(self, **kwargs: object) -> None:
        workers = Worker.objects.filter(retired_at__isnull=True).order_by("name")
        super().__init__(
            queryset=workers, to_field_name="name", required=False, empty_label="(no worker)",
            **kwargs,
        )  # fmt: skip


class HostEditForm(forms.Form):
    """A host's labels, worker and build, and the version of them the form was opened on."""

    worker = WorkerChoiceField(label="Worker")
    labels = forms.CharField(required=False, label="Labels")
    current_build = forms.CharField(required=False, label="Build")  # the service checks length
    version = forms.CharField(required=False, widget=forms.HiddenInput)

    def host_fields(self) -> dict[str, object]:
        """The service's keyword arguments (call after is_valid)."""
        data = self.cleaned_data
        return {
            "worker": data["worker"],
            "labels": split_labels(data["labels"]),
            "current_build": data["current_build"],
        }


class HostCreateForm(HostEditForm):
    """A new host: its name too; no version, there is nothing to have changed yet."""

    hostname = forms.CharField(required=False, label="Hostname")  # the service checks it
    field_order = ["hostname", "worker", "labels", "current_build"]

    def host_fields(self) -> dict[str, object]:
        return {"hostname": self.cleaned_data["hostname"].strip(), **super().host_fields()}


MAX_JOBS_HELP = (
    "The most jobs this worker runs at once; the runner's own --concurrency also applies, "
    "the smaller wins"
)


class WorkerForm(forms.Form):
    """A new worker's name, or a worker's new name, and its max jobs (the service checks them)."""

    name = forms.CharField(required=False, label="Name")
    # Blank is unlimited; the service refuses less than 1, next to the field.
    max_jobs = forms.IntegerField(required=False, label="Max jobs", help_text=MAX_JOBS_HELP)

    def worker_fields(self) -> dict[str, object]:
        """The service's keyword arguments (call after is_valid)."""
        data = self.cleaned_data
        return {"name": data["name"].strip(), "max_jobs": data["max_jobs"]}


class HostImportForm(forms.Form):
    """A CSV or YAML host list, uploaded or pasted."""

    FORMATS = [("auto", "Guess from the file"), ("csv", "CSV"), ("yaml", "YAML")]
    MAX_BYTES = 1_000_000

    file = forms.FileField(required=False, label="File")
    text = forms.CharField(required=False, label="Or paste it", widget=forms.Textarea)
    format = forms.ChoiceField(choices=FORMATS, initial="auto", required=False, label="Format")

    def clean(self) -> dict:
        data = super().clean()
        upload = data.get("file")
        if upload:
            if upload.size > self.MAX_BYTES:
                raise forms.ValidationError("the file is over 1 MB; split it")
            try:
                data["text"] = upload.read().decode("utf-8")
            except UnicodeDecodeError as exc:
                raise forms.ValidationError("the file is not UTF-8 text") from exc
            data["filename"] = upload.name
        if not (data.get("text") or "").strip():
            raise forms.ValidationError("choose a file or paste the hosts")
        return data


class HostImportApplyForm(forms.Form):
    """The preview's signed rows, sent back to apply them."""

    payload = forms.CharField(widget=forms.HiddenInput)


class PoolTargetForm(forms.Form):
    """A pool target as typed on its page; jobs.services.balancer.pool_target_clean checks it.

    Only the parsing is here (a number is a number, prefixes are split on spaces and commas);
    the rules are the service's, so the page and /api/pool-targets/ refuse the same things.
    """

    pool = forms.CharField(required=False, label="Pool label")
    spare = forms.CharField(required=False, label="Spare label")
    min_ready = forms.IntegerField(required=False, label="Hosts in service, at least")
    same = forms.CharField(required=False, label="Same values of")

    def target_fields(self) -> dict[str, object]:
        """The service's keyword arguments (call after is_valid)."""
        data = dict(self.cleaned_data)
        data["same"] = split_labels(data.get("same", ""))
        return data
