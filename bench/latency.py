"""Latency benchmark: submit -> leased on an idle lab with a real django-q2 cluster running."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench import dbload
from bench.cli import print_result, stop_process_group
from bench.labgen import LabShape, generate

ROOT = Path(__file__).resolve().parents[1]
P50_TARGET_MS, P99_TARGET_MS = 1000.0, 2000.0
POLL_S = 0.005  # how often the benchmark looks at the job: the resolution of the figures


def percentile(values: list[float], q: float) -> float:
    """Return the q-th percentile (nearest rank) of the values."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))
    return ordered[int(rank) - 1]


def _start_cluster(env: dict[str, str], log_path: Path) -> subprocess.Popen:
    log = log_path.open("w")
    return subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped as one, and only it
    )


def _heartbeat() -> None:
    from django.utils import timezone

    from hosts.models import Worker

    # The runners' heartbeats: keep every worker of the idle lab online during the run.
    Worker.objects.filter(last_seen__isnull=False).update(last_seen=timezone.now())


def _submit_and_wait(labels: list[str], timeout_s: float) -> tuple[float, int]:
    """Submit one job, poll until it is leased; return (milliseconds, job id)."""
    from jobs import services
    from jobs.choices import JobStatus
    from jobs.models import Job

    start = time.perf_counter()
    job = services.job_submit(
        owner="alice", spec=services.JobSpec(name="latency-probe", labels=labels)
    )
    while True:
        status = Job.objects.filter(pk=job.pk).values_list("status", flat=True).first()
        if status == JobStatus.LEASED:
            return (time.perf_counter() - start) * 1000, job.pk
        if time.perf_counter() - start > timeout_s:
            raise SystemExit(f"job {job.pk} not leased after {timeout_s:.0f} s (status {status})")
        time.sleep(POLL_S)


def _finish(job_id: int) -> None:
    """Run the job to completion as its runner would, so the lab stays idle."""
    from jobs import services
    from jobs.models import Job

    job = Job.objects.get(pk=job_id)
    services.job_start(job=job, by="runner")
    services.job_complete(job=job, result="passed", by="runner")


def main() -> None:  # noqa: PLR0915 — a script: arguments, one run, its report
    """Measure submit -> leased over many submissions with `manage.py qcluster` running."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--hosts", type=int, default=1000)
    parser.add_argument("--label-sets", type=int, default=40)
    parser.add_argument("--submissions", type=int, default=120)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--broker", choices=("orm", "redis"), default="orm")
    # A database of its own, so that no other cluster on this Redis takes the benchmark's ticks.
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--db", default="bench_latency", help="database to (re)create: bench_*")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()

    if args.broker == "redis":
        # Settings pick the broker at import; the cluster and this process must agree.
        os.environ["REDIS_URL"] = args.redis_url
    else:
        os.environ.pop("REDIS_URL", None)
    lab = generate(LabShape(args.hosts, 0, 0, args.label_sets, seed=args.seed))
    print(f"latency benchmark: {lab.describe()}, broker {args.broker}", file=sys.stderr)
    dbload.setup_django(args.db)
    from django.db import connections
    from django.utils import timezone

    dbload.load(lab, now=timezone.now())
    # Each probe asks for the board and pool of a host that can take work right now.
    free = [h for h in lab.hosts if h.schedulable]
    rng = random.Random(args.seed)
    probes = []
    for _ in range(args.submissions):
        host = rng.choice(free)
        probes.append(sorted(lbl for lbl in host.labels if lbl.split(":")[0] in ("board", "pool")))

    env = {**os.environ, "DATABASE_URL": dbload.database_url(args.db)}
    env.setdefault("SECRET_KEY", "bench-only-not-secret")
    log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"{args.db}-qcluster.log"
    cluster = _start_cluster(env, log_path)
    latencies: list[float] = []
    try:
        _heartbeat()
        # Warm-up: the first task waits for the cluster to start; not a measurement.
        _, warm = _submit_and_wait(probes[0], timeout_s=60)
        _finish(warm)
        last_beat = time.monotonic()
        for labels in probes:
            if time.monotonic() - last_beat > 20:
                _heartbeat()
                last_beat = time.monotonic()
            # Idle between submissions, as testers do, so each probe meets an idle cluster.
            time.sleep(rng.uniform(0.05, 0.3))
            ms, job_id = _submit_and_wait(labels, timeout_s=30)
            latencies.append(ms)
            _finish(job_id)
    finally:
        stop_process_group(cluster)
        connections.close_all()
        dbload.drop_database(args.db)

    result = {
        "hosts": args.hosts,
        "broker": args.broker,
        "submissions": len(latencies),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "mean_ms": round(statistics.fmean(latencies), 1),
        "max_ms": round(max(latencies), 1),
        "p50_target_ms": P50_TARGET_MS,
        "p99_target_ms": P99_TARGET_MS,
    }
    print_result(result, as_json=args.json, width=14)


if __name__ == "__main__":
    main()
