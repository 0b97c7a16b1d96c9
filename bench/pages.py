"""API and page timings at 10,000 hosts: p50/p95 in-process and over HTTP, and throughput."""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from bench import dbload
from bench.cli import stop_process_group
from bench.labgen import Lab, LabShape, generate
from bench.latency import percentile
from bench.tick import _make_multi_host as make_multi_host

ROOT = Path(__file__).resolve().parents[1]
TARGET_MS = 100.0  # docs/performance.md#targets: host list and queue pages p50 at 10,000 hosts
# The endpoints that have a target; the others are reported without one.
TARGETED = {"api_hosts", "api_queue", "ui_hosts", "ui_queue"}


def endpoints(label: str, job_id: int) -> dict[str, str]:
    """Name -> path of every GET that is timed; `label` is used by the filtered host list,
    `job_id` (a queued job: `last_queued_job`) by the job page."""
    return {
        "ui_job": f"/jobs/{job_id}/",
        "api_hosts": "/api/hosts/",
        "api_hosts_filtered": f"/api/hosts/?label={label}&status=ready",
        "api_queue": "/api/queue/",
        "api_jobs": "/api/jobs/",
        "api_jobs_queued": "/api/jobs/?status=queued",
        "api_workers": "/api/workers/",
        "ui_dashboard": "/",
        "ui_hosts": "/hosts/",
        "ui_queue": "/queue/",
    }


# What is timed again once the queue has grown to --big-jobs: the pages whose cost follows it,
# and the lists whose targets are set at 100,000 jobs (docs/performance.md#targets).
QUEUE_BOUND = (
    "api_queue",
    "api_jobs",
    "api_jobs_queued",
    "api_hosts",
    "ui_dashboard",
    "ui_hosts",
    "ui_queue",
    "ui_job",
)


def last_queued_job() -> int:
    """The queued job the main phase considers last (lowest priority, latest submitted): the
    job page's costliest place in the queue to count."""
    from jobs.models import Job

    last = Job.objects.queued().order_by("priority", "-submitted_at", "-id").first()
    if last is None:
        raise SystemExit("no job is queued: the job page has nothing to show")
    return last.pk


# --- the lab --------------------------------------------------------------------------------


def _heartbeat_workers() -> None:
    """Mark online workers seen now, as their runners would; offline ones stay offline."""
    from django.utils import timezone

    from hosts.models import Worker

    cutoff = timezone.now() - timezone.timedelta(minutes=30)
    Worker.objects.filter(last_seen__gte=cutoff).update(last_seen=timezone.now())


def _queued() -> int:
    from jobs.models import Job

    return Job.objects.queued().count()


def _clone_queued(n: int) -> None:
    """Insert n more queued jobs, copies of the queued ones (same suites, labels, priorities)."""
    from django.db import connection

    from jobs.models import Job

    table = Job._meta.db_table
    # Copies keep their original's fields but are submitted now: they join the queue's tail
    # within their priority, as fresh submissions would.
    special = {"name": "name || '-' || g", "created_at": "now()", "submitted_at": "now()"}
    cols = [f.column for f in Job._meta.concrete_fields if f.column != "id"]
    select = ", ".join(special.get(c, c) for c in cols)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {table} WHERE status = 'queued'")
        have = cursor.fetchone()[0]
        copies = -(-n // have)
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(cols)}) SELECT {select} FROM {table} "  # noqa: S608
            f"CROSS JOIN generate_series(1, %s) g WHERE status = 'queued' ORDER BY g, id LIMIT %s",
            [copies, n],
        )
        cursor.execute(f"ANALYZE {table}")


def fill_queue(target: int) -> dict[str, int]:
    """Tick until the queue holds `target` jobs after leasing; return queued and leased counts."""
    from jobs import services
    from jobs.models import Lease

    for _ in range(4):
        _heartbeat_workers()
        # A tick leases what it can and records the wait reasons the queue pages show.
        services.scheduler_tick(trigger="bench pages")
        missing = target - _queued()
        if missing <= 0:
            break
        _clone_queued(missing)
    else:
        services.scheduler_tick(trigger="bench pages")
    from django.db import connection

    with connection.cursor() as cursor:
        # Fresh statistics, as autovacuum gives a live lab within a minute: right after the
        # first tick leases thousands of hosts, stale ones (an empty lease table) make the
        # planner pick a nested loop that turns /api/workers/ from 13 ms into 2.4 s.
        cursor.execute("ANALYZE")
    return {
        "queued": _queued(),
        "active_leases": Lease.objects.active().count(),
    }


def staff_session() -> tuple[object, str]:
    """A logged-in test Client for a staff user, and its session id (valid for any process)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user, _ = get_user_model().objects.get_or_create(
        username="bench-staff", defaults={"is_staff": True}
    )
    client = Client()
    client.force_login(user)
    return client, client.cookies["sessionid"].value


def common_label(lab: Lab) -> str:
    """The most common board label: a filter that matches a realistic slice of the lab."""
    boards = Counter(lbl for h in lab.hosts for lbl in h.labels if lbl.startswith("board:"))
    return boards.most_common(1)[0][0]


# --- timing ---------------------------------------------------------------------------------


def summary(times_ms: list[float]) -> dict[str, float]:
    return {
        "p50_ms": round(percentile(times_ms, 50), 1),
        "p95_ms": round(percentile(times_ms, 95), 1),
        "mean_ms": round(statistics.fmean(times_ms), 1),
        "n": len(times_ms),
    }


def time_in_process(client: object, path: str, n: int, warmup: int) -> dict[str, float]:
    """Time n GETs through Django's test Client (no network), after warm-up; count queries.

    `cpu_p50_ms`: the process's own CPU time per request (time.process_time), which other
    processes on a loaded machine move much less than the wall time."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(warmup):
        _check(client.get(path).status_code, path)  # type: ignore[attr-defined]
    times, cpu = [], []
    for _ in range(n):
        start, start_cpu = time.perf_counter(), time.process_time()
        status = client.get(path).status_code  # type: ignore[attr-defined]
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        _check(status, path)
    with CaptureQueriesContext(connection) as queries:
        client.get(path)  # type: ignore[attr-defined]
    return {
        **summary(times),
        "cpu_p50_ms": round(percentile(cpu, 50), 1),
        "queries": len(queries.captured_queries),
    }


def _check(status: int, path: str) -> None:
    if status != 200:
        raise SystemExit(f"GET {path} answered {status}")


def _get(port: int, path: str, cookie: str) -> tuple[int, int]:
    """One GET on a fresh loopback connection (gunicorn's sync workers close after each)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path, headers={"Cookie": f"sessionid={cookie}"})
        response = conn.getresponse()
        body = response.read()
        return response.status, len(body)
    finally:
        conn.close()


def time_http(port: int, path: str, cookie: str, n: int, warmup: int) -> dict[str, float]:
    """Time n sequential GETs over HTTP on loopback, after warm-up (which reaches both workers)."""
    for _ in range(warmup):
        _check(_get(port, path, cookie)[0], path)
    times = []
    size = 0
    for _ in range(n):
        start = time.perf_counter()
        status, size = _get(port, path, cookie)
        times.append((time.perf_counter() - start) * 1000)
        _check(status, path)
    return {**summary(times), "bytes": size}


# --- load generator -------------------------------------------------------------------------

_WRK_LATENCY = re.compile(r"^\s*(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", re.MULTILINE)
_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


def load_wrk(
    wrk: str, port: int, path: str, cookie: str, concurrency: int, seconds: int
) -> dict[str, object]:
    """Run wrk (2 threads) against one path on loopback; parse requests/s and percentiles."""
    out = subprocess.run(
        [wrk, "-t2", f"-c{concurrency}", f"-d{seconds}s", "--latency", "--timeout", "30s"]
        + ["-H", f"Cookie: sessionid={cookie}", f"http://127.0.0.1:{port}{path}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    errors = re.search(r"Socket errors:.*", out)
    lat = {f"p{q}_ms": round(float(v) * _UNITS[u], 1) for q, v, u in _WRK_LATENCY.findall(out)}
    return {
        "tool": "wrk",
        "rps": round(rps, 1),
        "requests": total,
        "non_2xx": int(bad.group(1)) if bad else 0,
        "socket_errors": errors.group(0) if errors else "",
        **lat,
    }


def load_python(
    port: int, path: str, cookie: str, concurrency: int, seconds: int
) -> dict[str, object]:
    """The fallback load generator: `concurrency` threads issuing GETs back to back."""
    deadline = time.perf_counter() + seconds
    times: list[float] = []
    bad = 0
    lock = threading.Lock()

    def worker() -> None:
        nonlocal bad
        while time.perf_counter() < deadline:
            start = time.perf_counter()
            status, _ = _get(port, path, cookie)
            ms = (time.perf_counter() - start) * 1000
            with lock:
                times.append(ms)
                bad += status != 200

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    return {
        "tool": "python threads",
        "rps": round(len(times) / elapsed, 1),
        "requests": len(times),
        "non_2xx": bad,
        "socket_errors": "",
        **{f"p{q}_ms": round(percentile(times, q), 1) for q in (50, 75, 90, 99)},
    }


# --- the server -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str, port: int, workers: int, log: Path) -> subprocess.Popen:
    """gunicorn on loopback, DEBUG off, as production would run it; waits until it answers."""
    env = {
        **os.environ,
        "DATABASE_URL": dbload.database_url(db),
        "DEBUG": "0",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "bench-only-not-secret"),
        "STATIC_MANIFEST": "0",
        "DJANGO_SETTINGS_MODULE": "schedsite.settings",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "schedsite.wsgi:application"]
        + ["--bind", f"127.0.0.1:{port}", "--workers", str(workers), "--timeout", "120"],
        cwd=ROOT,
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: stopped as one, and only it
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"gunicorn exited with {proc.returncode}: see {log}")
        try:
            if _get(port, "/accounts/login/", "")[0] == 200:
                return proc
        except OSError:
            pass
        time.sleep(0.2)
    stop_process_group(proc)
    raise SystemExit(f"gunicorn did not answer within 60 s: see {log}")


# --- the run --------------------------------------------------------------------------------


def measure(
    args: argparse.Namespace, paths: dict[str, str], client: object, cookie: str, *, load: bool
) -> dict[str, dict]:
    """In-process and HTTP timings of the paths, and (if load) a throughput run of each."""
    from django.db import connections

    out: dict[str, dict] = {"in_process": {}, "http": {}, "throughput": {}}
    for name, path in paths.items():
        out["in_process"][name] = time_in_process(client, path, args.requests, args.warmup)
    if args.no_http:
        return out
    connections.close_all()  # the server's workers get the database to themselves
    port = free_port()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"{args.db}-gunicorn.log"
    server = start_server(args.db, port, args.workers, log)
    try:
        for name, path in paths.items():
            out["http"][name] = time_http(port, path, cookie, args.requests, args.warmup)
        if load:
            wrk = shutil.which("wrk")
            for name, path in paths.items():
                if wrk:
                    r = load_wrk(wrk, port, path, cookie, args.concurrency, args.seconds)
                else:
                    r = load_python(port, path, cookie, args.concurrency, args.seconds)
                out["throughput"][name] = r
    finally:
        stop_process_group(server)
    return out


def main() -> None:  # noqa: PLR0915 — a script: arguments, one run, its report
    """Load a lab, time the API and UI list pages at its size, and report throughput."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=10_000, help="queued jobs after leasing")
    parser.add_argument("--big-jobs", type=int, default=100_000, help="0: skip the big queue")
    parser.add_argument("--suites", type=int, default=500)
    parser.add_argument("--label-sets", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--multi-host-share",
        type=float,
        default=0.05,
        help="share of the queued jobs made multi-host, as bench.tick makes them",
    )
    parser.add_argument("--requests", type=int, default=50, help="timed GETs per endpoint")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--seconds", type=int, default=10, help="load generator time per path")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers")
    parser.add_argument("--no-http", action="store_true", help="in-process timings only")
    parser.add_argument("--db", default="bench_pages", help="database to (re)create: bench_*")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--markdown", action="store_true", help="print the tables")
    args = parser.parse_args()

    if not 0 <= args.multi_host_share <= 1:
        parser.error("--multi-host-share: a share between 0 and 1")

    lab = generate(LabShape(args.hosts, args.jobs, args.suites, args.label_sets, seed=args.seed))
    multi_host = make_multi_host(lab, args.multi_host_share, args.seed)
    print(f"pages benchmark: {lab.describe()}, {multi_host} multi-host", file=sys.stderr)
    # The in-process figures run with the server's settings: DEBUG off (no query log kept),
    # static files served unhashed so that no collectstatic run is needed.
    os.environ["DEBUG"] = "0"
    os.environ["STATIC_MANIFEST"] = "0"
    # One staff account asks every page back to back, in-process and at 8 clients: far above the
    # per-user read throttle (600/min), which would answer 429s and time the refusal. The
    # server started below inherits this too. The throttle's own cost is still paid.
    os.environ.setdefault("THROTTLE_READ", "1000000/min")
    dbload.setup_django(args.db)
    try:
        from django.utils import timezone

        with dbload.timed("load"):
            dbload.load(lab, now=timezone.now())
        with dbload.timed(f"ticks to {args.jobs:,} queued"):
            state = fill_queue(args.jobs)
        client, cookie = staff_session()
        paths = endpoints(common_label(lab), last_queued_job())
        with dbload.timed("measure"):
            result: dict[str, object] = {
                **lab.describe(),
                **state,
                **measure(args, paths, client, cookie, load=True),
            }
        if args.big_jobs:
            with dbload.timed(f"ticks to {args.big_jobs:,} queued"):
                big_state = fill_queue(args.big_jobs)
            big_paths = {name: paths[name] for name in QUEUE_BOUND}
            big_paths["ui_job"] = endpoints(common_label(lab), last_queued_job())["ui_job"]
            with dbload.timed("measure the big queue"):
                result["big"] = {**big_state, **measure(args, big_paths, client, cookie, load=True)}
    finally:
        if not args.keep:
            from django.db import connections

            connections.close_all()
            dbload.drop_database(args.db)
    result["paths"] = paths
    result["target_p50_ms"] = TARGET_MS
    result["wrk"] = bool(shutil.which("wrk"))
    result["concurrency"] = args.concurrency
    result["seconds"] = args.seconds
    if args.markdown:
        print(markdown(result))
    if args.json or not args.markdown:
        print(json.dumps(result))


# --- tables ---------------------------------------------------------------------------------


def _verdict(name: str, p50: float) -> str:
    if name not in TARGETED:
        return ""
    return "met" if p50 <= TARGET_MS else "**missed**"


def markdown(r: dict) -> str:
    """The tables of bench/RESULTS.md for one result of this benchmark."""
    paths = r["paths"]
    lines = [
        f"Lab: {r['hosts']:,} hosts, {r['queued']:,} queued jobs, {r['active_leases']:,} active "
        f"leases, {r['suites']} suites, {r['label_sets']} label sets (seed {r['seed']}).",
        "",
        "| GET | in-process p50 / p95 ms | SQL queries | HTTP p50 / p95 ms | target p50 |  "
        "| req/s at c=" + str(_conc(r)) + " | p50 / p99 ms under load |",
        "|---|---|---|---|---|---|---|---|",
    ]
    lines += _rows(r, paths)
    big = r.get("big")
    if big:
        lines += [
            "",
            f"Same lab with the queue grown to {big['queued']:,} queued jobs "
            f"({big['active_leases']:,} active leases):",
            "",
            "| GET | in-process p50 / p95 ms | SQL queries | HTTP p50 / p95 ms | target p50 |  "
            "| req/s at c=" + str(_conc(r)) + " | p50 / p99 ms under load |",
            "|---|---|---|---|---|---|---|---|",
        ]
        lines += _rows(big, {k: paths[k] for k in big["in_process"]})
    return "\n".join(lines)


def _conc(r: dict) -> str:
    return str(r.get("concurrency", "?"))


def _rows(r: dict, paths: dict[str, str]) -> list[str]:
    rows = []
    for name, path in paths.items():
        ip = r["in_process"][name]
        h = r["http"].get(name)
        t = r["throughput"].get(name)
        main_p50 = h["p50_ms"] if h else ip["p50_ms"]
        target = f"{TARGET_MS:.0f}" if name in TARGETED else "—"
        rows.append(
            f"| `{path}` | {ip['p50_ms']} / {ip['p95_ms']} | {ip['queries']} | "
            + (f"{h['p50_ms']} / {h['p95_ms']}" if h else "—")
            + f" | {target} | {_verdict(name, main_p50)} | "
            + (f"{t['rps']:,.0f} | {t['p50_ms']} / {t['p99_ms']}" if t else "— | —")
            + " |"
        )
    return rows


if __name__ == "__main__":
    main()
