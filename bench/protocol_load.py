"""Runner-protocol load: the calls of a big lab's runners against gunicorn, the scheduler ticking.

Seeds a throwaway database with N hosts on W workers, every host held by a leased job, each
worker with its own runner account, and Q jobs queued behind them; starts gunicorn (the
project's gunicorn.conf.py, on 127.0.0.1) and `manage.py qcluster`, and drives the server for D
seconds the way the lab's runners would: each worker sends one bulk heartbeat
(`POST /api/workers/{name}/heartbeat/ {"leases": [...]}`) every interval and lists its leases
(`GET /api/workers/{name}/leases/`) as the reference runner polls, and jobs start and complete
at the rate jobs of the given length give (open loop: a slow server does not slow the offered
load down). Each `complete` asks for a tick, which the cluster runs. Prints p50/p95/p99 per
endpoint, the throughput achieved, the CPU each part took, and the ticks run.

The client is plain asyncio: gunicorn's sync workers close every connection after one answer,
so a pooling HTTP client gains nothing here, and on a 2-core machine the client's own CPU is
taken from the server it measures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bench import dbload
from bench.cli import print_result, stop_process_group
from bench.latency import _start_cluster, percentile
from bench.pages import free_port, start_server

P99_TARGET_MS = 250.0
ENDPOINTS = ("heartbeat", "leases", "start", "complete")


@dataclass
class Lease:
    """One leased job as its runner knows it."""

    id: int
    job: int
    worker: str


@dataclass
class Lab:
    """What the load needs of the seeded lab: each worker's token and leases."""

    tokens: dict[str, str]  # worker name -> its runner's token
    held: dict[str, set[int]]  # worker name -> ids of the leases its runner holds
    unstarted: deque[Lease]  # leases whose jobs are still to start, round-robin over workers


@dataclass
class Stats:
    """Latencies (ms) and failures per endpoint."""

    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    not_modified: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # 304s
    first_failure: dict[str, str] = field(default_factory=dict)


# --- the lab --------------------------------------------------------------------------------


def seed(hosts: int, workers: int, queued: int = 0) -> Lab:
    """Write the workers, their runner accounts and tokens, hosts, one leased job per host, and
    `queued` jobs waiting for a host (the ticks lease them the hosts the completes free)."""
    from datetime import timedelta

    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.db import connection, transaction
    from django.utils import timezone
    from rest_framework.authtoken.models import Token

    from hosts.models import Host, Worker
    from jobs.models import Job
    from jobs.models import Lease as LeaseRow
    from schedsite.roles import RUNNER_GROUP

    now = timezone.now()
    expires = now + timedelta(seconds=settings.LEASE_TTL)
    with transaction.atomic():
        runners = User.objects.bulk_create(
            [User(username=f"runner-{i}", password="!") for i in range(workers)]
        )
        group = Group.objects.create(name=RUNNER_GROUP)
        group.user_set.add(*runners)
        tokens = Token.objects.bulk_create(
            [Token(key=Token.generate_key(), user=user) for user in runners]
        )
        rows = Worker.objects.bulk_create(
            [Worker(name=f"w{i}", runner=runners[i], last_seen=now) for i in range(workers)]
        )
        host_rows = Host.objects.bulk_create(
            [
                Host(hostname=f"h{i}.lab", worker=rows[i % workers], created_at=now)
                for i in range(hosts)
            ],
            batch_size=5000,
        )
        jobs = Job.objects.bulk_create(
            [Job(name=f"load-{i}", status="leased", created_at=now) for i in range(hosts)],
            batch_size=5000,
        )
        leases = LeaseRow.objects.bulk_create(
            [
                LeaseRow(host=host, job=job, acquired_at=now, expires_at=expires)
                for host, job in zip(host_rows, jobs, strict=True)
            ],
            batch_size=5000,
        )
        Job.objects.bulk_create(
            [Job(name=f"queued-{i}", created_at=now, submitted_at=now) for i in range(queued)],
            batch_size=5000,
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    held: dict[str, set[int]] = defaultdict(set)
    unstarted: deque[Lease] = deque()
    for i, (lease, job) in enumerate(zip(leases, jobs, strict=True)):
        worker = f"w{i % workers}"
        held[worker].add(lease.pk)
        unstarted.append(Lease(lease.pk, job.pk, worker))
    names = {f"w{i}": token.key for i, token in enumerate(tokens)}
    return Lab(tokens=names, held=dict(held), unstarted=unstarted)


def cost_per_call(lab: Lab, n: int) -> dict[str, dict]:
    """Each endpoint called n times in this process, one at a time: CPU and wall ms per call.

    CPU time per call is what bounds a web process's throughput, and it varies less than
    latency on a machine shared with other work.
    """
    from django.test import Client

    client = Client()
    workers = list(lab.tokens)
    leases = [lab.unstarted.popleft() for _ in range(n)]
    calls = {
        "heartbeat": [
            (f"/api/workers/{w}/heartbeat/", w, {"leases": sorted(lab.held[w])})
            for w in (workers[i % len(workers)] for i in range(n))
        ],
        "start": [(f"/api/jobs/{x.job}/start/", x.worker, {"lease": x.id}) for x in leases],
        "complete": [
            (f"/api/jobs/{x.job}/complete/", x.worker, {"lease": x.id, "result": "passed"})
            for x in leases
        ],
    }
    calls["leases"] = [
        (f"/api/workers/{w}/leases/", w, None)
        for w in (workers[i % len(workers)] for i in range(n))
    ]
    # Then the runner's poll when nothing changed: its list's ETag in If-None-Match (a server
    # without ETags answers 200, and the figure is left out).
    calls["leases_304"] = [
        (f"/api/workers/{w}/leases/", w, None)
        for w in (workers[i % len(workers)] for i in range(n))
    ]
    out = {}
    for name, todo in calls.items():
        times = []
        expected = 304 if name == "leases_304" else 200
        if name == "leases_304":  # each worker's current ETag, read untimed
            etags = {}
            for _path, w, _body in todo:
                if w not in etags:
                    answer = client.get(f"/api/workers/{w}/leases/", headers=_auth(lab, w))
                    etags[w] = answer.get("ETag")
            if not all(etags.values()):
                continue
            todo = [(path, w, {"If-None-Match": etags[w]}) for path, w, _body in todo]
        cpu = time.process_time()
        for path, worker, body in todo:
            start = time.perf_counter()
            headers = _auth(lab, worker)
            if name == "leases_304":
                response = client.get(path, headers={**headers, **body})
            elif body is None:
                response = client.get(path, headers=headers)
            else:
                response = client.post(
                    path, json.dumps(body), content_type="application/json", headers=headers
                )
            times.append((time.perf_counter() - start) * 1000)
            if response.status_code != expected:
                raise SystemExit(f"{path}: {response.status_code} {response.content[:300]!r}")
        out[name] = {
            "calls": n,
            "cpu_ms": round((time.process_time() - cpu) * 1000 / n, 2),
            "p50_ms": round(percentile(times, 50), 2),
        }
    for lease in leases:
        lab.held[lease.worker].discard(lease.id)
    return out


def _auth(lab: Lab, worker: str) -> dict[str, str]:
    return {"authorization": f"Token {lab.tokens[worker]}"}


# --- the client -----------------------------------------------------------------------------


async def post(
    port: int, path: str, token: str, body: dict | None, etag: str = ""
) -> tuple[int, bytes]:
    """One POST (a GET when body is None, conditional with an etag) on a fresh loopback
    connection; (status, the whole answer: head and body)."""
    payload = b"" if body is None else json.dumps(body).encode()
    verb = "GET" if body is None else "POST"
    kind = "" if body is None else "Content-Type: application/json\r\n"
    kind += f"If-None-Match: {etag}\r\n" if etag else ""
    head = (
        f"{verb} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Token {token}\r\n"
        f"{kind}Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head + payload)
        await writer.drain()
        answer = await reader.read()
    finally:
        writer.close()
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, answer


def etag_of(answer: bytes) -> str:
    """The ETag header of an HTTP answer, or ""."""
    head = answer.partition(b"\r\n\r\n")[0].decode("latin-1")
    for line in head.split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "etag":
            return value.strip()
    return ""


async def timed(
    stats: Stats,
    name: str,
    port: int,
    path: str,
    token: str,
    body: dict | None,
    etag: str = "",
) -> bytes | None:
    """One call, timed; the answer when it succeeded (a 200, or a 304 to a conditional GET)."""
    start = time.perf_counter()
    try:
        status, answer = await asyncio.wait_for(post(port, path, token, body, etag), timeout=30)
    except (OSError, TimeoutError) as exc:
        status, answer = 0, str(exc).encode()
    stats.times[name].append((time.perf_counter() - start) * 1000)
    if status == 304 and etag:  # noqa: PLR2004
        stats.not_modified[name] += 1
        return answer
    if status != 200:  # noqa: PLR2004
        stats.failures[name] += 1
        text = answer.partition(b"\r\n\r\n")[2] if answer.startswith(b"HTTP/") else answer
        stats.first_failure.setdefault(name, f"{status}: {text[:200].decode(errors='replace')}")
        return None
    return answer


async def beat_worker(
    lab: Lab, stats: Stats, port: int, worker: str, interval: float, until: float
) -> None:
    """One worker's runner: a bulk heartbeat of every lease it holds, every interval."""
    await asyncio.sleep(random.uniform(0, interval))  # runners do not start in step
    while time.monotonic() < until:
        body = {"leases": sorted(lab.held[worker])}
        path = f"/api/workers/{worker}/heartbeat/"
        await timed(stats, "heartbeat", port, path, lab.tokens[worker], body)
        await asyncio.sleep(interval)


async def list_worker(
    lab: Lab, stats: Stats, port: int, worker: str, interval: float, until: float
) -> None:
    """One worker's runner looking for new leases: `GET` of its lease list every interval,
    with the ETag of the last list it got in If-None-Match, as the reference runner sends."""
    await asyncio.sleep(random.uniform(0, interval))
    etag = ""
    while time.monotonic() < until:
        path = f"/api/workers/{worker}/leases/"
        answer = await timed(stats, "leases", port, path, lab.tokens[worker], None, etag)
        if answer is not None:
            etag = etag_of(answer) or ""
        await asyncio.sleep(interval)


async def pair(lab: Lab, stats: Stats, port: int, lease: Lease, run_s: float) -> None:
    """Start a leased job, let it "run", complete it: its lease is then no longer held."""
    token, body = lab.tokens[lease.worker], {"lease": lease.id}
    if not await timed(stats, "start", port, f"/api/jobs/{lease.job}/start/", token, body):
        return
    await asyncio.sleep(run_s)
    done = {**body, "result": "passed", "message": "ok"}
    await timed(stats, "complete", port, f"/api/jobs/{lease.job}/complete/", token, done)
    lab.held[lease.worker].discard(lease.id)


async def warm_up(lab: Lab, port: int, web_workers: int) -> None:
    """Untimed heartbeats until every gunicorn worker has loaded the app and connected."""
    worker, token = next(iter(lab.tokens.items()))
    for _ in range(3):
        calls = [
            post(port, f"/api/workers/{worker}/heartbeat/", token, {})
            for _ in range(2 * web_workers)
        ]
        await asyncio.gather(*calls)


async def drive(
    lab: Lab, port: int, args: argparse.Namespace, cpu: CpuClock
) -> tuple[Stats, float]:
    """Offer the load for args.seconds; return the stats and the seconds it took."""
    await warm_up(lab, port, args.web_workers)
    cpu.start()
    stats = Stats()
    started = time.monotonic()
    until = started + args.seconds
    beats = [
        asyncio.create_task(beat_worker(lab, stats, port, w, args.beat_interval, until))
        for w in lab.tokens
    ]
    if args.list_interval > 0:
        beats += [
            asyncio.create_task(list_worker(lab, stats, port, w, args.list_interval, until))
            for w in lab.tokens
        ]
    pairs: set[asyncio.Task] = set()
    launched = 0
    while (now := time.monotonic()) < until and lab.unstarted:
        due = int((now - started) * pairs_per_second(args))
        while launched < due and lab.unstarted:
            task = asyncio.create_task(
                pair(lab, stats, port, lab.unstarted.popleft(), random.uniform(0, args.run_max))
            )
            pairs.add(task)
            task.add_done_callback(pairs.discard)
            launched += 1
        await asyncio.sleep(0.005)
    await asyncio.gather(*beats, *pairs)
    cpu.stop()
    return stats, time.monotonic() - started


# --- where the CPU went ---------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_times(pid: int) -> tuple[int, float]:
    """(process group, seconds of CPU: the process's own and its reaped children's) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return int(fields[2]), (utime + stime + cutime + cstime) / TICK


def group_cpu(group: int) -> float:
    """CPU seconds so far of a process group started in its own session (gunicorn's master and
    workers, or qcluster's processes), with the members it reaped: a recycled worker's time is
    in its parent's children's."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                member_of, seconds = _proc_times(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile, or not ours to read
            if member_of == group:
                total += seconds
    return total


def database_cpu(db: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to the database `db`, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if title.startswith("postgres: ") and f" {db} " in title:
                found[int(entry.name)] = _proc_times(int(entry.name))[1]
        except (OSError, ValueError, IndexError):
            continue
    return found


def machine_busy() -> float:
    """CPU seconds every core of the machine spent not idle (any process: other work too)."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle and iowait
    return (sum(values[:8]) - idle) / TICK


Mark = tuple[float, float, float, float, dict[int, float]]


@dataclass
class CpuClock:
    """CPU seconds spent during the load by the server, the scheduler, this client, and the
    machine."""

    server_pid: int | None = None
    cluster_pid: int | None = None
    db: str = ""
    marks: dict[str, Mark] = field(default_factory=dict)
    window: list[datetime] = field(default_factory=list)  # when the load started and stopped

    def _now(self) -> Mark:
        if not Path("/proc/stat").exists():
            return 0.0, 0.0, time.process_time(), 0.0, {}
        server = group_cpu(self.server_pid) if self.server_pid else 0.0
        cluster = group_cpu(self.cluster_pid) if self.cluster_pid else 0.0
        return server, cluster, time.process_time(), machine_busy(), database_cpu(self.db)

    def start(self) -> None:
        self.marks["start"] = self._now()
        self.window = [datetime.now(UTC)]

    def stop(self) -> None:
        self.marks["stop"] = self._now()
        self.window.append(datetime.now(UTC))

    def seconds(self) -> dict[str, float]:
        if "stop" not in self.marks:
            return {}
        (s0, q0, c0, b0, d0), (s1, q1, c1, b1, d1) = self.marks["start"], self.marks["stop"]
        server, cluster, client, busy = s1 - s0, q1 - q0, c1 - c0, b1 - b0
        # Backends that lived through the load (the web workers keep their connections).
        database = sum(seconds - d0.get(pid, 0.0) for pid, seconds in d1.items())
        return {
            "server": round(server, 1),  # gunicorn: master and workers
            "scheduler": round(cluster, 1),  # qcluster: its ticks, broker polls, the rest
            "client": round(client, 1),  # this load generator, on the same cores
            "database": round(database, 1),  # the benchmark database's PostgreSQL backends
            # Redis, the rest of PostgreSQL, and whatever else ran on the machine meanwhile
            "rest_of_machine": round(max(0.0, busy - server - cluster - client - database), 1),
        }


# --- the scheduler --------------------------------------------------------------------------


def start_cluster(db: str, log: Path) -> subprocess.Popen:
    """`manage.py qcluster` on the benchmark database, as the Procfile runs it; waits until its
    first tick (the whole lab read cold) is done, so the load meets a warm scheduler."""
    from jobs.models import SchedulerTick

    env = {**os.environ, "DATABASE_URL": dbload.database_url(db), "DEBUG": "0"}
    proc = _start_cluster(env, log)
    deadline = time.monotonic() + 120
    while not SchedulerTick.objects.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc)
            raise SystemExit(f"qcluster made no tick within 120 s: see {log}")
        time.sleep(0.5)
    return proc


def ticks_during(window: list[datetime], cpu_s: dict[str, float], cpus: int) -> dict:
    """The ticks that started while the load ran: how many a second, and what they took."""
    from django.db.models import Count, Sum

    from jobs.models import SchedulerTick

    if len(window) < 2:  # noqa: PLR2004 — start and stop
        return {}
    seconds = (window[1] - window[0]).total_seconds()
    ticks = SchedulerTick.objects.filter(started_at__range=window).aggregate(
        n=Count("id"), ms=Sum("duration_ms"), leased=Sum("leases_made")
    )
    n = ticks["n"] or 0
    return {
        "ticks": n,
        "ticks_per_second": round(n / seconds, 2),
        "tick_ms_mean": round((ticks["ms"] or 0) / max(1, n), 1),
        "leases_made": ticks["leased"] or 0,
        # The scheduler process's CPU over the window, as a share of the machine's cores.
        "cpu_share": round(cpu_s.get("scheduler", 0) / (seconds * cpus), 3),
    }


# --- the run --------------------------------------------------------------------------------


def summary(stats: Stats, elapsed: float) -> dict[str, dict]:
    out = {}
    for name in ENDPOINTS:
        times = stats.times.get(name, [])
        if not times:
            continue
        out[name] = {
            "requests": len(times),
            "answered_rps": round((len(times) - stats.failures.get(name, 0)) / elapsed, 1),
            "failed": stats.failures.get(name, 0),  # timed out after 30 s, or not a 200
            "not_modified": stats.not_modified.get(name, 0),  # 304s to a conditional GET
            **{f"p{q}_ms": round(percentile(times, q), 1) for q in (50, 95, 99)},
            "max_ms": round(max(times), 1),
        }
    return out


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--workers", type=int, default=200, help="lab workers (runners)")
    parser.add_argument("--seconds", type=float, default=60, help="how long to offer the load")
    parser.add_argument("--beat-interval", type=float, default=10, help="seconds, per worker")
    parser.add_argument(
        "--list-interval",
        type=float,
        default=2.0,
        help="seconds between a runner's lease lists (the reference runner's --poll; 0: none)",
    )
    parser.add_argument(
        "--job-seconds",
        type=float,
        default=300,
        help="seconds a job runs in the lab modelled: hosts / this = start+complete pairs/s",
    )
    parser.add_argument(
        "--pairs-per-second", type=float, default=None, help="start+complete (overrides the above)"
    )
    parser.add_argument("--queued", type=int, default=10000, help="jobs queued behind the leases")
    parser.add_argument(
        "--no-cluster", action="store_true", help="no qcluster: nothing ticks during the load"
    )
    parser.add_argument(
        "--in-process-only",
        action="store_true",
        help="time the calls in-process and stop: no server, no load (a quick A/B of CPU/call)",
    )
    parser.add_argument("--run-max", type=float, default=5, help="longest a job 'runs', s")
    parser.add_argument(
        "--web-workers", type=int, default=None, help="gunicorn workers (default: its config's)"
    )
    parser.add_argument(
        "--in-process", type=int, default=200, help="calls per endpoint timed in-process first"
    )
    parser.add_argument("--redis-url", default="", help="REDIS_URL for the server (cache)")
    parser.add_argument(
        "--threads", type=int, default=None, help="GUNICORN_THREADS (gthread workers when > 1)"
    )
    parser.add_argument("--db", default="bench_protocol", help="database to (re)create: bench_*")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    if args.hosts < args.seconds * pairs_per_second(args) + args.in_process:
        parser.error("--hosts must cover the jobs to start: seconds × pairs/s + in-process")
    return args


def main() -> None:
    """Seed a lab, start gunicorn and qcluster, drive the runner protocol, print the figures."""
    args = parse_args()

    # The cache (throttle counts) and the broker, for the calls in-process and the server alike.
    os.environ.pop("REDIS_URL", None)
    if args.redis_url:
        os.environ["REDIS_URL"] = args.redis_url
    dbload.setup_django(args.db)
    from django.db import connections

    with dbload.timed(f"seed {args.hosts} leased hosts on {args.workers} workers"):
        lab = seed(args.hosts, args.workers, args.queued)
    in_process = cost_per_call(lab, args.in_process) if args.in_process else {}
    connections.close_all()
    if args.in_process_only:
        dbload.drop_database(args.db)
        load = round(os.getloadavg()[0], 1)
        result = {"hosts": args.hosts, "load": load, "in_process": in_process}
        print_result(result, as_json=True, width=14)
        return
    args.web_workers = web_workers = args.web_workers or _configured_workers()
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"{args.db}-gunicorn.log"
    if args.threads:
        os.environ["GUNICORN_THREADS"] = str(args.threads)  # start_server passes the environment
    cluster = None
    if not args.no_cluster:
        cluster = start_cluster(args.db, log.with_name(f"{args.db}-qcluster.log"))
    load_before = os.getloadavg()[0]
    server = start_server(args.db, port, web_workers, log)
    cpu = CpuClock(server.pid, cluster.pid if cluster else None, args.db)
    try:
        stats, elapsed = asyncio.run(drive(lab, port, args, cpu))
        ticks = ticks_during(cpu.window, cpu.seconds(), os.cpu_count() or 1)
    finally:
        stop_process_group(server)
        if cluster is not None:
            stop_process_group(cluster)
        connections.close_all()
        dbload.drop_database(args.db)
    result = {
        "hosts": args.hosts,
        "workers": args.workers,
        "web_workers": web_workers,
        "threads": args.threads or int(os.environ.get("GUNICORN_THREADS", "1")),
        "cpus": os.cpu_count(),
        "cache": "redis" if args.redis_url else "database",
        "offered_rps": round(offered_rps(args), 1),
        "answered_rps": round(_answered(stats) / elapsed, 1),
        "load_before": round(load_before, 1),
        "load_after": round(os.getloadavg()[0], 1),
        # CPU seconds during the load, and per answered request: the client shares the cores.
        "cpu_s": cpu.seconds(),
        "server_cpu_ms_per_request": round(
            1000 * cpu.seconds().get("server", 0) / max(1, _answered(stats)), 2
        ),
        "p99_target_ms": P99_TARGET_MS,
        "scheduler": ticks,  # the qcluster's ticks during the load
        "in_process": in_process,  # CPU and wall ms per call, one at a time
        "endpoints": summary(stats, elapsed),
        "first_failures": stats.first_failure,
    }
    print_result(result, as_json=args.json, width=14)


def pairs_per_second(args: argparse.Namespace) -> float:
    """Jobs started (and completed) a second: every host busy with jobs of --job-seconds."""
    if args.pairs_per_second is not None:
        return args.pairs_per_second
    return args.hosts / args.job_seconds


def offered_rps(args: argparse.Namespace) -> float:
    lists = args.workers / args.list_interval if args.list_interval > 0 else 0
    return args.workers / args.beat_interval + lists + 2 * pairs_per_second(args)


def _answered(stats: Stats) -> int:
    """Requests answered 200 (a timed-out or refused one is offered load, not throughput)."""
    return sum(len(times) - stats.failures.get(name, 0) for name, times in stats.times.items())


def _configured_workers() -> int:
    """The process count gunicorn.conf.py gives on this machine."""
    import multiprocessing

    return int(os.environ.get("WEB_CONCURRENCY", min(2 * multiprocessing.cpu_count() + 1, 8)))


if __name__ == "__main__":
    main()
