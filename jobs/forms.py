"""Forms of the web UI for suites and leases: they parse input, the services decide."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from uuid import uuid4

from django import forms
from django.http import QueryDict

from hosts.forms import split_labels
from hosts.models import Host
from hosts.services import labels_validate
from jobs.choices import DEFAULT_PRIORITY, HostChoice, Priority, SchedulerOrdering
from jobs.limits import bounds
from jobs.models import SchedulerSettings
from jobs.services import JobSpec, settings_value
from jobs.services.reservations import longest_reservation
from jobs.services.scheduler_settings import SETTINGS_FIELDS
from jobs.services.submission import ALLOW_UNMATCHED
from schedsite.errors import InvalidInput

MAX_ROWS = 500  # job rows in one form; bigger suites go through the API

# Highest first: that is the order people scan a priority list in.
PRIORITY_CHOICES = [(p.value, f"{p.label} ({p.value})") for p in sorted(Priority, reverse=True)]

RESERVE_DURATIONS = [
    (30, "30 minutes"),
    (60, "1 hour"),
    (120, "2 hours"),
    (240, "4 hours"),
    (480, "8 hours"),
    (1440, "1 day"),
    (4320, "3 days"),
    (10080, "1 week"),
]


def reserve_durations(user: Any) -> list[tuple[int, str]]:  # noqa: ANN401
    """The durations a reservation form offers `user`: those within the longest they may hold
    a host (a tester's RESERVATION_TESTER_MAX_SECONDS is shorter than staff's), at least one."""
    longest = longest_reservation(user).total_seconds()
    fits = [(minutes, label) for minutes, label in RESERVE_DURATIONS if minutes * 60 <= longest]
    return fits or RESERVE_DURATIONS[:1]


def limited_integer(name: str, **kwargs: Any) -> forms.IntegerField:
    """An integer field within the submission table's bounds for `name` (jobs.limits)."""
    limit = bounds(name)
    return forms.IntegerField(min_value=limit.low, max_value=limit.high, **kwargs)


class SuiteForm(forms.Form):
    """The suite-level fields of the submit form."""

    name = forms.CharField(max_length=bounds("name").high)
    build = forms.CharField(max_length=bounds("build").high, required=False)
    priority = forms.TypedChoiceField(
        choices=PRIORITY_CHOICES, coerce=int, initial=DEFAULT_PRIORITY
    )
    min_duts = limited_integer("min_duts", label="Min DUTs", initial=0)
    max_duts = limited_integer("max_duts", label="Max DUTs", required=False)
    expires_after = limited_integer("expires_after", label="Expires after (s)", required=False)
    mode = forms.ChoiceField(
        choices=[("jobs", "A list of jobs"), ("fanout", "Run on every host with these labels")],
        initial="jobs",
    )
    fanout_labels = forms.CharField(max_length=1000, required=False)
    fanout_name = forms.CharField(max_length=bounds("fanout_name").high, required=False)
    max_retries = limited_integer("max_retries", initial=0)
    allow_unmatched = forms.BooleanField(
        label="Wait for such hosts",
        required=False,
        help_text="Submit jobs whose labels no host in the lab carries yet; they wait for one.",
    )
    timeout_minutes = forms.IntegerField(
        min_value=1, max_value=bounds("timeout").high // 60, required=False
    )
    preemptible = forms.BooleanField(
        required=False,
        help_text="Its jobs may be stopped, and requeued without using a retry, for much "
        "higher-priority work (when the scheduler settings turn preemption on).",
    )
    notify = forms.MultipleChoiceField(
        choices=[("email", "E-mail me"), ("webhook", "Call my webhook")], required=False
    )

    def clean(self) -> dict:
        data = super().clean()
        low, high = data.get("min_duts"), data.get("max_duts")
        if low is not None and high is not None and low > high:
            self.add_error("min_duts", f"Must not exceed max DUTs ({high}).")
        if data.get("mode") == "fanout":
            labels = split_labels(data.get("fanout_labels", ""))
            if not labels:
                self.add_error("fanout_labels", "Give the labels whose hosts should each run it.")
            else:
                try:
                    data["fanout_label_list"] = labels_validate(labels, field="fanout_labels")
                except InvalidInput as exc:
                    self.add_error("fanout_labels", field_message(exc))
        return data


def row_key() -> str:
    return uuid4().hex[:8]


ROW_KEY = re.compile(r"^[0-9a-f]{8}$")
MAX_ROLE_ROWS = 8  # role rows one job row takes (jobs.limits: roles)


@dataclass
class RoleRow:
    """One role of a job row (a multi-host job): its name, labels and host counts as typed."""

    name: str = ""
    labels: str = ""
    count: str = "1"
    max: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    key: str = field(default_factory=row_key)

    @property
    def blank(self) -> bool:
        return not (self.name.strip() or self.labels.strip())


@dataclass
class JobRow:
    """One row of the job list as typed, with the errors to show next to its fields."""

    name: str = ""
    labels: str = ""
    host: str = ""
    errors: dict[str, str] = field(default_factory=dict)
    key: str = field(default_factory=row_key)  # unique element ids per row; ties its roles
    roles: list[RoleRow] = field(default_factory=list)
    together_by: str = ""
    # The roles that gave the spec's roles, in order: a service error about roles[k] is
    # shown on the k-th of them.
    filled_roles: list[RoleRow] = field(default_factory=list)

    @property
    def blank(self) -> bool:
        return not (
            self.name.strip()
            or self.labels.strip()
            or self.host.strip()
            or self.together_by.strip()
            or any(not role.blank for role in self.roles)
        )

    @property
    def has_errors(self) -> bool:
        return bool(self.errors) or any(role.errors for role in self.roles)

    @property
    def more_hosts(self) -> bool:
        """Whether it asks for more than one host (its "More hosts" section starts open)."""
        return bool(self.roles or self.together_by or "roles" in self.errors)


def job_rows_count(data: QueryDict) -> int:
    """How many job rows a submitted form carries (before any limit)."""
    return max(len(data.getlist(k)) for k in ("job_name", "job_labels", "job_host"))


def job_rows_from(data: QueryDict) -> list[JobRow]:
    """The job rows of a submitted form (parallel job_name/job_labels/job_host lists), each
    with its role rows (parallel role_* lists, tied to their job row by role_job = job_key)."""
    names, labels, hosts = (data.getlist(k) for k in ("job_name", "job_labels", "job_host"))
    keys, together = data.getlist("job_key"), data.getlist("job_together_by")
    count = min(job_rows_count(data), MAX_ROWS)

    def at(values: list[str], i: int) -> str:
        return values[i] if i < len(values) else ""

    rows = []
    for i in range(count):
        key = at(keys, i)
        row = JobRow(at(names, i), at(labels, i), at(hosts, i), together_by=at(together, i))
        if ROW_KEY.match(key):
            row.key = key
        rows.append(row)
    by_key = {row.key: row for row in rows}
    role_fields = ("role_job", "role_name", "role_labels", "role_count", "role_max")
    jobs, role_names, role_labels, counts, maxes = (data.getlist(k) for k in role_fields)
    for k, job in enumerate(jobs):
        row = by_key.get(job)
        if row is not None and len(row.roles) < MAX_ROLE_ROWS:
            row.roles.append(
                RoleRow(at(role_names, k), at(role_labels, k), at(counts, k), at(maxes, k))
            )
    return rows


def _role_specs(row: JobRow) -> list[dict[str, Any]]:
    """The row's roles as the spec takes them, marking errors on the role rows."""
    row.filled_roles = [role for role in row.roles if not role.blank]
    roles = []
    for role in row.filled_roles:
        try:
            labels = labels_validate(split_labels(role.labels), field="labels")
        except InvalidInput as exc:
            role.errors["labels"] = field_message(exc)
            labels = []
        entry: dict[str, Any] = {"name": role.name.strip(), "labels": labels}
        for key, text in (("count", role.count), ("max", role.max)):
            text = text.strip()
            if not text:
                continue
            if not text.isdigit():
                role.errors[key] = "A whole number of hosts."
            else:
                entry[key] = int(text)
        roles.append(entry)
    return roles


def job_specs(
    rows: list[JobRow],
    *,
    max_retries: int = 0,
    timeout: timedelta | None = None,
    preemptible: bool = False,
) -> tuple[list[JobSpec], list[JobRow]]:
    """Check the rows, marking errors on them; return the specs and the rows they came from."""
    filled = [row for row in rows if not row.blank]
    wanted = {row.host.strip() for row in filled if row.host.strip()}
    # One query for every pinned host of the form.
    hosts = {h.hostname: h for h in Host.objects.filter(hostname__in=wanted)} if wanted else {}
    specs: list[JobSpec] = []
    for row in filled:
        name = row.name.strip()
        if not name:
            row.errors["name"] = "Give the job a name."
        elif len(name) > 200:
            row.errors["name"] = "At most 200 characters."
        try:
            labels = labels_validate(split_labels(row.labels), field="labels")
        except InvalidInput as exc:
            row.errors["labels"] = field_message(exc)
            labels = []
        pinned = None
        if row.host.strip():
            pinned = hosts.get(row.host.strip())
            if pinned is None:
                row.errors["host"] = f"No host is named {row.host.strip()}."
        specs.append(
            JobSpec(
                name=name,
                labels=labels,
                host=pinned,
                max_retries=max_retries,
                timeout=timeout,
                preemptible=preemptible,
                roles=_role_specs(row),
                together_by=row.together_by.strip(),
            )
        )
    return specs, filled


SUITE_FIELDS = ("name", "build", "priority", "min_duts", "max_duts", "expires_after")


def _uniform(jobs: list[dict[str, Any]], key: str, default: int | None) -> tuple[bool, Any]:
    """Whether every job has the same value for `key`, and that value."""
    values = {job.get(key, default) for job in jobs}
    return len(values) == 1, next(iter(values))


def role_row(role: dict[str, Any]) -> RoleRow:
    """A stored role as a role row of the form; max is left empty when it is the count."""
    count = role.get("count", 1)
    top = role.get("max")
    return RoleRow(
        role["name"],
        " ".join(role.get("labels", ())),
        str(count),
        str(top) if top is not None and top != count else "",
    )


def clone_form_values(body: dict[str, Any]) -> tuple[dict[str, Any], list[JobRow], list[str]]:
    """The form's initial values and job rows holding a suite's body, and what they cannot hold.

    The form sets retries and the timeout for all its jobs at once, and offers only the named
    priorities: a job's own priority, estimate or queue expiry has no place in it.
    """
    initial = {name: body[name] for name in SUITE_FIELDS}
    lost: list[str] = []
    if body["priority"] not in dict(PRIORITY_CHOICES):
        initial.pop("priority")
        lost.append(f"its priority {body['priority']}, which is not a named level")
    if fanout := body.get("fanout"):
        initial.update(
            mode="fanout", fanout_labels=" ".join(fanout["labels"]), fanout_name=fanout["name"]
        )
        return initial, [JobRow()], lost
    jobs = body["jobs"]
    if len(jobs) > MAX_ROWS:
        lost.append(f"its jobs past the first {MAX_ROWS}, more than the form takes")
    rows = [
        JobRow(
            job["name"],
            " ".join(job["labels"]),
            job.get("host") or "",
            roles=[role_row(role) for role in job.get("roles", ())],
            together_by=job.get("together_by", ""),
        )
        for job in jobs[:MAX_ROWS]
    ]
    same, retries = _uniform(jobs, "max_retries", 0)
    if same:
        initial["max_retries"] = retries
    else:
        lost.append("retries that differ from job to job")
    same, preemptible = _uniform(jobs, "preemptible", False)
    if same:
        initial["preemptible"] = preemptible
    else:
        lost.append("preemptible on some jobs only")
    same, timeout = _uniform(jobs, "timeout", None)
    if not same:
        lost.append("timeouts that differ from job to job")
    elif timeout is not None and timeout % 60:
        lost.append(f"a timeout of {timeout} s, which is not whole minutes")
    elif timeout is not None:
        initial["timeout_minutes"] = timeout // 60
    for key, what in (
        ("priority", "priorities"),
        ("estimated_duration", "estimated durations"),
        ("expires_after", "queue expiries"),
    ):
        if any(key in job for job in jobs):
            lost.append(f"some jobs' own {what}")
    return initial, rows, lost


ROW_FIELD = re.compile(r"^jobs\[(\d+)\]\.(\w+)(?:\[(\d+)\](?:\.(\w+))?)?$")
ROW_FIELDS = ("name", "labels", "host", "roles", "together_by")
ROLE_FIELDS = ("name", "labels", "count", "max")


# The submit form's checkbox that does what the API's allow_unmatched does.
WAIT_FOR_HOSTS = 'tick "Wait for such hosts"'


def form_wording(message: str) -> str:
    """A service's refusal in the submit form's words: its checkbox, not the API's field."""
    return message.replace(ALLOW_UNMATCHED, WAIT_FOR_HOSTS)


def field_message(exc: InvalidInput) -> str:
    """A service's refusal as shown next to the field it names, without naming the field again:
    "jobs[0].labels: no host carries x" → "No host carries x", "fanout_labels 'a b': Use …" →
    "Label 'a b': Use …" (the form's label and the error summary already say which field)."""
    message, field = exc.message, exc.field or ""
    if field and message.startswith(f"{field}: "):
        message = message.removeprefix(f"{field}: ")
    elif field and message.startswith(f"{field} '"):
        # A bad value of a list field (hosts.services._validate): name the one value.
        noun = "label" if field.endswith("labels") else field.rpartition(".")[2].replace("_", " ")
        message = f"{noun} {message.removeprefix(f'{field} ')}"
    elif "." in field and message.startswith(f"{field} "):
        # "jobs[0].roles[1].name is required" → "Name is required", next to the role's name (a
        # field of its own, such as min_duts, keeps its name: the message is about its value).
        noun = field.rpartition(".")[2].replace("_", " ")
        message = f"{noun} {message.removeprefix(f'{field} ')}"
    message = form_wording(message)
    return message[:1].upper() + message[1:]


def row_error(rows: list[JobRow], exc: InvalidInput) -> bool:
    """Put a service error about jobs[i].field (or jobs[i].roles[k].field) next to that
    field; False if it is not one."""
    match = ROW_FIELD.match(exc.field or "")
    if not match:
        return False
    index, name, role_index, role_field = match.groups()
    index = int(index)
    if index >= len(rows):
        return False
    # "jobs[0].labels: no host …" shows as "No host …" next to the row's labels (the page
    # names the field already: "Job 1, labels: No host …"); a role's error likewise.
    message = field_message(exc)
    row = rows[index]
    if name == "roles" and role_index is not None and int(role_index) < len(row.filled_roles):
        role = row.filled_roles[int(role_index)]
        role.errors[role_field if role_field in ROLE_FIELDS else "name"] = message
        return True
    row.errors[name if name in ROW_FIELDS else "name"] = message
    return True


class ReserveForm(forms.Form):
    """Reserve a free host for manual work."""

    host = forms.CharField(max_length=bounds("host").high, required=False)
    minutes = forms.TypedChoiceField(choices=RESERVE_DURATIONS, coerce=int, initial=60)
    reason = forms.CharField(required=False)  # the service checks it


class TesterReserveForm(forms.Form):
    """A tester's reservation: a host by name, or the labels one must carry."""

    host = forms.CharField(max_length=bounds("host").high, required=False)
    labels = forms.CharField(max_length=2000, required=False)  # the service checks them
    minutes = forms.TypedChoiceField(choices=RESERVE_DURATIONS, coerce=int, initial=60)
    reason = forms.CharField(required=False)  # the service checks it


class ExtendForm(forms.Form):
    """Push a reservation's end later by one of the offered durations."""

    minutes = forms.TypedChoiceField(choices=RESERVE_DURATIONS, coerce=int)


class ReleaseForm(forms.Form):
    """Release a lease; its job is requeued unless 'abort' is chosen."""

    requeue = forms.ChoiceField(choices=[("1", "requeue"), ("0", "abort")], required=False)
    reason = forms.CharField(required=False)  # the service checks it


class TemplateForm(forms.Form):
    """A template's name, cron and state as typed on its page; jobs.suite_templates checks them."""

    name = forms.CharField(required=False, label="Name")  # the service checks it
    cron = forms.CharField(required=False, label="Cron")
    enabled = forms.BooleanField(required=False)

    def template_fields(self) -> dict[str, object]:
        return {key: self.cleaned_data[key] for key in ("name", "cron", "enabled")}


class DispatchForm(forms.Form):
    """Dispatch a template: the build, and the priority if it should differ from the template's."""

    build = forms.CharField(max_length=bounds("build").high, required=False)
    priority = forms.TypedChoiceField(
        choices=[("", "the template's"), *PRIORITY_CHOICES],
        coerce=int,
        required=False,
        empty_value=None,
    )

    def params(self) -> dict[str, object]:
        params: dict[str, object] = {}
        if self.cleaned_data["build"]:
            params["build"] = self.cleaned_data["build"]
        if self.cleaned_data["priority"] is not None:
            params["priority"] = self.cleaned_data["priority"]
        return params


def _help(field: str) -> str:
    """The one line the model says about a setting (its help_text)."""
    return str(SchedulerSettings._meta.get_field(field).help_text)


ON_OFF = (("off", "Off"), ("on", "On"))


def _on(value: str) -> bool:
    return value == "on"


def _on_off(label: str, setting: str) -> forms.TypedChoiceField:
    """An On/Off setting; optional, so that a form opened before it existed still saves."""
    return forms.TypedChoiceField(
        choices=ON_OFF,
        coerce=_on,
        empty_value=None,
        required=False,
        label=label,
        help_text=_help(setting),
    )


class SchedulerSettingsForm(forms.Form):
    """The scheduler settings as typed on their page; jobs.services checks every rule.

    `version` is the settings' version the form was opened on: saving is refused, and the
    current values shown, if someone changed them since.
    """

    ordering = forms.ChoiceField(
        choices=SchedulerOrdering.choices, label="Ordering", help_text=_help("ordering")
    )
    aging_minutes = forms.IntegerField(
        label="Aging (minutes per level)", help_text=_help("aging_minutes")
    )
    aging_cap = forms.IntegerField(label="Aging cap", help_text=_help("aging_cap"))
    host_choice = forms.ChoiceField(
        choices=HostChoice.choices, label="Host choice", help_text=_help("host_choice")
    )
    default_duration = forms.IntegerField(
        label="Default duration (seconds)", help_text=_help("default_duration")
    )
    # The five below are optional: a form opened before they existed still saves the others.
    preemption = _on_off("Preemption", "preemption")
    preempt_margin = forms.IntegerField(
        required=False, label="Preempt margin (priority levels)", help_text=_help("preempt_margin")
    )
    fair_share = _on_off("Fair share", "fair_share")
    fair_share_half_life_hours = forms.IntegerField(
        required=False,
        label="Fair share half-life (hours)",
        help_text=_help("fair_share_half_life_hours"),
    )
    same_build_first_minutes = forms.IntegerField(
        required=False,
        label="Same build first (minutes)",
        help_text=_help("same_build_first_minutes"),
    )
    version = forms.IntegerField(required=False, widget=forms.HiddenInput)
    reason = forms.CharField(required=False, label="Reason")  # the service checks it

    @classmethod
    def of(cls, settings: SchedulerSettings) -> SchedulerSettingsForm:
        """A form showing the settings as they are now."""
        values = {field: getattr(settings, field) for field in SETTINGS_FIELDS}
        values["default_duration"] = settings_value("default_duration", settings.default_duration)
        for flag in ("preemption", "fair_share"):
            values[flag] = "on" if values[flag] else "off"
        return cls(initial={**values, "version": settings.version})

    def settings_fields(self) -> dict[str, object]:
        """The service's settings keyword arguments (call after is_valid)."""
        fields = {field: self.cleaned_data[field] for field in SETTINGS_FIELDS}
        return {field: value for field, value in fields.items() if value is not None}
