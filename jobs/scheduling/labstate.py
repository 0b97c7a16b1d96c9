"""The lab as the scheduler last read it, kept in its process and refreshed from the change log.

A tick at 100,000 queued jobs spent most of its time reading every queued job and every host
again although a handful had changed. `LabState` holds what the planner reads — every host
with its labels and active lease, every queued test job, the workers — as planner values. A
whole read builds it (`LabState.read`); after that, a tick applies the rows the change log
names (`refresh`) and reads only those. The database stays the source of truth: a process
whose lab is older than other processes' ticks (django-q runs tasks in several workers) also
re-reads the rows those ticks took from the log; the lab is read whole on start, after a tick
rolled back, when the log cannot say which rows changed or no longer holds them, and every
`SCHEDULER_WHOLE_READ_EVERY` ticks (docs/performance.md#the-incremental-tick).
`scheduler_snapshot` is the whole read, and the reference the tests compare with.
"""

from __future__ import annotations

import gc
import json
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from heapq import heappop, heappush
from operator import attrgetter, itemgetter

from django.conf import settings
from django.utils import timezone

from hosts.choices import HostStatus
from hosts.models import Host, Worker
from hosts.querysets import seen_online, worker_capacity
from jobs.choices import JobKind
from jobs.models import Job, Lease, decode_labels
from jobs.scheduling import planner, provision_cost, snapshot
from jobs.scheduling.planner.types import RoleNeed
from jobs.scheduling.snapshot import (
    LabChanges,
    Snapshot,
    failed_hosts_of_queued_jobs,
    hosts_last_used,
    job_columns,
    job_converters,
    owner_usage,
    role_needs,
    run_time_medians,
    suite_states,
)
from schedsite.prepared import Ids, PreparedQuery

# The tables whose log rows name what changed (jobs/migrations/0007_lab_change_ids.py).
HOSTS, HOST_LABELS, JOBS, LEASES = "hosts_host", "hosts_host_labels", "jobs_job", "jobs_lease"
# A label renamed or deleted changes the hosts that carry it, and its log row names none.
LABELS = "hosts_label"

_HostRow = tuple[str, str, bool, str, str, int | None, frozenset[str]]  # hostname … labels
# An active lease: its job, the job's priority and suite (None: a reservation), when it was
# acquired and the job's estimated seconds (None: none), for the host's busy_until.
_Lease = tuple[int | None, int | None, int | None, datetime, float | None]

_HOST_COLUMNS = ("id", "hostname", "status", "locked", "lock_reason", "current_build", "worker_id")
_LEASE_COLUMNS = (
    "host_id",
    "job_id",
    "job__priority",
    "job__suite_id",
    "acquired_at",
    "job__estimated_duration",
)


def _host_rows(ids: Iterable[int] | None = None):  # noqa: ANN202 - a values_list queryset
    hosts = Host.objects.all()  # by hostname, as Host's Meta orders
    return (hosts if ids is None else hosts.filter(pk__in_array=ids)).values_list(*_HOST_COLUMNS)


def _label_rows(ids: Iterable[int] | None = None):  # noqa: ANN202
    links = Host.labels.through.objects.order_by()
    if ids is not None:
        links = links.filter(host_id__in_array=ids)
    return links.values_list("host_id", "label__name")


def _lease_rows(ids: Iterable[int] | None = None):  # noqa: ANN202
    leases = Lease.objects.active().order_by()
    if ids is not None:
        leases = leases.filter(host_id__in_array=ids)
    return leases.values_list(*_LEASE_COLUMNS)


def _queued_rows(ids: Iterable[int] | None = None):  # noqa: ANN202
    queued = Job.objects.queued().filter(kind=JobKind.TEST)  # by id, as Job's Meta orders
    if ids is not None:
        queued = queued.filter(pk__in_array=ids)
    queued, fields, _moment, _seconds = job_columns(queued, sized=True, with_not_before=True)
    return queued.values_list(*fields)


# A refresh reads the few hundred hosts and jobs the change log named: building and compiling
# these four querysets cost more of its CPU than reading their rows (schedsite.prepared).
_HOST_ROWS = PreparedQuery(_host_rows, Ids)
_LABEL_ROWS = PreparedQuery(_label_rows, Ids)
_LEASE_ROWS = PreparedQuery(_lease_rows, Ids)
_QUEUED_ROWS = PreparedQuery(_queued_rows, Ids)
_WORKER_ROWS = PreparedQuery(
    lambda: Worker.objects.values_list(
        "id", "name", "paused", "last_seen", "max_jobs", "runner_concurrency"
    ).order_by()
)


class LabState:
    """Hosts, workers and queued test jobs as planner values, refreshable by row."""

    def __init__(self, *, with_last_used: bool) -> None:
        self.take: int | None = None  # the change log's take this lab is as of, once committed
        self.refreshes = 0  # ticks refreshed by row since the last whole read
        self.with_last_used = with_last_used  # keeps each host's last release (spread)
        self.workers: dict[int, tuple[str, bool, bool]] = {}  # id -> name, paused, offline
        self.limits: dict[int, int] = {}  # worker id -> capacity, for those that have one
        self.rows: dict[int, _HostRow] = {}
        self.leases: dict[int, _Lease] = {}  # host id -> its active lease
        # job id -> the hosts its active leases are on (a multi-host job's several)
        self.host_of_job: dict[int, set[int]] = {}
        self.held: dict[int, int] = {}  # suite id -> hosts its jobs' active leases hold
        # worker id -> the jobs whose active leases hold its hosts, each with how many hosts:
        # a multi-host job counts once toward its worker's capacity (WorkerLoad.running)
        self.running: dict[int, Counter[int]] = {}
        # The policy's default_duration_s the hosts' busy_until were computed with (a leased
        # job with no estimate is expected to run that long).
        self.default_s = planner.DEFAULT_POLICY.default_duration_s
        self.last_used: dict[int, datetime] = {}
        self.hosts: dict[int, planner.HostState] = {}  # by hostname, as the whole read
        self.index = planner.HostIndex()  # `hosts` as the plan counts them
        self.hosts_of_worker: dict[int | None, set[int]] = {}
        self.jobs: dict[int, planner.JobState] = {}  # queued test jobs a tick may lease, by id
        self.backoff: dict[int, tuple[planner.JobState, datetime]] = {}  # and their not_before
        self.estimates: dict[int, float] = {}  # job id -> estimated seconds, where set
        self.avoid: dict[int, frozenset[int]] = {}
        self.suite_jobs: dict[int, int] = {}  # suite id -> its jobs in `jobs`
        # `jobs` as planner.group_jobs groups them, made on the first refresh (a whole read
        # that plans once does not need them), and each group's job ids as a heap whose ids
        # of jobs gone from it are dropped once they reach the top.
        self.groups: dict[planner.JobGroupKey, list[planner.JobState]] | None = None
        self._group_ids: dict[planner.JobGroupKey, list[int]] = {}
        # The groups by their lowest job id, as the last snapshot ordered them, and the groups
        # put to or dropped from since: a snapshot re-sorts only those (`_groups_in_order`).
        self._order: list[tuple[int, planner.JobGroupKey]] | None = None
        self._order_dirty: set[planner.JobGroupKey] = set()
        self._by_age: list[tuple[datetime, int]] = []  # (submitted, id) of `jobs`, a heap alike
        self.by_status: Counter[str] = Counter()  # hosts in each status
        self._labels: dict[frozenset[str], frozenset[str]] = {}  # one frozenset per label set
        self._label_keys: dict[str, frozenset[str]] = {}
        # A multi-host job's roles as read (JSON text, or a list off PostgreSQL) with its labels
        # -> its RoleNeeds: jobs of one class share one tuple.
        self._roles: dict[tuple[str, frozenset[str]], tuple[RoleNeed, ...]] = {}
        self._jobs_in_order = True
        self._last_job_id = 0  # the highest id put in `jobs`, while they are in order
        self._hosts_in_order = True

    def drop(self) -> None:
        """Let go of everything this state holds (it is not used again): `for_tick`."""
        self.__dict__.clear()

    # --- building and refreshing --------------------------------------------------------------

    @classmethod
    def read(cls, *, now: datetime, with_last_used: bool = False) -> LabState:
        """Read the whole lab."""
        state = cls(with_last_used=with_last_used)
        state._read_workers(now)
        state._read_hosts(None)
        state.avoid = failed_hosts_of_queued_jobs()
        state._read_jobs(None, now=now)
        return state

    def refresh(self, changed: Mapping[str, frozenset[int] | None], *, now: datetime) -> bool:
        """Apply what the change log names; False if it cannot say (then read the lab whole).

        `changed`: per logged table, the rows its statements named (`snapshot.lab_changes`);
        None where a statement named none (a TRUNCATE).
        """
        if LABELS in changed or any(
            changed.get(t, ()) is None for t in (HOSTS, HOST_LABELS, JOBS, LEASES)
        ):
            return False
        if self.groups is None:
            self.groups = planner.group_jobs(self.jobs.values())
            self._group_ids = {key: sorted(map(_ID, group)) for key, group in self.groups.items()}
            self._order = None
            self._by_age = sorted(zip(map(_SUBMITTED, self.jobs.values()), self.jobs, strict=True))
        job_ids = changed.get(JOBS) or frozenset()
        host_ids = set(changed.get(HOSTS) or ()) | set(changed.get(HOST_LABELS) or ())
        host_ids |= changed.get(LEASES) or frozenset()
        # A job holding a host gives the host its priority and counts against its suite's cap.
        for j in job_ids:
            host_ids.update(self.host_of_job.get(j, ()))
        moved_workers = self._read_workers(now)
        if host_ids:
            self._read_hosts(host_ids)
        for wid in moved_workers:
            for hid in self.hosts_of_worker.get(wid, ()):
                if hid not in host_ids:
                    self._put_host_state(hid)
        avoid = failed_hosts_of_queued_jobs()
        if avoid != self.avoid:
            stale = {
                j for j in avoid.keys() | self.avoid.keys() if avoid.get(j) != self.avoid.get(j)
            }
            self.avoid = avoid
            job_ids = job_ids | {j for j in stale if j in self.jobs or j in self.backoff}
        if job_ids:
            self._read_jobs(job_ids, now=now)
        self.refreshes += 1
        return True

    def _read_workers(self, now: datetime) -> set[int]:
        """Read every worker (a few hundred rows); return those whose hosts' facts changed."""
        workers: dict[int, tuple[str, bool, bool]] = {}
        limits: dict[int, int] = {}
        for wid, name, paused, last_seen, max_jobs, concurrency in _WORKER_ROWS.all():
            workers[wid] = (name, paused, not seen_online(last_seen, now))
            limit = worker_capacity(max_jobs, concurrency)
            if limit is not None:
                limits[wid] = limit
        moved = {
            wid
            for wid in workers.keys() | self.workers.keys()
            if workers.get(wid) != self.workers.get(wid)
        }
        self.workers, self.limits = workers, limits
        return moved

    def _read_hosts(self, ids: Iterable[int] | None) -> None:
        """Read hosts (all, or these) with their labels, active leases and last release."""
        if ids is None:
            host_rows, label_rows, lease_rows = _host_rows(), _label_rows(), _lease_rows()
        else:
            ids = frozenset(ids)
            host_rows, label_rows, lease_rows = (
                _HOST_ROWS.all(ids),
                _LABEL_ROWS.all(ids),
                _LEASE_ROWS.all(ids),
            )
        labels: dict[int, set[str]] = {}
        for host_id, name in label_rows:
            labels.setdefault(host_id, set()).add(name)
        found: dict[int, _Lease] = {
            host_id: (
                job_id,
                prio,
                suite_id,
                acquired,
                estimate.total_seconds() if estimate is not None else None,
            )
            for host_id, job_id, prio, suite_id, acquired, estimate in lease_rows
        }
        rows = {
            hid: (
                hostname,
                status,
                locked,
                reason,
                build,
                worker_id,
                self._label_set(labels.get(hid, ())),
            )
            for hid, hostname, status, locked, reason, build, worker_id in host_rows
        }
        if self.with_last_used:
            if ids is None:
                self.last_used = hosts_last_used()
            else:
                for hid in ids:
                    self.last_used.pop(hid, None)
                self.last_used.update(hosts_last_used(ids))
        for hid in rows.keys() if ids is None else ids:
            self._count(hid, -1)
            self._put_lease(hid, found.get(hid))
            old = self.rows.get(hid)
            row = rows.get(hid)
            if old is not None:
                self.by_status[old[1]] -= 1
            if row is not None:
                self.by_status[row[1]] += 1
            if old is not None and (row is None or row[5] != old[5]):
                self.hosts_of_worker[old[5]].discard(hid)
            if row is None:  # deleted
                self.rows.pop(hid, None)
                self.index.put(self.hosts.pop(hid, None), None)
                continue
            if ids is not None and (old is None or row[0] != old[0]):
                self._hosts_in_order = False  # a new or renamed host
            self.rows[hid] = row
            self._count(hid, +1)
            self.hosts_of_worker.setdefault(row[5], set()).add(hid)
            self._put_host_state(hid)

    def _count(self, hid: int, sign: int) -> None:
        """Count the host's lease for (or, with -1, no longer for) its suite's and worker's."""
        lease, row = self.leases.get(hid), self.rows.get(hid)
        if lease is None or row is None:
            return
        job, _priority, suite, _at, _estimate = lease
        if suite is not None:
            _add(self.held, suite, sign)
        if job is not None and row[5] is not None:  # a reservation runs nothing on the runner
            jobs = self.running.setdefault(row[5], Counter())
            jobs[job] += sign
            if jobs[job] <= 0:
                del jobs[job]
            if not jobs:
                del self.running[row[5]]

    def _put_lease(self, host_id: int, lease: _Lease | None) -> None:
        old = self.leases.pop(host_id, None)
        if old is not None and old[0] is not None:
            hosts = self.host_of_job.get(old[0])
            if hosts is not None:
                hosts.discard(host_id)
                if not hosts:
                    del self.host_of_job[old[0]]
        if lease is not None:
            self.leases[host_id] = lease
            if lease[0] is not None:
                self.host_of_job.setdefault(lease[0], set()).add(host_id)

    def _put_host_state(self, hid: int) -> None:
        old = self.hosts.get(hid)
        hostname, status, locked, reason, build, worker_id, labels = self.rows[hid]
        worker, paused, offline = self.workers.get(worker_id, ("", False, False))
        lease = self.leases.get(hid)
        self.hosts[hid] = host = planner.HostState(
            id=hid,
            hostname=hostname,
            labels=labels,
            current_build=build,
            ready=status == HostStatus.READY,
            locked=locked,
            lock_reason=reason,
            worker_paused=paused,
            worker_offline=offline,
            leased=lease is not None,
            lease_priority=lease[1] if lease and lease[0] is not None else None,
            worker=worker,
            last_used=self.last_used.get(hid),
            busy_until=self._busy_until(lease),
        )
        self.index.put(old, host)

    def _busy_until(self, lease: _Lease | None) -> datetime | None:
        """When the job the lease holds the host for is expected to end (None: no job)."""
        if lease is None or lease[0] is None:
            return None
        estimate = lease[4]
        seconds = estimate if estimate is not None and estimate > 0 else self.default_s
        return lease[3] + timedelta(seconds=seconds)

    def _expect(self, default_s: float) -> None:
        """Expect a leased job with no estimate to run `default_s` (the policy's default)."""
        if default_s == self.default_s:
            return
        self.default_s = default_s
        for hid, lease in self.leases.items():
            if lease[0] is not None and not (lease[4] or 0) > 0 and hid in self.rows:
                self._put_host_state(hid)

    def _label_set(self, names: Iterable[str]) -> frozenset[str]:
        # Hosts of one class share one frozenset: less memory, and the planner's dict lookups
        # on label sets compare by identity first.
        labels = frozenset(names)
        return self._labels.setdefault(labels, labels)

    def _read_jobs(self, ids: Iterable[int] | None, *, now: datetime) -> None:
        """Read queued test jobs (all, or these): the rest of `ids` left the queue."""
        if ids is None:
            rows = _queued_rows()
        else:
            ids = frozenset(ids)
            rows = _QUEUED_ROWS.all(ids)
            for jid in ids:
                self._drop_job(jid)
        moment, seconds = job_converters()
        moments: dict[object, datetime] = {}  # one datetime per distinct submission time
        label_keys, avoid, JobState = self._label_keys, self.avoid, planner.JobState  # noqa: N806
        ready: list[planner.JobState] = []
        # 100,000 rows on a whole read: the loop body is kept to lookups and one constructor.
        needs = self._role_needs
        for (
            jid,
            name,
            suite_id,
            priority,
            key,
            pinned,
            owner,
            roles,
            together_by,
            submitted,
            estimate,
            not_before,
            build,
        ) in rows:
            labels = label_keys.get(key)
            if labels is None:
                labels = label_keys[key] = frozenset(decode_labels(key))
            at = moments.get(submitted)
            if at is None:
                at = moments[submitted] = moment(submitted)
            # Positional, in JobState's field order: id, name, suite, priority, submitted_at,
            # labels, pinned host, avoided hosts, size (None: the snapshot sets it), owner,
            # roles (a multi-host job's), together_by, build (a standalone job's own).
            job = JobState(
                jid,
                name,
                suite_id,
                priority,
                at,
                labels,
                pinned,
                avoid.get(jid, _NONE),
                None,
                owner,
                needs(roles, labels) if roles else (),
                together_by,
                build,
            )
            if estimate is not None:
                self.estimates[jid] = seconds(estimate)
            if not_before is not None and (until := moment(not_before)) > now:
                self.backoff[jid] = (job, until)
            else:
                ready.append(job)
        if ids is None:  # into an empty state, by id: in bulk
            self.jobs = {job.id: job for job in ready}
            self.suite_jobs = dict(Counter(j.suite_id for j in ready if j.suite_id is not None))
            self._last_job_id = ready[-1].id if ready else 0
        else:
            for job in ready:
                self._put_job(job)

    def _role_needs(self, roles: str | list, labels: frozenset[str]) -> tuple[RoleNeed, ...]:
        text = roles if isinstance(roles, str) else json.dumps(roles)
        needs = self._roles.get((text, labels))
        if needs is None:
            needs = self._roles[text, labels] = role_needs(
                json.loads(text) if isinstance(roles, str) else roles, labels
            )
        return needs

    def _put_job(self, job: planner.JobState) -> None:
        if job.id < self._last_job_id:
            self._jobs_in_order = False  # the whole read gives them by id: only a refresh
        else:
            self._last_job_id = job.id
        self.jobs[job.id] = job
        if job.suite_id is not None:
            _add(self.suite_jobs, job.suite_id, +1)
        if self.groups is not None:
            key = planner.group_key(job)
            self._order_dirty.add(key)
            group = self.groups.get(key)
            if group is None:
                self.groups[key], self._group_ids[key] = [job], [job.id]
            else:
                insort(group, job, key=planner.job_order_key)
                heappush(self._group_ids[key], job.id)
            heappush(self._by_age, (job.submitted_at, job.id))

    def _drop_job(self, jid: int) -> None:
        self.backoff.pop(jid, None)
        self.estimates.pop(jid, None)
        job = self.jobs.pop(jid, None)
        if job is None:
            return
        if job.suite_id is not None:
            _add(self.suite_jobs, job.suite_id, -1)
        if self.groups is not None:
            key = planner.group_key(job)
            self._order_dirty.add(key)
            group = self.groups[key]
            del group[bisect_left(group, planner.job_order_key(job), key=planner.job_order_key)]
            if not group:
                del self.groups[key], self._group_ids[key]
            elif len(self._group_ids[key]) > 2 * len(group) + 16:  # mostly gone ids: compact
                self._group_ids[key] = sorted(map(_ID, group))

    # --- what a tick plans from ---------------------------------------------------------------

    def snapshot(
        self,
        *,
        now: datetime,
        policy: planner.Policy = planner.DEFAULT_POLICY,
        with_sizes: bool = False,
        with_usage: bool = False,
    ) -> Snapshot:
        """The planner's input at `now`: retries whose backoff ended join the queue."""
        self._expect(policy.default_duration_s)
        for jid, (job, not_before) in list(self.backoff.items()):
            if not_before <= now:
                del self.backoff[jid]
                self._put_job(job)
        if not self._jobs_in_order:
            self.jobs = dict(sorted(self.jobs.items()))
            self._jobs_in_order = True
            self._last_job_id = next(reversed(self.jobs), 0)
        if not self._hosts_in_order:
            self.hosts = dict(sorted(self.hosts.items(), key=lambda item: item[1].hostname))
            self._hosts_in_order = True
        jobs = list(self.jobs.values())
        sized = with_sizes or policy.ordering != "fifo"
        suites = suite_states(self.suite_jobs, held=self.held)
        hosts = list(self.hosts.values())
        if sized:
            jobs = self._sized(jobs, now=now, policy=policy, suites=suites, hosts=hosts)
        return Snapshot(
            hosts=hosts,
            jobs=jobs,
            suites=suites,
            policy=policy,
            now=now,
            usage=(
                owner_usage(now=now, half_life_hours=policy.fair_share_half_life_hours)
                if policy.fair_share or with_usage
                else {}
            ),
            workers={
                self.workers[wid][0]: planner.WorkerLoad(
                    limit=limit, running=len(self.running.get(wid, ()))
                )
                for wid, limit in self.limits.items()
            },
            suite_names={suite.id: suite.name for suite in suites},
            leased_count=len(self.leases),
            hosts_by_id=self.hosts,
            host_index=self.index,
            hosts_by_status=self.by_status,
            oldest_submitted=self._oldest() if self.groups is not None and not sized else None,
            jobs_by_id=self.jobs if not sized else {j.id: j for j in jobs},
            groups=self._groups_in_order() if self.groups is not None and not sized else None,
        )

    def _groups_in_order(self) -> dict[planner.JobGroupKey, list[planner.JobState]]:
        """`groups` by their lowest job id, the order planner.group_jobs gives them: the last
        order with only the groups changed since sorted again. After 100 changes that is a few
        hundred of about 3,400 groups (docs/performance.md#the-incremental-tick)."""
        assert self.groups is not None
        groups, dirty = self.groups, self._order_dirty
        if self._order is None:
            order = sorted(((self._lowest_id(key), key) for key in groups), key=_FIRST)
        else:
            order = self._order
            if dirty:
                order = [entry for entry in order if entry[1] not in dirty]
                order += [(self._lowest_id(key), key) for key in dirty if key in groups]
                order.sort(key=_FIRST)  # one long sorted run and a short one: about linear
        self._order = order
        dirty.clear()
        return {key: groups[key] for _lowest, key in order}

    def _oldest(self) -> datetime | None:
        """When the longest-waiting job of `jobs` was submitted (None: no job waits)."""
        by_age, jobs = self._by_age, self.jobs
        while by_age and (
            (job := jobs.get(by_age[0][1])) is None or job.submitted_at != by_age[0][0]
        ):
            heappop(by_age)
        if len(by_age) > 2 * len(jobs) + 1000:  # mostly jobs gone: compact
            self._by_age = by_age = sorted(zip(map(_SUBMITTED, jobs.values()), jobs, strict=True))
        return by_age[0][0] if by_age else None

    def _lowest_id(self, key: planner.JobGroupKey) -> int:
        ids = self._group_ids[key]
        while (job := self.jobs.get(ids[0])) is None or key != planner.group_key(job):
            heappop(ids)
        return ids[0]

    def _sized(
        self,
        jobs: list[planner.JobState],
        *,
        now: datetime,
        policy: planner.Policy,
        suites: Iterable[planner.SuiteState] | None = None,
        hosts: Iterable[planner.HostState] | None = None,
    ) -> list[planner.JobState]:
        """The jobs with their expected run time: the estimate, else their name's median; plus
        their board's median provisioning time when no host of their board carries their build
        (docs/scheduling.md#provisioning-in-the-size-estimate). Without `suites` or `hosts`
        they are read."""
        medians = run_time_medians({j.name for j in jobs if j.id not in self.estimates})
        jobs = [replace(j, size_s=self.estimates.get(j.id, medians.get(j.name))) for j in jobs]
        provisioning = provision_cost.provision_medians(now=now)
        if not provisioning or not jobs:
            return jobs
        if suites is None:
            suite_ids = {j.suite_id for j in jobs if j.suite_id is not None}
            suites = suite_states(suite_ids, held={})
        carried = (
            provision_cost.carried_builds(hosts)
            if hosts is not None
            else provision_cost.read_carried_builds()
        )
        return provision_cost.with_provisioning(
            jobs,
            builds=provision_cost.job_builds(jobs, suites),
            carried=carried,
            medians=provisioning,
            default_s=policy.default_duration_s,
        )


def queued_job_states(
    *,
    ready_at: datetime | None = None,
    policy: planner.Policy = planner.DEFAULT_POLICY,
    with_sizes: bool = False,
) -> list[planner.JobState]:
    """Read every queued test job as a planner.JobState, by id, lean enough for 100,000.

    With `ready_at`, only those a tick at that moment may lease: not a retry still waiting
    out its backoff. Maintenance jobs are never the planner's: the tick's maintenance phase
    leases them first (jobs/scheduling/maintenance.py). Under an ordering by size (or with
    `with_sizes`), each job's expected run time (`size_s`) is read too: its estimated_duration,
    else the median run time of the last 20 finished runs of jobs with its name
    (`run_time_medians`; docs/scheduling.md#policies), with the provisioning time the tick would
    add (docs/scheduling.md#provisioning-in-the-size-estimate).
    """
    state = LabState(with_last_used=False)
    state.avoid = failed_hosts_of_queued_jobs()
    state._read_jobs(None, now=ready_at or _END_OF_TIME)
    jobs = list(state.jobs.values())
    if with_sizes or policy.ordering != "fifo":
        return state._sized(jobs, now=ready_at or timezone.now(), policy=policy)
    return jobs


def free_host_states(*, now: datetime) -> list[planner.HostState]:
    """The hosts a tick at `now` could lease (schedulable, unleased, worker up), as the tick
    reads them: for ordering the queue page under same-build-first without planning."""
    state = LabState(with_last_used=False)
    state._read_workers(now)
    state._read_hosts(None)
    return list(state.index.free.values())


_END_OF_TIME = datetime.max.replace(tzinfo=UTC)  # every backoff has ended by then


def scheduler_snapshot(
    *,
    now: datetime,
    policy: planner.Policy = planner.DEFAULT_POLICY,
    with_sizes: bool = False,
    with_last_used: bool = False,
    with_usage: bool = False,
) -> Snapshot:
    """Read hosts, queued jobs and suites whole, as plain planner data: the reference read.

    Every host, schedulable or not, with the facts the planner's `host_is_schedulable`
    decides on: a pinned job's wait reason names what keeps its host from it. What only a
    policy needs is read only under it: job sizes for `size` and `dynsize`, when each host was
    last used for `spread`, owners' usage for fair share (`with_sizes`, `with_last_used`,
    `with_usage`: read them anyway, for a what-if plan under other settings). Workers with a
    capacity come with the jobs each runs now.
    """
    state = LabState.read(now=now, with_last_used=with_last_used or policy.host_choice == "spread")
    return state.snapshot(now=now, policy=policy, with_sizes=with_sizes, with_usage=with_usage)


def _add(counts: dict[int, int], key: int, n: int) -> None:
    """Add n to a count, dropping it at zero (what suites a snapshot reads comes from keys)."""
    left = counts.get(key, 0) + n
    if left:
        counts[key] = left
    else:
        del counts[key]


_NONE: frozenset[int] = frozenset()
_ID, _SUBMITTED = attrgetter("id"), attrgetter("submitted_at")
_FIRST = itemgetter(0)


# --- the state kept between ticks ---------------------------------------------------------------

_kept: LabState | None = None


def take() -> LabState | None:
    """Take the state the last tick of this process left, if any (a tick owns it meanwhile)."""
    global _kept
    state, _kept = _kept, None
    return state


def keep(state: LabState, *, take: int | None) -> None:
    """Keep `state` as of the change log's take `take` (call once that tick committed)."""
    global _kept
    state.take = take
    _kept = state


def forget() -> None:
    """Drop the kept state: the next tick reads the lab whole."""
    global _kept
    _kept = None


def for_tick(
    state: LabState | None,
    changes: LabChanges,
    *,
    now: datetime,
    policy: planner.Policy,
) -> tuple[LabState, bool]:
    """The lab for a tick that plans: `state` refreshed if it can be, else a whole read.

    Returns the state and whether it was refreshed by row. `changes` must have been taken
    `since` the state's take. Under a size ordering every tick reads whole: sizes follow other
    jobs' run times, which the log does not name.
    """
    spread = policy.host_choice == "spread"
    if (
        state is not None
        and state.take is not None
        and state.take >= changes.take - snapshot.LOG_KEPT_TAKES  # the log has what it missed
        and policy.ordering == "fifo"
        and (state.with_last_used or not spread)
        and state.refreshes < settings.SCHEDULER_WHOLE_READ_EVERY
        and state.refresh(changes.changed, now=now)
    ):
        return state, True
    if state is not None:
        # Let go of the old lab before reading the new one: kept alive through the read, both
        # were in memory at once, and the old one's freed pages stayed with the process (its
        # resident memory a lab larger from the first whole read on).
        state.drop()
    return _read_to_keep(now=now, with_last_used=spread), False


def _read_to_keep(*, now: datetime, with_last_used: bool) -> LabState:
    """Read the lab whole for the tick to keep, out of the garbage collector's way.

    A kept lab at 100,000 queued jobs is about a million long-lived objects with no reference
    cycles among them. Collecting while they are made traversed them again and again (about a
    fifth of a cold tick), and every full collection after would traverse them again (75-90 ms
    pauses, one churn tick in ten). So the collector is off while the lab is read, and the lab
    is then frozen (`gc.freeze`): collections skip it, and reference counting frees it when a
    later whole read replaces it. Garbage in cycles is collected first, so none is frozen.
    """
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        state = LabState.read(now=now, with_last_used=with_last_used)
    finally:
        if enabled:
            gc.enable()
    gc.freeze()
    return state
