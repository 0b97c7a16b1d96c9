"""Read and write lab description files (JSON or YAML): workers, hosts, suites and jobs."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from hosts import services as hosts_services
from hosts.choices import HostStatus
from hosts.models import Host, Label, Worker
from hosts.validators import label_validator, name_validator
from jobs import services as jobs_services
from jobs import transitions
from jobs.choices import DEFAULT_PRIORITY, parse_priority
from jobs.job_specs import roles_normalize
from jobs.limits import bounds
from jobs.models import Job, Lease, Suite, encode_labels
from jobs.scheduling.triggers import request_tick
from jobs.services import JobSpec
from jobs.submission_schema import LAB_JOB_FIELDS, LAB_SUITE_FIELDS, unknown_fields
from jobs.transitions import Mover
from schedsite.errors import InvalidInput, ServiceError

LABEL_MAX = Label._meta.get_field("name").max_length
# How a lab file names a worker or a host: the validator, the longest name, the word for it.
Naming = tuple[Callable[[str], None], int, str]
WORKER_NAMES: Naming = (name_validator, 100, "worker")
HOSTNAMES: Naming = (name_validator, 255, "hostname")


class LabFileError(InvalidInput):
    """A lab file that cannot be imported; lists every problem, each naming entry and field."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def load(path: str | Path) -> dict:
    """Parse a lab file by extension (.yaml/.yml as YAML, anything else as JSON)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LabFileError([f"{path}: cannot read ({exc.strerror})"]) from exc
    try:
        if path.suffix.lower() in {".yaml", ".yml"}:
            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise LabFileError(
            [f"{path}: not valid {path.suffix.lstrip('.') or 'JSON'}: {exc}"]
        ) from exc
    return data if data is not None else {}


@dataclass
class _Checker:
    problems: list[str] = field(default_factory=list)

    def fail(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")

    def text(
        self,
        entry: dict,
        key: str,
        where: str,
        *,
        required: bool = False,
        default: str = "",
        limit: int = 200,
    ) -> str:
        value = entry.get(key, default)
        if value is None:
            value = default
        if not isinstance(value, str):
            self.fail(f"{where}.{key}", f"must be a string, got {type(value).__name__}")
            return default
        if required and not value.strip():
            self.fail(f"{where}.{key}", "is required")
        if len(value) > limit:
            self.fail(f"{where}.{key}", f"at most {limit} characters")
        return value.strip()

    def known(self, entry: dict, where: str, fields: tuple[str, ...]) -> None:
        """Name every field of the entry the lab file does not take (a misspelt max_retries)."""
        for key in unknown_fields(entry, fields):
            self.fail(f"{where}.{key}", f"unknown field (expected {', '.join(fields)})")

    def limited(self, entry: dict, key: str, where: str, *, default: int | None) -> int | None:
        """An integer within the submission table's bounds for `key` (jobs.limits)."""
        limit = bounds(key)
        nullable = default is None
        return self.integer(
            entry, key, where, default=default, low=limit.low, high=limit.high, nullable=nullable
        )

    def boolean(self, entry: dict, key: str, where: str) -> bool:
        value = entry.get(key, False)
        if value is None:
            return False
        if not isinstance(value, bool):
            self.fail(f"{where}.{key}", "must be true or false")
            return False
        return value

    def integer(
        self,
        entry: dict,
        key: str,
        where: str,
        *,
        default: int | None,
        low: int,
        high: int | None = None,
        nullable: bool = False,
    ) -> int | None:
        value = entry.get(key, default)
        if value is None:
            if nullable or default is None:
                return None
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{where}.{key}", f"must be a whole number, got {value!r}")
            return default
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
            self.fail(f"{where}.{key}", f"must be {bounds}, got {value}")
            return default
        return value

    def priority(self, entry: dict, where: str, default: int) -> int:
        try:
            return parse_priority(entry.get("priority", default))
        except ValueError as error:
            self.fail(f"{where}.priority", str(error))
            return default

    def labels(self, entry: dict, key: str, where: str) -> list[str]:
        value = entry.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(f"{where}.{key}", "must be a list of strings")
            return []
        for name in value:
            if len(name) > LABEL_MAX:
                self.fail(f"{where}.{key}", f"{name[:40]!r}…: at most {LABEL_MAX} characters")
                continue
            try:
                label_validator(name)
            except ValidationError as exc:
                self.fail(f"{where}.{key}", f"{name!r}: {exc.messages[0]}")
        return sorted(set(value))

    def name(self, validator, value: str, where: str) -> None:  # noqa: ANN001
        try:
            validator(value)
        except ValidationError as exc:
            self.fail(where, f"{value!r}: {exc.messages[0]}")


def _entries(data: dict, key: str, check: _Checker) -> list[dict]:
    value = data.get(key) or []
    if not isinstance(value, list):
        check.fail(key, "must be a list")
        return []
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict):
            check.fail(f"{key}[{i}]", "must be an object")
        else:
            out.append(entry)
    return out


def _label(i: int, entry: dict, key: str, name_key: str) -> str:
    name = entry.get(name_key)
    return f"{key}[{i}]" + (f" ({name})" if isinstance(name, str) and name else "")


def _named_entries(
    data: dict, check: _Checker, key: str, name_key: str, naming: Naming
) -> Iterator[tuple[dict, str, str]]:
    """Each entry of a list with where it is and its name, checked: required, valid, unique."""
    validator, limit, noun = naming
    seen: set[str] = set()
    for i, entry in enumerate(_entries(data, key, check)):
        where = _label(i, entry, key, name_key)
        name = check.text(entry, name_key, where, required=True, limit=limit)
        if name:
            check.name(validator, name, f"{where}.{name_key}")
            if name in seen:
                check.fail(f"{where}.{name_key}", f"duplicate {noun} {name}")
            seen.add(name)
        yield entry, where, name


def _validate_workers(data: dict, check: _Checker) -> list[dict]:
    workers: list[dict] = []
    for entry, where, name in _named_entries(data, check, "workers", "name", WORKER_NAMES):
        workers.append(
            {
                "name": name,
                "paused": check.boolean(entry, "paused", where),
                "paused_reason": check.text(entry, "paused_reason", where, limit=500),
            }
        )
    return workers


def _host_entries(
    data: dict, check: _Checker, known_workers: set[str]
) -> Iterator[tuple[str, dict]]:
    for entry, where, hostname in _named_entries(data, check, "hosts", "hostname", HOSTNAMES):
        worker = entry.get("worker")
        if worker is not None and (not isinstance(worker, str) or worker not in known_workers):
            check.fail(f"{where}.worker", f"unknown worker {worker!r}")
        status = entry.get("status", HostStatus.READY) or HostStatus.READY
        if status not in HostStatus.values:
            check.fail(
                f"{where}.status", f"{status!r} is not one of {', '.join(HostStatus.values)}"
            )
        locked = check.boolean(entry, "locked", where)
        lock_reason = check.text(entry, "lock_reason", where, limit=500)
        yield (
            where,
            {
                "hostname": hostname,
                "worker": worker,
                "status": status,
                "labels": check.labels(entry, "labels", where),
                "locked": locked,
                "lock_reason": lock_reason or ("locked in lab file" if locked else ""),
                "current_build": check.text(entry, "current_build", where),
            },
        )


def _validate_hosts(data: dict, check: _Checker, known_workers: set[str]) -> list[dict]:
    return [host for _, host in _host_entries(data, check, known_workers)]


def host_entries(entries: list[dict], known_workers: set[str]) -> list[tuple[dict, list[str]]]:
    """Check a `hosts:` list host by host: each normalized host with its own problems.

    The problems name the field (`worker: unknown worker 'w9'`), not the entry: the caller
    shows them on the entry's row. A duplicate hostname is a problem of its second entry.
    """
    check = _Checker()
    rows: list[tuple[dict, list[str]]] = []
    mark = 0
    for where, host in _host_entries({"hosts": entries}, check, known_workers):
        mine = check.problems[mark:]
        mark = len(check.problems)
        rows.append((host, [p.removeprefix(where).lstrip(".") for p in mine]))
    return rows


@dataclass
class _JobChecker:
    """Checks job entries against the hosts the lab will have once imported."""

    check: _Checker
    host_labels: dict[str, set[str]]
    running_hosts: dict[str, str] = field(default_factory=dict)

    def entry(self, entry: dict, where: str, default_priority: int) -> dict:
        check = self.check
        check.known(entry, where, LAB_JOB_FIELDS)
        job = {
            "name": check.text(entry, "name", where, required=True),
            "labels": check.labels(entry, "labels", where),
            "priority": check.priority(entry, where, default_priority),
            "max_retries": check.limited(entry, "max_retries", where, default=0),
            "timeout": check.limited(entry, "timeout", where, default=settings.JOB_DEFAULT_TIMEOUT),
            "host": entry.get("host"),
            "running_on": entry.get("running_on"),
            **self._roles(entry, where),
        }
        for key in ("host", "running_on"):
            value = job[key]
            if value is not None and (not isinstance(value, str) or value not in self.host_labels):
                check.fail(f"{where}.{key}", f"unknown host {value!r}")
                job[key] = None
        if job["roles"] and job["host"]:
            check.fail(f"{where}.roles", "a job pinned to a host has one host: not with roles")
        if job["roles"] and job["running_on"]:
            # Restoring a running multi-host job would need every one of its hosts: it is
            # imported queued and the scheduler leases them again.
            check.fail(f"{where}.running_on", "a job with roles is imported queued, not running")
            job["running_on"] = None
        if job["running_on"]:
            self._running_on(job, where)
        if job["host"]:
            missing = set(job["labels"]) - self.host_labels[job["host"]]
            if missing:
                check.fail(
                    f"{where}.host", f"pinned host {job['host']} lacks {', '.join(sorted(missing))}"
                )
        return job

    def _roles(self, entry: dict, where: str) -> dict:
        """The job's roles and together_by, normalized as submission stores them."""
        roles, together_by = entry.get("roles") or [], entry.get("together_by") or ""
        if not isinstance(together_by, str):
            self.check.fail(f"{where}.together_by", "must be a string")
            together_by = ""
        try:
            roles, together_by = roles_normalize(roles, together_by)
        except InvalidInput as exc:
            name = exc.field or "roles"
            self.check.fail(f"{where}.{name}", exc.message.removeprefix(f"{name}: "))
            roles, together_by = [], ""
        return {"roles": roles, "together_by": together_by}

    def _running_on(self, job: dict, where: str) -> None:
        run_on = job["running_on"]
        if job["host"] and job["host"] != run_on:
            self.check.fail(f"{where}.running_on", f"job is pinned to {job['host']}, not {run_on}")
        missing = set(job["labels"]) - self.host_labels[run_on]
        if missing:
            self.check.fail(
                f"{where}.running_on", f"host {run_on} lacks {', '.join(sorted(missing))}"
            )
        if run_on in self.running_hosts:
            self.check.fail(
                f"{where}.running_on", f"host {run_on} already runs {self.running_hosts[run_on]}"
            )
        self.running_hosts[run_on] = where


def _validate_suites(data: dict, check: _Checker, jobs: _JobChecker) -> list[dict]:
    suites: list[dict] = []
    for i, entry in enumerate(_entries(data, "suites", check)):
        where = _label(i, entry, "suites", "name")
        check.known(entry, where, LAB_SUITE_FIELDS)
        priority = check.priority(entry, where, DEFAULT_PRIORITY)
        min_duts = check.limited(entry, "min_duts", where, default=0)
        max_duts = check.limited(entry, "max_duts", where, default=None)
        if max_duts is not None and min_duts is not None and min_duts > max_duts:
            check.fail(f"{where}.min_duts", "cannot exceed max_duts")
        suite_jobs = [
            jobs.entry(
                j, f"{where}.jobs[{k}]" + (f" ({j.get('name')})" if j.get("name") else ""), priority
            )
            for k, j in enumerate(_entries(entry, "jobs", check))
        ]
        if not suite_jobs:
            check.fail(f"{where}.jobs", "a suite needs at least one job")
        suites.append(
            {
                "name": check.text(entry, "name", where, required=True),
                "priority": priority,
                "min_duts": min_duts or 0,
                "max_duts": max_duts,
                "build": check.text(entry, "build", where),
                "jobs": suite_jobs,
            }
        )
    return suites


def validate(data: Any) -> dict:
    """Check a parsed lab file completely; return normalized data or raise LabFileError."""
    check = _Checker()
    if not isinstance(data, dict):
        raise LabFileError(["the file must hold an object with workers, hosts, suites, jobs"])
    unknown = set(data) - {"workers", "hosts", "suites", "jobs"}
    for key in sorted(unknown):
        check.fail(key, "unknown section (expected workers, hosts, suites, jobs)")
    workers = _validate_workers(data, check)
    known_workers = {w["name"] for w in workers} | set(
        Worker.objects.values_list("name", flat=True)
    )
    hosts = _validate_hosts(data, check, known_workers)
    host_labels = {h["hostname"]: set(h["labels"]) for h in hosts}
    for host in Host.objects.exclude(hostname__in=host_labels).prefetch_related("labels"):
        host_labels[host.hostname] = set(host.label_names)
    job_check = _JobChecker(check, host_labels)
    suites = _validate_suites(data, check, job_check)
    jobs = [
        job_check.entry(entry, _label(i, entry, "jobs", "name"), DEFAULT_PRIORITY)
        for i, entry in enumerate(_entries(data, "jobs", check))
    ]
    if check.problems:
        raise LabFileError(check.problems)
    return {"workers": workers, "hosts": hosts, "suites": suites, "jobs": jobs}


@dataclass
class ImportResult:
    workers: int = 0
    hosts: int = 0
    suites: int = 0
    jobs: int = 0
    running: int = 0

    def __str__(self) -> str:
        return (
            f"{self.workers} workers, {self.hosts} hosts, {self.suites} suites, "
            f"{self.jobs} jobs ({self.running} running)"
        )


# Each object goes through the service a person would use, so the import leaves the same audit
# trail (created, locked, paused, status, leased, started) as doing it by hand. The actor is a
# system name, not a user: submission limits apply to people, not to restoring a lab.


def _hold_match(
    flag: bool, current: str, *, held: bool, reason: str, set_: Callable, clear: Callable
) -> None:
    """Bring a lock or pause to what the file says: clear it, set it, or replace its reason."""
    if flag and (not held or current != reason):
        clear()
    if held and (not flag or current != reason):
        set_(reason)


def _import_workers(lab: dict, *, actor: str, result: ImportResult) -> dict[str, Worker]:
    workers = {w.name: w for w in Worker.objects.all()}
    for w in lab["workers"]:
        reason = (w["paused_reason"] or "paused in lab file") if w["paused"] else ""
        # Created running, then paused: the trail shows the pause and its reason as its own event.
        worker = workers.get(w["name"]) or hosts_services.worker_create(name=w["name"], by=actor)
        _hold_match(
            worker.paused,
            worker.paused_reason,
            held=w["paused"],
            reason=reason,
            set_=lambda r, wk=worker: hosts_services.worker_pause(worker=wk, by=actor, reason=r),
            clear=lambda wk=worker: hosts_services.worker_resume(worker=wk, by=actor),
        )
        workers[worker.name] = worker
        result.workers += 1
    return workers


def _import_hosts(
    lab: dict, workers: dict[str, Worker], *, actor: str, result: ImportResult
) -> dict[str, Host]:
    hosts = {h.hostname: h for h in Host.objects.select_related("worker")}
    for h in lab["hosts"]:
        worker = workers[h["worker"]] if h["worker"] else None
        host = hosts.get(h["hostname"])
        if host is None:
            host = hosts_services.host_create(
                hostname=h["hostname"],
                by=actor,
                worker=worker,
                labels=h["labels"],
                status=h["status"],
                current_build=h["current_build"],
            )
        else:
            host = jobs_services.host_update(
                host=host,
                by=actor,
                labels=h["labels"],
                status=h["status"],
                worker=worker,
                current_build=h["current_build"],
            )
        _hold_match(
            host.locked,
            host.lock_reason,
            held=h["locked"],
            reason=h["lock_reason"],
            set_=lambda r, hs=host: hosts_services.host_lock(host=hs, by=actor, reason=r),
            clear=lambda hs=host: hosts_services.host_unlock(host=hs, by=actor),
        )
        hosts[host.hostname] = host
        result.hosts += 1
    return hosts


def _spec(j: dict, hosts: dict[str, Host]) -> JobSpec:
    return JobSpec(
        name=j["name"],
        labels=j["labels"],
        host=hosts[j["host"]] if j["host"] else None,
        priority=j["priority"],
        max_retries=j["max_retries"],
        timeout=timedelta(seconds=j["timeout"]),
        roles=j["roles"],
        together_by=j["together_by"],
    )


def _start_running(job: Job, host: Host, *, actor: str, now: datetime) -> None:
    """Restore a job the file says is running: lease its host to it, then start it."""
    if Lease.objects.active().filter(host=host).exists():
        raise LabFileError([f"job {job.name}.running_on: host {host.hostname} is already leased"])
    text = f"imported as running job {job.name}"
    transitions.lease_job(
        host, job, mover=Mover.IMPORT, by=actor, at=now, reason="imported running", message=text
    )
    jobs_services.job_start(job=job, by=actor, at=now)


def _import_suite(
    s: dict, hosts: dict[str, Host], *, actor: str, at: datetime, result: ImportResult
) -> list[tuple[Job, dict]]:
    """Submit a new suite, or update one of the same name and add the jobs it lacks."""
    suite = Suite.objects.filter(name=s["name"], aborted_at__isnull=True).order_by("-id").first()
    if suite is None:
        suite = jobs_services.suite_submit(
            owner=actor,
            name=s["name"],
            jobs=[_spec(j, hosts) for j in s["jobs"]],
            build=s["build"],
            priority=s["priority"],
            min_duts=s["min_duts"],
            max_duts=s["max_duts"],
            allow_unmatched=True,  # a lab file restores what it is given
            now=at,
        )
        result.suites += 1
        made = list(suite.jobs.order_by("id"))  # bulk-created in file order
        result.jobs += len(made)
        return list(zip(made, s["jobs"], strict=True))
    suite.priority, suite.min_duts, suite.max_duts = s["priority"], s["min_duts"], s["max_duts"]
    suite.build = s["build"]
    suite.save()
    have = set(suite.jobs.values_list("name", flat=True))
    # No service adds a job to a standing suite (submission is whole suites); like submission,
    # creating a queued job writes no host event, so nothing is lost by creating the rows here.
    added = [
        (
            Job.objects.create(
                suite=suite,
                name=j["name"],
                priority=j["priority"],
                label_key=encode_labels(j["labels"]),
                host=hosts[j["host"]] if j["host"] else None,
                max_retries=j["max_retries"],
                timeout=timedelta(seconds=j["timeout"]),
                roles=j["roles"],
                together_by=j["together_by"],
                created_at=at,
                submitted_at=suite.created_at,
            ),
            j,
        )
        for j in s["jobs"]
        if j["name"] not in have
    ]
    result.jobs += len(added)
    return added


def import_lab(
    data: Any, *, actor: str = "import_lab", now: datetime | None = None
) -> ImportResult:
    """Create or update everything in a lab file in one transaction; all or nothing."""
    lab = validate(data)
    try:
        return _import(lab, actor=actor, now=now or timezone.now())
    except LabFileError:
        raise
    except ServiceError as exc:
        # validate() checks what the services check; should one still refuse, the whole file
        # is rejected with its reason rather than failing half-way through.
        raise LabFileError([exc.message]) from exc


@transaction.atomic
def _import(lab: dict, *, actor: str, now: datetime) -> ImportResult:
    result = ImportResult()
    workers = _import_workers(lab, actor=actor, result=result)
    hosts = _import_hosts(lab, workers, actor=actor, result=result)
    made: list[tuple[Job, dict]] = []
    # File order is submission order: space submission times a microsecond apart.
    step = timedelta(microseconds=1)
    for k, s in enumerate(lab["suites"]):
        made += _import_suite(s, hosts, actor=actor, at=now + k * step, result=result)
    unfinished = Job.objects.unfinished().filter(suite__isnull=True)
    for k, j in enumerate(lab["jobs"], start=len(lab["suites"])):
        if not unfinished.filter(name=j["name"]).exists():
            spec, at = _spec(j, hosts), now + k * step
            job = jobs_services.job_submit(owner=actor, spec=spec, allow_unmatched=True, now=at)
            made.append((job, j))
            result.jobs += 1
    for job, j in made:
        if j["running_on"]:
            _start_running(job, hosts[j["running_on"]], actor=actor, now=now)
            result.running += 1
    request_tick("lab imported")
    return result
