"""What-if plans, POST /api/scheduler/plan/: the proposed change in, the next tick's plan out."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rest_framework import serializers

from hosts.models import Host, Worker
from jobs.api import submit_serializers as submit
from jobs.api.fields import PriorityField
from jobs.api.settings_serializers import ProposedSettingsSerializer
from jobs.api.submit_serializers import SuiteCreateInputSerializer
from jobs.models import SchedulerSettings, Suite
from jobs.scheduling.planner import WAIT_CODES, Policy
from jobs.scheduling.whatif import (
    Change,
    SuiteChange,
    WhatIf,
    new_job_id,
    new_job_index,
    summary,
)
from jobs.services.submission import suite_prepare
from jobs.submission_schema import StrictInputSerializer, limited_integer
from schedsite.api_fields import StrictCharField, StrictIntegerField

MAX_NAMES = 1000  # workers or hosts one preview may pause or lock
LIST_LIMIT = 200  # jobs listed per part of the answer; the counts give the totals


class SuiteChangeInputSerializer(StrictInputSerializer):
    """A queued suite's new priority, min_duts or max_duts (null: no cap)."""

    suite = StrictIntegerField(min_value=1, help_text="The suite's id.")
    priority = PriorityField(required=False)
    min_duts = limited_integer("min_duts", required=False)
    max_duts = limited_integer("max_duts", required=False, allow_null=True)


class PlanInputSerializer(StrictInputSerializer):
    """A proposed change: a suite to submit, workers to pause, hosts to lock, suite edits or
    scheduler settings."""

    suite = SuiteCreateInputSerializer(
        required=False, help_text="A suite as POST /api/suites/ takes it; it is not saved."
    )
    pause_workers = serializers.ListField(
        child=StrictCharField(max_length=255), required=False, default=list, max_length=MAX_NAMES
    )
    lock_hosts = serializers.ListField(
        child=StrictCharField(max_length=255), required=False, default=list, max_length=MAX_NAMES
    )
    suite_changes = SuiteChangeInputSerializer(many=True, required=False, default=list)
    settings = ProposedSettingsSerializer(
        required=False,
        help_text="Scheduler settings to try (any of them; the rest keep their values). "
        "Nothing is saved.",
    )

    def validate(self, data: dict) -> dict:
        if not (
            data.get("suite")
            or data["pause_workers"]
            or data["lock_hosts"]
            or data["suite_changes"]
            or data.get("settings")
        ):
            raise serializers.ValidationError(
                "Propose a change: suite, pause_workers, lock_hosts, suite_changes or settings."
            )
        data["workers"] = _named(Worker, "name", data["pause_workers"], "pause_workers")
        data["hosts"] = _named(Host, "hostname", data["lock_hosts"], "lock_hosts")
        data["suites"] = self._suites(data["suite_changes"])
        return data

    def _suites(self, edits: list[dict]) -> dict[int, Suite]:
        ids = [edit["suite"] for edit in edits]
        if len(set(ids)) != len(ids):
            raise serializers.ValidationError({"suite_changes": ["Name each suite once."]})
        suites = Suite.objects.in_bulk(ids)
        errors = []
        for edit in edits:
            suite = suites.get(edit["suite"])
            if suite is None:
                errors.append({"suite": [f"No suite {edit['suite']}."]})
                continue
            min_duts = edit.get("min_duts", suite.min_duts)
            max_duts = edit.get("max_duts", suite.max_duts)
            if max_duts is not None and min_duts > max_duts:
                errors.append({"min_duts": ["min_duts cannot exceed max_duts."]})
            else:
                errors.append({})
        if any(errors):
            raise serializers.ValidationError({"suite_changes": errors})
        return suites


def _named(model: type, field: str, names: list[str], where: str) -> list[Any]:
    """The objects with these names, in one query; an unknown name is a 400."""
    if not names:
        return []
    found = {getattr(o, field): o for o in model.objects.filter(**{f"{field}__in": names})}
    missing = sorted(set(names) - set(found))
    if missing:
        raise serializers.ValidationError({where: [f"Not found: {', '.join(missing)}."]})
    return [found[name] for name in dict.fromkeys(names)]


def plan_change_of(owner: Any, data: dict, *, now: datetime) -> Change:
    """The change a validated `PlanInputSerializer` body proposes, names resolved to ids."""
    new_suite, new_jobs = None, []
    if data.get("suite"):
        new_suite, new_jobs = suite_prepare(
            owner=owner, **submit.suite_arguments(data["suite"]), now=now
        )
    paused = frozenset(
        Host.objects.filter(worker__in=data["workers"]).values_list("id", flat=True)
        if data["workers"]
        else ()
    )
    return Change(
        new_suite=new_suite,
        new_jobs=new_jobs,
        pause_host_ids=paused,
        lock_host_ids=frozenset(host.pk for host in data["hosts"]),
        lock_reason="(the lock you preview)",
        suite_changes=_suite_changes(data["suite_changes"]),
        policy=_proposed_policy(data.get("settings")),
    )


def _proposed_policy(fields: dict | None) -> Policy | None:
    """The current scheduler settings with the proposed fields changed; None if none are."""
    if not fields:
        return None
    current = SchedulerSettings.load()
    for name, value in fields.items():
        if name == "default_duration":
            value = timedelta(seconds=value)
        setattr(current, name, value)  # an unsaved copy: only read as a Policy
    return current.policy()


def _suite_changes(edits: list[dict]) -> list[SuiteChange]:
    return [
        SuiteChange(
            suite_id=edit["suite"],
            priority=edit.get("priority"),
            min_duts=edit.get("min_duts"),
            max_duts=edit.get("max_duts"),
            clear_max_duts="max_duts" in edit and edit["max_duts"] is None,
        )
        for edit in edits
    ]


# --- the answer -----------------------------------------------------------------------------


class PlanHostSerializer(serializers.Serializer):
    role = serializers.CharField(help_text="The job's role the host would take.")
    hostname = serializers.CharField()
    provision_to = serializers.CharField(
        required=False, help_text="The build this host would be provisioned to, if any."
    )


class PlanJobSerializer(serializers.Serializer):
    """One job of the answer: a saved job by id, or the proposed suite's by index."""

    job = serializers.IntegerField(allow_null=True, help_text="Id; null for a proposed job.")
    new_job = serializers.IntegerField(
        allow_null=True, help_text="Index in the proposed suite's jobs; null for a saved job."
    )
    name = serializers.CharField()
    host = serializers.CharField(
        required=False,
        help_text="The host it would be leased; for a multi-host job, its first essential "
        "host (whose worker runs it).",
    )
    hosts = PlanHostSerializer(
        many=True,
        required=False,
        help_text="A multi-host job's hosts, essential first, by role (docs/api.md#"
        "multi-host-jobs).",
    )
    code = serializers.ChoiceField(
        choices=WAIT_CODES,
        required=False,
        help_text="Its wait reason's code.",
    )
    message = serializers.CharField(required=False, help_text="Its wait reason.")
    role = serializers.CharField(
        required=False,
        help_text="In `stranded`, a multi-host job's role no set of hosts could serve after the "
        "change.",
    )
    provision_to = serializers.CharField(
        required=False,
        help_text="In `leases` and `would_start`, only for a job whose host would be "
        "provisioned first: the build (the job's build differs from the host's current_build).",
    )


class PlanNewJobsSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    would_start = serializers.IntegerField()
    waiting = serializers.IntegerField()
    waits = PlanJobSerializer(many=True)


class PlanPreemptionSerializer(serializers.Serializer):
    job = serializers.IntegerField(help_text="The running job that would be stopped.")
    name = serializers.CharField()
    host = serializers.CharField(help_text="The host it would give up.")
    priority = serializers.IntegerField()
    for_job = serializers.IntegerField(
        allow_null=True, help_text="The job it would be stopped for; null for a proposed job."
    )
    for_new_job = serializers.IntegerField(
        allow_null=True, help_text="Index of the proposed job it would be stopped for."
    )
    for_name = serializers.CharField()


class PlanCountsSerializer(serializers.Serializer):
    leases = serializers.IntegerField()
    leases_without_change = serializers.IntegerField()
    would_start = serializers.IntegerField()
    would_lose = serializers.IntegerField()
    stranded = serializers.IntegerField()
    would_preempt = serializers.IntegerField()
    provisions = serializers.IntegerField(
        help_text="Hosts the plan with the change would provision before their test."
    )


class PlanResultSerializer(serializers.Serializer):
    """What the next tick would do with the change (docs/api.md#what-if-plans)."""

    summary = serializers.CharField()
    leases = PlanJobSerializer(many=True)
    new_jobs = PlanNewJobsSerializer(allow_null=True)
    would_start = PlanJobSerializer(many=True)
    would_lose = PlanJobSerializer(many=True)
    stranded = PlanJobSerializer(many=True)
    would_preempt = PlanPreemptionSerializer(
        many=True, help_text="Running jobs preemption would stop (when it is on)."
    )
    counts = PlanCountsSerializer()


def plan_answer(result: WhatIf) -> dict[str, Any]:
    """The answer's body: leases, the proposed jobs, the difference, a one-line summary."""
    hosts = result.snapshot.hosts_by_id
    leased = result.leased_hosts()
    every = result.job_hosts()
    provisioning = result.provisioning_jobs()

    def entry(job_id: int, *, host: bool = False, reason: bool = False) -> dict[str, Any]:
        index = new_job_index(job_id)
        row: dict[str, Any] = {
            "job": None if index is not None else job_id,
            "new_job": index,
            "name": result.jobs[job_id].name,
        }
        if host:
            row["host"] = hosts[leased[job_id]].hostname
            if job_id in provisioning:
                row["provision_to"] = provisioning[job_id]
            if result.jobs[job_id].roles:
                row["hosts"] = [
                    {"role": a.role, "hostname": hosts[a.host_id].hostname}
                    | (
                        {"provision_to": result.provisions[job_id, a.host_id]}
                        if (job_id, a.host_id) in result.provisions
                        else {}
                    )
                    for a in every[job_id]
                ]
        if reason:
            why = result.after.wait_reasons[job_id]
            row["code"], row["message"] = why.code, why.message
        return row

    new_jobs = None
    if result.new_started or result.new_waiting:
        new_jobs = {
            "total": len(result.new_started) + len(result.new_waiting),
            "would_start": len(result.new_started),
            "waiting": len(result.new_waiting),
            "waits": [entry(new_job_id(i), reason=True) for i in result.new_waiting[:LIST_LIMIT]],
        }
    return {
        "summary": summary(result),
        # One entry per job: a multi-host job lists its hosts in it.
        "leases": [entry(job_id, host=True) for job_id in every],
        "new_jobs": new_jobs,
        "would_start": [entry(j, host=True) for j in result.would_start[:LIST_LIMIT]],
        "would_lose": [entry(j, reason=True) for j in result.would_lose[:LIST_LIMIT]],
        "stranded": [
            entry(j, reason=True)
            | ({"role": result.stranded_roles[j]} if j in result.stranded_roles else {})
            for j in result.stranded[:LIST_LIMIT]
        ],
        "would_preempt": [
            {
                "job": p.victim.job_id,
                "name": p.victim.name,
                "host": hosts[p.victim.host_id].hostname,
                "priority": p.victim.priority,
                "for_job": None if new_job_index(p.job.id) is not None else p.job.id,
                "for_new_job": new_job_index(p.job.id),
                "for_name": p.job.name,
            }
            for p in result.preempted[:LIST_LIMIT]
        ],
        "counts": {
            "leases": len(result.after.assignments),
            "leases_without_change": len(result.before.assignments),
            "would_start": len(result.would_start),
            "would_lose": len(result.would_lose),
            "stranded": len(result.stranded),
            "would_preempt": len(result.preempted),
            "provisions": len(result.provisions),
        },
    }
