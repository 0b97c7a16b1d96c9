"""Submitting suites and jobs: validation, label fan-out, limits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from hosts.audit import Actor, actor_user
from hosts.choices import HostStatus
from hosts.models import Host, Label
from hosts.rules import job_fits_host, missing_labels
from jobs import limits
from jobs.choices import DEFAULT_PRIORITY
from jobs.job_specs import MAX_EXPIRES_AFTER as MAX_EXPIRES_AFTER
from jobs.job_specs import (
    JobSpec,
    check_expires_after,
    check_priority,
    fanout_lab,
    fanout_spec,
    hosts_needed,
    job_from_spec,
)
from jobs.models import Job, Suite, decode_labels, encode_labels
from jobs.scheduling.triggers import request_tick
from schedsite.errors import InvalidInput

# How a refusal of a job no host could run says to submit it anyway (the API's
# allow_unmatched); the submit form names its checkbox instead (jobs.forms.form_wording).
ALLOW_UNMATCHED = "allow unmatched jobs"


def _check_suite(*, name: str, priority: int, min_duts: int, max_duts: int | None) -> None:
    if not (name or "").strip():
        raise InvalidInput("name is required", field="name")
    longest = limits.bounds("name").high
    if len(name.strip()) > longest:
        raise InvalidInput(f"name: at most {longest} characters", field="name")
    check_priority(priority)
    low, high = limits.bounds("min_duts").low, limits.bounds("min_duts").high
    if isinstance(min_duts, bool) or not isinstance(min_duts, int) or not low <= min_duts <= high:
        raise InvalidInput(
            f"min_duts must be a whole number from {low} to {high}", field="min_duts"
        )
    low, high = limits.bounds("max_duts").low, limits.bounds("max_duts").high
    if max_duts is not None and (not isinstance(max_duts, int) or not low <= max_duts <= high):
        raise InvalidInput(f"max_duts must be empty or from {low} to {high}", field="max_duts")
    if max_duts is not None and min_duts > max_duts:
        raise InvalidInput("min_duts cannot exceed max_duts", field="min_duts")


@transaction.atomic
def suite_submit(
    *,
    owner: Actor,
    rerun_of: Suite | None = None,
    cloned_from: Suite | None = None,
    now: datetime | None = None,
    **fields: Any,
) -> Suite:
    """Submit a suite with its jobs, or a fan-out suite with one job per matching host.

    `fields` are `suite_prepare`'s (name, jobs, build, priority, quotas, fan-out, expiry,
    allow_unmatched); it checks them all, then the submitter's limits apply. A fan-out suite
    follows the lab until `fanout_until` (jobs/scheduling/fanout.py).
    A job no host in the lab could run (its labels, or its pinned host) is refused, naming
    what matches nothing, unless `allow_unmatched`: the tester waits for such hosts to come.
    `rerun_of` and `cloned_from` link the new suite to the one it was made from.
    """
    now = now or timezone.now()
    suite, rows = suite_prepare(owner=owner, now=now, **fields)
    suite.rerun_of, suite.cloned_from = rerun_of, cloned_from
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user,
            priority=suite.priority,
            job_priorities=[row.priority for row in rows],
            min_duts=suite.min_duts,
            new_jobs=len(rows),
            now=now,
        )
    suite.save()  # after the checks: the rate limit counts the user's suites saved before
    Job.objects.bulk_create(rows)
    request_tick("suite submitted")
    return suite


def suite_prepare(
    *,
    owner: Actor,
    name: str,
    jobs: Sequence[JobSpec] = (),
    build: str = "",
    priority: int = DEFAULT_PRIORITY,
    min_duts: int = 0,
    max_duts: int | None = None,
    fanout_labels: Sequence[str] | None = None,
    fanout_name: str = "",
    fanout_until: datetime | None = None,
    expires_after: int | None = None,
    allow_unmatched: bool = False,
    now: datetime,
) -> tuple[Suite, list[Job]]:
    """Check a suite as `suite_submit` does and build it with its jobs, unsaved.

    Everything but the submitter's limits: what-if plans (jobs/scheduling/whatif.py) preview
    a suite with the rows this returns and never save them.
    """
    _check_suite(name=name, priority=priority, min_duts=min_duts, max_duts=max_duts)
    check_expires_after(expires_after)
    suite = Suite(
        name=name.strip(),
        build=(build or "")[:200],
        priority=priority,
        min_duts=min_duts,
        max_duts=max_duts,
        owner=actor_user(owner),
        created_at=now,
        fanout_labels=encode_labels(fanout_labels) if fanout_labels is not None else "",
        fanout_until=fanout_until if fanout_labels is not None else None,
        expires_after=expires_after,
    )
    if fanout_labels is not None:
        if jobs:
            raise InvalidInput("a fan-out suite takes labels, not a job list", field="jobs")
        jobs = _fanout_specs(fanout_labels, fanout_name or name)
    if not jobs:
        raise InvalidInput("a suite needs at least one job", field="jobs")
    if len(jobs) > settings.MAX_JOBS_PER_SUITE:
        raise InvalidInput(
            f"a suite may have at most {settings.MAX_JOBS_PER_SUITE} jobs", field="jobs"
        )
    rows = [
        job_from_spec(spec, suite=suite, owner=owner, now=now, index=i)
        for i, spec in enumerate(jobs)
    ]
    for row in rows:
        row.fanout = fanout_labels is not None
    # min_duts and max_duts count hosts: a job with roles counts its essential hosts
    # (docs/scheduling.md#multi-host-jobs).
    for i, row in enumerate(rows):
        needed = hosts_needed(row.roles)
        if max_duts is not None and needed > max_duts:
            raise InvalidInput(
                f"jobs[{i}].roles: the job needs {needed} hosts at once and the suite's "
                f"max_duts is {max_duts}: it could never run",
                field=f"jobs[{i}].roles",
            )
    total = sum(hosts_needed(row.roles) for row in rows)
    if min_duts > total:
        what = (
            f"{len(rows)} job{'s' * (len(rows) != 1)}"
            if total == len(rows)
            else f"{len(rows)} job{'s' * (len(rows) != 1)} needing {total} hosts"
        )
        raise InvalidInput(
            f"min_duts ({min_duts}) is more than the suite's {what}: the quota could never be met",
            field="min_duts",
        )
    if not allow_unmatched:
        _check_matched(rows, indexed=True)
    return suite, rows


def _check_matched(jobs: Sequence[Job], *, indexed: bool) -> None:
    """Refuse a job that no host in the lab, retired ones aside, could ever take."""
    lab = Host.objects.exclude(status=HostStatus.RETIRED)
    known = set(Label.objects.filter(hosts__in=lab).values_list("name", flat=True).distinct())
    fits: dict[str, bool] = {}  # label_key -> some host carries them all: one query per set
    pinned = {job.host_id for job in jobs if job.host_id is not None}
    carries = {h.pk: h for h in lab.filter(pk__in=pinned).prefetch_related("labels")}
    for i, job in enumerate(jobs):
        where = f"jobs[{i}]." if indexed else ""
        labels = decode_labels(job.label_key)
        if job.host_id is not None:
            host = carries.get(job.host_id)
            on_pin = host is not None and job_fits_host(
                labels=set(labels),
                pinned_host_id=job.host_id,
                host_id=host.pk,
                host_labels=set(host.label_names),
            )
            if not on_pin:
                lacks = missing_labels(set(labels), set(host.label_names)) if host else []
                why = f"lacks {', '.join(lacks)}" if host else "is retired"
                raise InvalidInput(
                    f"{where}host: {job.host.hostname} {why}, so the job could never run; "
                    f"{ALLOW_UNMATCHED} to submit it anyway",
                    field=f"{where}host",
                )
            continue
        if missing := [name for name in labels if name not in known]:
            what = f"label{'s' * (len(missing) > 1)} {', '.join(missing)}"
        else:
            if job.label_key not in fits:
                fits[job.label_key] = lab.fitting(labels).exists()
            if fits[job.label_key]:
                continue
            what = f"{', '.join(labels)} together" if labels else "anything: it has no hosts"
        raise InvalidInput(
            f"{where}labels: no host in the lab carries {what}; {ALLOW_UNMATCHED} to "
            "submit it anyway and wait for such a host",
            field=f"{where}labels",
        )
    checked: set[str] = set()  # jobs asking for the same hosts are checked once
    for i, job in enumerate(jobs):
        key = json.dumps([job.label_key, job.roles, job.together_by])
        if job.roles and key not in checked:
            _check_roles(job, known, lab, where=f"jobs[{i}]." if indexed else "")
            checked.add(key)


UNMATCHED_HINT = f"; {ALLOW_UNMATCHED} to submit it anyway and wait for such hosts"


def _names(roles: list[dict], subset: int) -> str:
    chosen = [role["name"] for k, role in enumerate(roles) if subset >> k & 1]
    if len(chosen) == 1:
        return f"role {chosen[0]}"
    return "roles " + ", ".join(chosen[:-1]) + f" and {chosen[-1]}"


def _shortfall(signatures: dict[int, int], counts: list[int]) -> tuple[int, int] | None:
    """(hosts missing, roles as a bit set) of the smallest set of roles the hosts cannot all
    serve at once, or None if every role can have its count together.

    `signatures` counts hosts by the roles each could take (a bit per role). Each host takes
    one role, so by Hall's theorem the roles fit together exactly when every set of them has
    at least as many hosts fitting one of them as its counts add up to; a job has at most
    eight roles, so all 255 sets are looked at.
    """
    n = len(counts)
    for subset in sorted(range(1, 1 << n), key=lambda m: (m.bit_count(), m)):
        need = sum(counts[k] for k in range(n) if subset >> k & 1)
        have = sum(c for signature, c in signatures.items() if signature & subset)
        if have < need:
            return need - have, subset
    return None


def _check_roles(job: Job, known: set[str], lab: Any, *, where: str) -> None:
    """Refuse a multi-host job no set of hosts in the lab could ever give every role at once
    (all of them sharing one `<together_by>:<value>` label, if asked), naming the role."""
    job_labels = set(decode_labels(job.label_key))
    roles: list[dict] = job.roles
    wants = [job_labels | set(role["labels"]) for role in roles]
    for k, (role, labels) in enumerate(zip(roles, wants, strict=True)):
        if missing := sorted(labels - known):
            what = f"label{'s' * (len(missing) > 1)} {', '.join(missing)}"
            raise InvalidInput(
                f"{where}roles[{k}].labels: no host in the lab carries {what} (role "
                f"{role['name']}){UNMATCHED_HINT}",
                field=f"{where}roles[{k}].labels",
            )
    prefix = f"{job.together_by}:" if job.together_by else ""
    carried = _relevant_labels(lab, set().union(*wants), prefix)
    counts = [role["count"] for role in roles]

    def signature(labels: set[str]) -> int:
        return sum(1 << k for k, wanted in enumerate(wants) if wanted <= labels)

    everywhere: dict[int, int] = {}
    for labels in carried.values():
        sig = signature(labels)
        everywhere[sig] = everywhere.get(sig, 0) + 1
    # A host carrying none of the labels that matter takes only a role that asks for none.
    if bare := signature(set()):
        everywhere[bare] = everywhere.get(bare, 0) + lab.count() - len(carried)
    if short := _shortfall(everywhere, counts):
        _refuse_short(roles, wants, short, where=where, group="")
    if prefix:
        _check_together(job, roles, wants, carried, signature, where=where)


def _check_together(
    job: Job,
    roles: list[dict],
    wants: list[set[str]],
    carried: dict[int, set[str]],
    signature: Any,
    *,
    where: str,
) -> None:
    """Refuse the job unless one `<together_by>:<value>` group of hosts serves every role."""
    prefix = f"{job.together_by}:"
    groups: dict[str, dict[int, int]] = {}
    for labels in carried.values():
        sig = signature(labels)
        for value in (name for name in labels if name.startswith(prefix)):
            counted = groups.setdefault(value, {})
            counted[sig] = counted.get(sig, 0) + 1
    if not groups:
        raise InvalidInput(
            f"{where}together_by: no host in the lab carries a {prefix}<value> label, so no "
            f"hosts could be kept together by {job.together_by}{UNMATCHED_HINT}",
            field=f"{where}together_by",
        )
    counts = [role["count"] for role in roles]
    closest: tuple[int, int, str] | None = None
    for value in sorted(groups):
        short = _shortfall(groups[value], counts)
        if short is None:
            return
        if closest is None or short[0] < closest[0]:
            closest = (*short, value)
    assert closest is not None
    _refuse_short(roles, wants, closest[:2], where=where, group=closest[2])


def _relevant_labels(lab: Any, names: set[str], prefix: str) -> dict[int, set[str]]:
    """Host id -> the labels among `names` (or starting with `prefix`) it carries, for the
    hosts carrying any: one query."""
    match = Q(label__name__in=names)
    if prefix:
        match |= Q(label__name__startswith=prefix)
    carried: dict[int, set[str]] = {}
    through = Host.labels.through.objects.filter(host__in=lab).filter(match)
    for host_id, name in through.values_list("host_id", "label__name"):
        carried.setdefault(host_id, set()).add(name)
    return carried


def _refuse_short(
    roles: list[dict], wants: list[set[str]], short: tuple[int, int], *, where: str, group: str
) -> None:
    missing, subset = short
    first = next(k for k in range(len(roles)) if subset >> k & 1)
    need = sum(role["count"] for k, role in enumerate(roles) if subset >> k & 1)
    if subset.bit_count() == 1:
        what = ", ".join(sorted(wants[first])) or "no label"
        asks = f"{_names(roles, subset)} needs {need} host{'s' * (need != 1)} carrying {what}"
    else:
        asks = f"{_names(roles, subset)} need {need} different hosts between them"
    if group:
        prefix = group.partition(":")[0]
        where_hosts = (
            f"no single {prefix}:<value> group of hosts can give every role its hosts at once: "
            f"the closest, {group}, is {missing} host{'s' * (missing != 1)} short, as {asks}"
        )
    else:
        where_hosts = f"{asks}, and the lab has {need - missing} (retired hosts aside)"
    raise InvalidInput(
        f"{where}roles[{first}]: {where_hosts}{UNMATCHED_HINT}", field=f"{where}roles[{first}]"
    )


def _fanout_specs(labels: Sequence[str], job_name: str) -> list[JobSpec]:
    names = sorted(set(labels))
    if not names:
        raise InvalidInput("fan-out needs at least one label", field="fanout_labels")
    hosts = list(fanout_lab(names).order_by("hostname"))
    if not hosts:
        raise InvalidInput(
            f"no host carries {', '.join(names)}: a fan-out suite would be empty",
            field="fanout_labels",
        )
    return [fanout_spec(names, job_name, h) for h in hosts]


@transaction.atomic
def job_submit(
    *, owner: Actor, spec: JobSpec, allow_unmatched: bool = False, now: datetime | None = None
) -> Job:
    """Submit a standalone job; as in `suite_submit`, one no host could run is refused."""
    now = now or timezone.now()
    job = job_from_spec(spec, suite=None, owner=owner, now=now)
    if not allow_unmatched:
        _check_matched([job], indexed=False)
    if (user := actor_user(owner)) is not None:
        limits.submission_check(
            user=user, priority=None, job_priorities=[job.priority], new_jobs=1, now=now
        )
    job.save()
    request_tick("job submitted")
    return job
