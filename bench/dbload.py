"""Create a throwaway PostgreSQL database for a benchmark and write a generated lab into it."""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta

from bench.labgen import Lab
from jobs.scheduling.planner import JobState

BENCH_SERVER = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
# Databases a benchmark may create and drop; anything else is refused, so a typo can never
# drop a database someone else uses.
ALLOWED_PREFIX = "bench_"
# A generated suite's fields that a Suite row takes as they are.
SUITE_FIELDS = ("name", "build", "priority", "min_duts", "max_duts")


def database_url(name: str) -> str:
    return f"{BENCH_SERVER}/{name}"


def _admin_execute(sql: str) -> None:
    import psycopg

    # CREATE/DROP DATABASE cannot run on the database itself: use the server's maintenance
    # database for these two statements only.
    with psycopg.connect(database_url("postgres"), autocommit=True) as conn:
        conn.execute(sql)


def recreate_database(name: str) -> None:
    """Drop (if present) and create the benchmark database `name`."""
    if not name.startswith(ALLOWED_PREFIX) or not name.replace("_", "").isalnum():
        raise SystemExit(f"refusing to recreate {name!r}: benchmark databases start with bench_")
    _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    _admin_execute(f'CREATE DATABASE "{name}"')


def drop_database(name: str) -> None:
    if name.startswith(ALLOWED_PREFIX):
        _admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def setup_django(name: str, *, fresh: bool = True) -> None:
    """Point Django at the benchmark database (created anew if fresh) and migrate it."""
    if fresh:
        recreate_database(name)
    os.environ["DATABASE_URL"] = database_url(name)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "schedsite.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-secret")
    import django

    django.setup()
    if fresh:
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)


def setup_simulation(name: str) -> None:
    """A fresh throwaway database for a time-accelerated run of the real services and tick.

    Waiting for each of the simulated day's commits to reach the disk would measure the disk,
    not the loop; one log line per tick would bury the report.
    """
    setup_django(name, fresh=True)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SET synchronous_commit TO off")
    logging.getLogger("schedsite").setLevel(logging.WARNING)
    logging.getLogger("django-q").setLevel(logging.WARNING)


@contextmanager
def timed(what: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    print(f"  {what}: {time.perf_counter() - start:.1f} s", file=sys.stderr)


def load(
    lab: Lab, *, now: datetime, batch: int = 5000, analyze: bool = True
) -> dict[str, dict[int, int]]:
    """Write the lab's workers, hosts, labels, suites and queued jobs; return id maps.

    Bulk inserts, not services: a benchmark needs 100,000 jobs in seconds, and the rows are the
    same ones the services would write. Returns {"host": lab id -> pk, "job": ..., "suite": ...}.
    """
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from hosts.choices import HostStatus
    from hosts.models import Host, Label, Worker
    from jobs.models import Job, Suite, encode_labels

    if lab.shape.busy:
        raise ValueError("a database lab starts with no leases: generate it with busy=0")
    user, _ = get_user_model().objects.get_or_create(username="alice")
    with transaction.atomic():
        workers = Worker.objects.bulk_create(
            [
                Worker(
                    name=w.name,
                    paused=w.paused,
                    paused_reason="maintenance" if w.paused else "",
                    paused_at=now if w.paused else None,
                    # Online workers heartbeat; offline ones were last seen an hour ago.
                    last_seen=now - timedelta(hours=1) if w.offline else now,
                )
                for w in lab.workers
            ],
            batch_size=batch,
        )
        names = sorted({label for h in lab.hosts for label in h.labels})
        labels = {
            lbl.name: lbl.pk
            for lbl in Label.objects.bulk_create([Label(name=n) for n in names], batch_size=batch)
        }
        hosts = Host.objects.bulk_create(
            [
                Host(
                    hostname=h.hostname,
                    worker_id=workers[lab.worker_of[h.id]].pk,
                    status=HostStatus.READY if h.ready else HostStatus.NEEDS_REPAIR,
                    locked=h.locked,
                    lock_reason=h.lock_reason,
                    locked_at=now if h.locked else None,
                    current_build=h.current_build,
                    created_at=now,
                )
                for h in lab.hosts
            ],
            batch_size=batch,
        )
        host_pk = {h.id: row.pk for h, row in zip(lab.hosts, hosts, strict=True)}
        through = Host.labels.through
        through.objects.bulk_create(
            [
                through(host_id=host_pk[h.id], label_id=labels[name])
                for h in lab.hosts
                for name in h.labels
            ],
            batch_size=batch,
        )
        suites = Suite.objects.bulk_create(
            [
                Suite(
                    **{name: getattr(s, name) for name in SUITE_FIELDS},
                    owner=user,
                    created_at=_aware(s.created_at),
                )
                for s in lab.suites
            ],
            batch_size=batch,
        )
        suite_pk = {s.id: row.pk for s, row in zip(lab.suites, suites, strict=True)}
        jobs = Job.objects.bulk_create(
            [
                Job(
                    suite_id=suite_pk[j.suite_id] if j.suite_id is not None else None,
                    name=j.name,
                    priority=j.priority,
                    label_key=encode_labels(j.labels),
                    host_id=host_pk[j.pinned_host_id] if j.pinned_host_id is not None else None,
                    owner=user,
                    created_at=_aware(j.submitted_at),
                    submitted_at=_aware(j.submitted_at),
                    roles=job_roles(j),
                )
                for j in lab.jobs
            ],
            batch_size=batch,
        )
        job_pk = {j.id: row.pk for j, row in zip(lab.jobs, jobs, strict=True)}
    if analyze:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # fresh statistics, as autovacuum would give a live lab
    return {"host": host_pk, "job": job_pk, "suite": suite_pk}


def job_roles(job: JobState) -> list[dict[str, object]]:
    """A multi-host job's `roles` as submission stores them: each role's own labels only."""
    return [
        {
            "name": role.name,
            "labels": sorted(role.labels - job.labels),
            "count": role.count,
            "max": role.max,
        }
        for role in job.roles
    ]


def _aware(dt: datetime) -> datetime:
    from datetime import UTC

    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


def run_children(
    module: str,
    flag: str,
    variants: list[str],
    seeds: list[int],
    *,
    db: str,
    parallel: int,
    argv: list[str],
) -> list[dict]:
    """Each variant x seed of a simulation (`python -m <module>`) in a process of its own,
    `parallel` at once, each on a database of its own slot (`<db>_<slot>`, created and dropped
    by it); their runs, from each child's `--json` line. `flag` names the variant's option."""
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor
    from queue import SimpleQueue

    base = [a for a in argv if a != "--json"]
    slots: SimpleQueue[int] = SimpleQueue()
    for slot in range(parallel):
        slots.put(slot)

    def child(seed: int, variant: str) -> list[dict]:
        slot = slots.get()
        try:
            cmd = [sys.executable, "-m", module, *base, "--parallel", "1"]
            cmd += ["--db", f"{db}_{slot}", "--seeds", str(seed), flag, variant, "--json"]
            done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=False)
        finally:
            slots.put(slot)
        if done.returncode:
            raise SystemExit(f"{variant} seed {seed} failed ({done.returncode})")
        print(f"  {variant} seed {seed}: done", file=sys.stderr)
        return json.loads(done.stdout.strip().splitlines()[-1])["runs"]

    tasks = [(seed, variant) for seed in seeds for variant in variants]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        return [run for runs in pool.map(lambda t: child(*t), tasks) for run in runs]
