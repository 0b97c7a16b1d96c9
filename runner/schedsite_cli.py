"""`schedsite`, the lab's command-line client: it speaks only the REST API (docs/cli.md).

Like the runner it needs only the standard library and `requests`, so it runs on any machine
that can reach the server; PyYAML, when installed, lets it read suites written in YAML.
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import importlib
import json
import logging
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote, urlencode, urlsplit

from runner.client import Api, ApiError, ApiUnavailable

EXIT_OK = 0
EXIT_FAILED = 1  # jobs failed (submit --wait, status, watch), or no host was reserved
EXIT_ERROR = 2  # a usage error, a file it cannot read, or an API error
EXIT_INTERRUPTED = 130  # Ctrl-C

# The statuses a job ends in, and the suite statuses that end a watch.
FINISHED_JOBS = frozenset({"passed", "failed", "aborted", "error", "expired", "skipped"})
FINISHED_SUITES = frozenset({"completed", "aborted"})
# A watch lists each job's changes while the suite's jobs fit in one page of the API.
WATCH_JOBS_MOST = 500
DURATION = re.compile(r"(\d+)([smhd])")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
CELL_WIDTH = 60

log = logging.getLogger("schedsite.runner")


class CliError(Exception):
    """A failure the client reports in a line or two and exits with status 2."""


# --- configuration --------------------------------------------------------------------------


def config_path() -> Path:
    """Where `schedsite login` keeps the URL and token: SCHEDSITE_CONFIG, else the XDG place."""
    if os.environ.get("SCHEDSITE_CONFIG"):
        return Path(os.environ["SCHEDSITE_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "schedsite" / "config.json"


def read_config(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the config file {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise CliError(f"the config file {path} does not hold a JSON object")
    return data


def write_config(path: Path, data: dict) -> None:
    """Write the config file readable by its owner only (it holds a token), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    partial = path.with_name(path.name + ".partial")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # a partial file left by an earlier run keeps its old mode otherwise
    with os.fdopen(fd, "w") as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    os.replace(partial, path)


def api_url(url: str) -> str:
    """The API's base URL, ending in a slash; a bare site URL gets `api/` added."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(f"the API URL must start with http:// or https://, not {url!r}")
    if parts.path in ("", "/"):
        return url.rstrip("/") + "/api/"
    return url.rstrip("/") + "/"


def credentials(options: argparse.Namespace) -> tuple[str, str]:
    """The API's URL and the token: flags, then the environment, then the config file.

    The config file's token goes only to the URL it was issued by: pointing SCHEDSITE_API at
    another server does not send it there.
    """
    url = options.api or os.environ.get("SCHEDSITE_API")
    token = os.environ.get("SCHEDSITE_TOKEN")
    if url and token:
        return api_url(url), token  # the file is not needed, nor read
    config = read_config(config_path())
    url = url or config.get("api")
    if not url:
        raise CliError(
            "no API URL: run `schedsite login`, or set SCHEDSITE_API "
            "(e.g. http://lab.example:8000/api/)"
        )
    url = api_url(url)
    if not token and config.get("token") and api_url(config.get("api") or "http://-") == url:
        token = config["token"]
    if not token:
        raise CliError(f"not logged in to {url}: run `schedsite login`, or set SCHEDSITE_TOKEN")
    return url, token


# --- the API --------------------------------------------------------------------------------


class Client:
    """The runner's Api (auth, retries with backoff) with what the commands share."""

    def __init__(self, url: str, token: str, options: argparse.Namespace) -> None:
        self.url = url
        self.api = Api(url, token, retries=options.retries, timeout=options.timeout)

    @property
    def site(self) -> str:
        """The web UI's root: the API's URL without its last `api/`."""
        return self.url[: -len("api/")] if self.url.endswith("/api/") else self.url

    def get(self, path: str, **params: Any) -> Any:
        return self.api.call("GET", _with_query(path, params))

    def post(self, path: str, body: dict | None = None, *, idempotent: bool = False) -> Any:
        """POST; a create is sent with an Idempotency-Key, so a retry after a lost answer
        creates nothing twice (docs/api.md#retrying-a-create-idempotency-key)."""
        headers = self.api.session.headers
        if idempotent:
            headers["Idempotency-Key"] = str(uuid.uuid4())
        try:
            return self.api.call("POST", path, body)
        finally:
            headers.pop("Idempotency-Key", None)

    def every(self, path: str, **params: Any) -> list[dict]:
        """Every result of a list, page after page."""
        return list(self.api.pages(_with_query(path, {"page_size": 500, **params})))


def _with_query(path: str, params: dict[str, Any]) -> str:
    pairs = [(k, v) for k, v in params.items() if v is not None and v != []]
    return f"{path}?{urlencode(pairs, doseq=True)}" if pairs else path


def segment(value: str) -> str:
    """A hostname or id as one path segment: a slash in it cannot reach another endpoint."""
    return quote(str(value), safe="")


def explain(error: ApiError, url: str) -> str:
    """What went wrong, said for a person: the server's own words, field by field."""
    body, status = error.body, error.status
    detail = body.get("detail") if isinstance(body, dict) else None
    if isinstance(error, ApiUnavailable) and status == 0:
        return f"cannot reach the schedsite API at {url}: {_network_reason(str(body))}"
    if status == 400:
        lines = field_errors(body)
        return "the server refused the request (HTTP 400):\n" + "\n".join(f"  {x}" for x in lines)
    if status == 401:
        return (
            f"not logged in: {url} refused the token ({detail or 'HTTP 401'}); "
            "run `schedsite login`, or set SCHEDSITE_TOKEN"
        )
    if status == 403:
        return f"not allowed: {detail or 'HTTP 403'}"
    if status == 404:
        return f"not found: {_request_of(error)} ({detail or 'HTTP 404'})"
    if status == 409:
        return f"refused (HTTP 409): {detail or body}"
    if status == 429:
        return f"too many requests (HTTP 429): {detail or body}"
    return f"HTTP {status} from {_request_of(error)}: {detail or body}"


def _request_of(error: ApiError) -> str:
    """`GET /api/suites/9/` out of the error's message."""
    method_url = str(error).split(": HTTP ", 1)[0]
    method, _, url = method_url.partition(" ")
    return f"{method} {urlsplit(url).path}"


def _network_reason(text: str) -> str:
    found = re.search(r"\[Errno -?\d+\] ([^'\")]+)", text)
    if found:
        return found.group(1).strip()
    return "timed out" if "timed out" in text.lower() else "the connection failed"


def field_errors(body: Any, prefix: str = "") -> list[str]:  # noqa: ANN401
    """A 400's body as `field: message` lines: `{"jobs": {"0": {"host": [...]}}}` reads
    `jobs[0].host: …` (docs/api.md#conventions)."""
    if isinstance(body, dict):
        lines = []
        for key, value in body.items():
            if key in ("detail", "non_field_errors"):
                name = prefix
            elif str(key).isdigit():
                name = f"{prefix}[{key}]"
            else:
                name = f"{prefix}.{key}" if prefix else str(key)
            lines += field_errors(value, name)
        return lines
    if isinstance(body, list) and not all(isinstance(item, str) for item in body):
        lines = []
        for index, item in enumerate(body):
            if item:
                lines += field_errors(item, f"{prefix}[{index}]")
        return lines
    messages = body if isinstance(body, list) else [str(body)]
    # The lab's checks name the place themselves ("jobs[1].labels: no host …"): said once.
    return [m if not prefix or m.startswith(f"{prefix}:") else f"{prefix}: {m}" for m in messages]


# --- output ---------------------------------------------------------------------------------


def cell(value: Any) -> str:  # noqa: ANN401
    if value is None or value == "" or value == []:
        text = "-"
    elif isinstance(value, bool):
        text = "yes" if value else "no"
    elif isinstance(value, list):
        text = ",".join(str(v) for v in value)
    else:
        text = " ".join(str(value).split())  # one line, whatever the message held
    return text if len(text) <= CELL_WIDTH else text[: CELL_WIDTH - 1] + "…"


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Any]], out: TextIO, *, empty: str
) -> None:
    """Columns for people: a header row, then one row per item (or what says there is none)."""
    if not rows:
        print(empty, file=out)
        return
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in cells)]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)


def emit_json(data: Any, out: TextIO) -> None:  # noqa: ANN401
    print(json.dumps(data, indent=2, sort_keys=True), file=out)


def human_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(seconds)
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600}h"


def parse_duration(text: str) -> int:
    """`2h`, `90m`, `1h30m`, `1d` or plain seconds, as whole seconds (argparse's type)."""
    text = text.strip().lower()
    if text.isdigit():
        seconds = int(text)
    elif DURATION.fullmatch(text) or re.fullmatch(r"(\d+[smhd])+", text):
        seconds = sum(int(n) * UNITS[unit] for n, unit in DURATION.findall(text))
    else:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: say 2h, 90m, 1h30m or 1d")
    if seconds <= 0:
        raise argparse.ArgumentTypeError("a duration must be longer than 0")
    return seconds


def positive_id(text: str) -> int:
    if not text.isdigit() or int(text) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an id (a whole number)")
    return int(text)


# --- suites ---------------------------------------------------------------------------------


def load_suite(path: str) -> dict:
    """The body of POST /api/suites/ from a YAML or JSON file (`-`: standard input)."""
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    parse = _parse_json if path.endswith(".json") else _parse_yaml
    body = parse(path, text)
    if not isinstance(body, dict):
        raise CliError(f"{path}: a suite is a mapping (name, jobs, …), not {type(body).__name__}")
    if "name" not in body and {"workers", "hosts", "suites"} & set(body):
        raise CliError(f"{path} looks like a lab file: load it with `manage.py import_lab`")
    return body


def _parse_json(path: str, text: str) -> Any:  # noqa: ANN401
    try:
        return json.loads(text)
    except ValueError as exc:
        raise CliError(f"{path} is not valid JSON: {exc}") from exc


def _parse_yaml(path: str, text: str) -> Any:  # noqa: ANN401
    try:
        # Optional: a machine with only `requests` still submits JSON (YAML's own subset).
        yaml = importlib.import_module("yaml")
    except ImportError:
        try:
            return json.loads(text)
        except ValueError:
            raise CliError(
                f"{path}: reading YAML needs PyYAML (pip install PyYAML), which is not "
                "installed; give the suite as JSON instead"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CliError(f"{path} is not valid YAML: {exc}") from exc


def _json_value(value: Any) -> Any:  # noqa: ANN401
    """YAML reads `until: 2026-11-24T12:00:00Z` as a datetime: send it as ISO 8601."""
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    raise TypeError(f"cannot send {type(value).__name__} in JSON")


def suite_failed(suite: dict) -> bool:
    """A job did not pass: failed, error, expired or aborted (a skipped fan-out job did not
    fail), or the suite was aborted."""
    outcome = suite.get("outcome") or {}
    return bool(outcome.get("failed") or outcome.get("aborted")) or suite["status"] == "aborted"


def suite_exit(suite: dict) -> int:
    return EXIT_FAILED if suite_failed(suite) else EXIT_OK


def progress_line(suite: dict) -> str:
    counts = {k: v for k, v in (suite.get("job_counts") or {}).items() if v}
    total = suite.get("jobs_total") or 0
    unfinished = (suite.get("outcome") or {}).get("unfinished", 0)
    parts = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no jobs"
    return f"suite {suite['id']} {suite['status']}: {total - unfinished}/{total} done ({parts})"


def job_host(job: dict) -> str | None:
    hosts = [h["hostname"] for h in job.get("hosts") or []]
    return ",".join(hosts) if hosts else job.get("host")


def job_line(job: dict) -> str:
    line = f"job {job['id']} {job['name']}: {job['status']}"
    host = job_host(job)
    if host:
        line += f" on {host}"
    if job["status"] in FINISHED_JOBS - {"passed"} and job.get("message"):
        line += f" ({cell(job['message'].strip().splitlines()[-1])})"
    return line


def watch_suite(
    client: Client,
    suite_id: int,
    *,
    interval: float,
    out: TextIO,
    as_json: bool,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Print progress until the suite has finished; return it as it ended."""
    last_line, statuses = None, {}
    while True:
        suite = client.get(f"suites/{suite_id}/")
        stamp = time.strftime("%H:%M:%S")
        if as_json:
            line = json.dumps(suite, sort_keys=True)
        else:
            for job in _changed_jobs(client, suite, statuses):
                print(f"{stamp}   {job_line(job)}", file=out, flush=True)
            line = progress_line(suite)
        if line != last_line:
            print(line if as_json else f"{stamp} {line}", file=out, flush=True)
            last_line = line
        if suite["status"] in FINISHED_SUITES:
            return suite
        sleep(interval)


def _changed_jobs(client: Client, suite: dict, statuses: dict[int, str]) -> Iterator[dict]:
    """The suite's jobs whose status changed since the last look (at first: those started)."""
    if (suite.get("jobs_total") or 0) > WATCH_JOBS_MOST:
        return  # a big suite: its counts say enough, and reading every job costs pages
    first = not statuses
    for job in client.every("jobs/", suite=suite["id"]):
        before = statuses.get(job["id"])
        statuses[job["id"]] = job["status"]
        if before != job["status"] and not (first and job["status"] == "queued"):
            yield job


# --- commands -------------------------------------------------------------------------------


def suite_body(path: str) -> dict:
    """The suite file as the JSON the API takes."""
    return json.loads(json.dumps(load_suite(path), default=_json_value))


def cmd_submit(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    body = suite_body(options.file)
    suite = client.post("suites/", body, idempotent=True)
    if options.json and not options.wait:
        emit_json(suite, out)
        return EXIT_OK
    progress = sys.stderr if options.json else out
    print(
        f"submitted suite {suite['id']} {suite['name']!r}: {suite['jobs_total']} jobs, "
        f"priority {suite['priority']}\n  {client.site}suites/{suite['id']}/",
        file=progress,
        flush=True,
    )
    if not options.wait:
        return EXIT_OK
    suite = watch_suite(client, suite["id"], interval=options.interval, out=progress, as_json=False)
    if options.json:
        emit_json(suite, out)
    return suite_exit(suite)


def cmd_status(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    suite = client.get(f"suites/{options.suite}/")
    jobs = client.every("jobs/", suite=options.suite)
    if options.json:
        emit_json({"suite": suite, "jobs": jobs}, out)
        return suite_exit(suite)
    print(
        f"suite {suite['id']} {suite['name']!r} (build {cell(suite['build'])}, ", end="", file=out
    )
    print(f"owner {cell(suite['owner'])}, priority {suite['priority']})", file=out)
    print(progress_line(suite), file=out)
    outcome = suite.get("outcome") or {}
    print(", ".join(f"{k} {v}" for k, v in outcome.items()), file=out)
    print(file=out)
    rows = [
        (job["id"], job["name"], job["status"], job_host(job), job["attempts"], _job_note(job))
        for job in jobs
    ]
    table(
        ["ID", "NAME", "STATUS", "HOST", "TRIES", "WHY / LAST OUTPUT"], rows, out, empty="(no jobs)"
    )
    return suite_exit(suite)


def _job_note(job: dict) -> str:
    if job["status"] == "queued" and job.get("wait_reason"):
        return job["wait_reason"].get("message", "")
    lines = (job.get("message") or "").strip().splitlines()
    return lines[-1] if lines and job["status"] != "passed" else ""


def cmd_watch(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    suite = watch_suite(
        client, options.suite, interval=options.interval, out=out, as_json=options.json
    )
    if not options.json:
        print(_verdict(suite), file=out)
    return suite_exit(suite)


def _verdict(suite: dict) -> str:
    outcome = suite.get("outcome") or {}
    if suite_failed(suite):
        return (
            f"suite {suite['id']} {suite['status']}: {outcome.get('failed', 0)} failed, "
            f"{outcome.get('aborted', 0)} aborted, {outcome.get('passed', 0)} passed"
        )
    return f"suite {suite['id']} {suite['status']}: all {outcome.get('passed', 0)} passed"


def cmd_queue(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    page = client.get("queue/", page_size=options.limit, suite=options.suite, label=options.label)
    entries = page["results"]
    if options.json:
        emit_json(entries, out)
        return EXIT_OK
    rows = [
        (
            e["position"],
            e["job"],
            e["name"],
            e["effective_priority"],
            e["suite"],
            e["owner"],
            human_seconds(e["age_seconds"]),
            (e.get("wait_reason") or {}).get("message"),
        )
        for e in entries
    ]
    headers = ["POS", "JOB", "NAME", "PRIO", "SUITE", "OWNER", "AGE", "WHY IT WAITS"]
    table(headers, rows, out, empty="(no queued jobs)")
    if page["count"] > len(entries):
        print(f"… {len(entries)} of {page['count']} queued jobs (--limit N for more)", file=out)
    return EXIT_OK


def cmd_hosts(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    hosts = client.every(
        "hosts/", label=options.label, status=options.status, worker=options.worker
    )
    if options.json:
        emit_json(hosts, out)
        return EXIT_OK
    rows = [
        (
            h["hostname"],
            h["worker"],
            h["status"],
            f"yes: {h['lock_reason']}" if h["locked"] else "no",
            _lease_note(h.get("lease")),
            h["labels"],
        )
        for h in hosts
    ]
    table(
        ["HOSTNAME", "WORKER", "STATUS", "LOCKED", "LEASE", "LABELS"], rows, out, empty="(no hosts)"
    )
    return EXIT_OK


def _lease_note(lease: dict | None) -> str:
    if not lease:
        return ""
    if lease.get("kind") == "reservation":
        return f"reserved by {lease.get('holder') or '?'}"
    return f"{lease.get('kind')} job {lease.get('job_name') or lease.get('job')}"


def cmd_lock(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    host = client.post(f"hosts/{segment(options.host)}/lock/", {"reason": options.reason})
    if options.json:
        emit_json(host, out)
    else:
        print(f"locked {host['hostname']}: {host['lock_reason']}", file=out)
    return EXIT_OK


def cmd_unlock(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    host = client.post(f"hosts/{segment(options.host)}/unlock/")
    if options.json:
        emit_json(host, out)
    else:
        print(f"unlocked {host['hostname']}", file=out)
    return EXIT_OK


def cmd_reserve(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    """Reserve a free host that fits (labels or a host) through /api/reservations/; with
    --wait, join the server's waiting line and follow the reservation until it holds a host.

    Ctrl-C while it waits takes the reservation out of the line (`end`) and exits 130.
    """
    wants = f"host {options.host}" if options.host else " ".join(options.label)
    body: dict[str, Any] = {
        "duration": options.duration,
        "reason": options.reason or f"schedsite reserve {_wants_args(options)}",
        "wait": options.wait,
    }
    if options.host:
        body["host"] = options.host
    else:
        body["labels"] = options.label
    try:
        reservation = client.post("reservations/", body, idempotent=True)
    except ApiError as exc:
        if exc.status not in (400, 409):
            raise
        # Refused, nothing written: no free host (without --wait), a label no host carries,
        # the tester's limit, a duration too long. The server's words say which.
        print(f"schedsite: no host reserved: {_refusal(exc)}", file=sys.stderr)
        return EXIT_FAILED
    if reservation["status"] == "waiting":
        progress = sys.stderr
        print(
            f"reservation {reservation['id']} waits in line for {wants} (Ctrl-C leaves the line)",
            file=progress,
            flush=True,
        )
        try:
            reservation = _follow_line(client, reservation, options.interval, progress)
        except KeyboardInterrupt:
            return _leave_line(client, reservation["id"])
        except ApiError as exc:
            raise CliError(
                f"{explain(exc, client.url)}\nreservation {reservation['id']} may still wait "
                f"in line: `schedsite reservations` shows it, `schedsite release "
                f"{reservation['id']}` takes it out"
            ) from exc
    if options.json:
        emit_json(reservation, out)
    if reservation["status"] != "active":
        print(f"schedsite: {_not_served(client, reservation)}", file=sys.stderr)
        return EXIT_FAILED
    if not options.json:
        print(
            f"reserved {reservation['host']} until {reservation['expires_at']} "
            f"(reservation {reservation['id']})",
            file=out,
        )
        print(f"  give it back: schedsite release {reservation['id']}", file=out)
    return EXIT_OK


def _wants_args(options: argparse.Namespace) -> str:
    if options.host:
        return f"--host {options.host}"
    return " ".join(f"--label {label}" for label in options.label)


def _refusal(error: ApiError) -> str:
    """A refused reservation in the server's words: the 409's detail, the 400's fields."""
    if error.status == 409 and isinstance(error.body, dict) and error.body.get("detail"):
        return str(error.body["detail"])
    return "; ".join(field_errors(error.body))


def _follow_line(
    client: Client,
    reservation: dict,
    interval: float,
    progress: TextIO,
    sleep: Callable[[float], None] = time.sleep,
) -> dict:
    """Look at a waiting reservation every `interval` seconds, saying its place in line and
    why it waits whenever they change, until it no longer waits; return it as it is then."""
    said = None
    while reservation["status"] == "waiting":
        now = (reservation.get("position"), reservation.get("why"))
        if now != said:
            stamp = time.strftime("%H:%M:%S")
            print(f"{stamp} place {now[0]} in line: {now[1]}", file=progress, flush=True)
            said = now
        sleep(interval)
        reservation = client.get(f"reservations/{reservation['id']}/")
    return reservation


def _leave_line(client: Client, reservation_id: int) -> int:
    """Ctrl-C while waiting: take the reservation out of the line (a second Ctrl-C does not
    stop that), or give back the host it was given in the meantime; exit 130."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        done = client.post(
            f"reservations/{reservation_id}/end/",
            {"reason": "left the line (Ctrl-C in schedsite reserve)"},
        )
    except ApiError as exc:
        print(
            f"schedsite: interrupted; could not take reservation {reservation_id} out of the "
            f"line: {explain(exc, client.url)}",
            file=sys.stderr,
        )
    else:
        if done["status"] == "cancelled":
            what = "left the line"
        else:  # served between the last look and the Ctrl-C: its host is given back
            what = f"it had just been given {done['host']}, now given back"
        print(f"schedsite: interrupted: reservation {reservation_id} {what}", file=sys.stderr)
    finally:
        signal.signal(signal.SIGINT, previous)
    return EXIT_INTERRUPTED


def _not_served(client: Client, reservation: dict) -> str:
    """Why a reservation followed in line ends without a host: cancelled (its owner elsewhere,
    or staff), or served and ended before this client looked (its lease says how)."""
    number = f"reservation {reservation['id']}"
    if reservation["status"] == "cancelled":
        return f"{number} was taken out of the line (cancelled by its owner or lab staff)"
    how = ""
    if reservation.get("lease"):
        lease = client.get(f"leases/{reservation['lease']}/")
        by = f" by {lease['released_by']}" if lease.get("released_by") else ""
        how = f": {lease.get('release_reason') or 'ended'}{by}"
    return f"{number} got {reservation.get('host')} but was {reservation['status']}{how}"


def cmd_reservations(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    """Reservations waiting or holding a host (--status: others): the user's own, or everyone's
    with --everyone; newest first, as the API lists them."""
    statuses = options.status or ["waiting", "active"]
    mine = None if options.everyone else "true"
    rows = [r for s in statuses for r in client.every("reservations/", status=s, mine=mine)]
    rows.sort(key=lambda r: r["id"], reverse=True)
    if options.json:
        emit_json(rows, out)
        return EXIT_OK
    headers = ["ID", *(["OWNER"] if options.everyone else []), "STATUS", "HOST", "UNTIL"]
    headers += ["WANTS", "REASON"]
    table(
        headers,
        [
            (
                r["id"],
                *([r["owner"]] if options.everyone else []),
                r["status"] if r["status"] != "waiting" else f"waiting ({r['position']})",
                r["host"] if r["lease"] else None,
                r["expires_at"],
                r["labels"] or f"host {r['host']}",
                r["reason"],
            )
            for r in rows
        ],
        out,
        empty="(no reservations)",
    )
    for r in rows:
        if r["status"] == "waiting":
            print(f"reservation {r['id']}, place {r['position']} in line: {r['why']}", file=out)
    return EXIT_OK


def cmd_release(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    """End a reservation: one holding a host frees it, one waiting leaves the line."""
    done = client.post(f"reservations/{options.id}/end/", {"reason": options.reason or ""})
    if options.json:
        emit_json(done, out)
    elif done["status"] == "cancelled":
        print(f"reservation {done['id']} left the line", file=out)
    else:
        print(f"reservation {done['id']} ended: {done['host']} is free again", file=out)
    return EXIT_OK


def cmd_job(client: Client, options: argparse.Namespace, out: TextIO) -> int:
    job = client.get(f"jobs/{options.id}/")
    if options.json:
        emit_json(job, out)
    elif options.output:
        if job.get("message"):
            out.write(job["message"] if job["message"].endswith("\n") else job["message"] + "\n")
        else:
            print(f"job {job['id']} has no output ({job['status']})", file=sys.stderr)
    else:
        _print_job(job, out)
    return EXIT_OK


def _print_job(job: dict, out: TextIO) -> None:
    wait = (job.get("wait_reason") or {}).get("message")
    fields = [
        ("job", f"{job['id']} {job['name']} ({job['kind']})"),
        ("status", job["status"]),
        ("suite", f"{job['suite']} {job['suite_name']!r}" if job.get("suite") else None),
        ("owner", job.get("owner")),
        ("priority", job["priority"]),
        ("labels", job["labels"]),
        ("host", job_host(job)),
        ("tries", f"{job['attempts']} of {job['max_retries'] + 1}"),
        ("submitted", job.get("submitted_at")),
        ("started", job.get("started_at")),
        ("finished", job.get("finished_at")),
        ("waits", wait),
    ]
    for name, value in fields:
        if value not in (None, "", []):
            print(f"{name + ':':<11}{cell(value)}", file=out)
    if job.get("message"):
        tail = job["message"].strip().splitlines()[-1]
        print(
            f"{'output:':<11}{cell(tail)}  (all of it: schedsite job {job['id']} --output)",
            file=out,
        )


def cmd_login(options: argparse.Namespace, out: TextIO) -> int:
    path = config_path()
    config = read_config(path)
    url = options.api or os.environ.get("SCHEDSITE_API") or _ask("API URL", config.get("api"))
    url = api_url(url)
    username = options.username or _ask("username", config.get("username"))
    if options.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = options.password or getpass.getpass("password: ")
    client = Client(url, "", options)
    client.api.session.headers.pop("Authorization")  # getting a token needs none
    try:
        token = client.post("token/", {"username": username, "password": password})["token"]
        me = Client(url, token, options).get("me/")
    except ApiError as exc:
        if exc.status == 400:  # DRF's "Unable to log in with provided credentials."
            raise CliError("login refused: " + " ".join(field_errors(exc.body))) from exc
        raise CliError(explain(exc, url)) from exc
    write_config(path, {"api": url, "token": token, "username": me["username"]})
    if options.json:
        emit_json({"api": url, "username": me["username"], "staff": me.get("staff"),
                   "config": str(path)}, out)  # fmt: skip
        return EXIT_OK
    role = " (lab staff)" if me.get("staff") else ""
    print(f"logged in to {url} as {me['username']}{role}; token saved in {path}", file=out)
    return EXIT_OK


def _ask(what: str, default: str | None) -> str:
    shown = f" [{default}]" if default else ""
    answer = input(f"{what}{shown}: ").strip() or (default or "")
    if not answer:
        raise CliError(f"no {what} given")
    return answer


COMMANDS: dict[str, Callable[[Client, argparse.Namespace, TextIO], int]] = {
    "submit": cmd_submit,
    "status": cmd_status,
    "watch": cmd_watch,
    "queue": cmd_queue,
    "hosts": cmd_hosts,
    "lock": cmd_lock,
    "unlock": cmd_unlock,
    "reserve": cmd_reserve,
    "reservations": cmd_reservations,
    "release": cmd_release,
    "job": cmd_job,
}


# --- the command line -----------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser, default: Any) -> None:  # noqa: ANN401
    """Options every command takes, before or after its name. Beside the command, their
    default is SUPPRESS: one given before the name is not reset by the command's parser."""

    def value(normal: object) -> object:
        return normal if default is None else default

    parser.add_argument(
        "--json",
        action="store_true",
        default=value(False),
        help="print JSON for scripts instead of tables",
    )
    parser.add_argument(
        "--api",
        metavar="URL",
        default=value(None),
        help="the API's URL (env SCHEDSITE_API, else the config file)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        metavar="N",
        default=value(2),
        help="retries of a request that fails to connect or gets 429/5xx (2)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        default=value(30.0),
        help="seconds to wait for each answer (30)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="schedsite",
        description="The schedsite lab from the command line, over the REST API (docs/cli.md). "
        "The token comes from SCHEDSITE_TOKEN or the file `schedsite login` writes.",
        epilog="exit status: 0 ok, 1 jobs failed (or no host was reserved), 2 usage or API error",
    )
    _common(parser, None)
    common = argparse.ArgumentParser(add_help=False)
    _common(common, argparse.SUPPRESS)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        return commands.add_parser(name, help=help_text, description=help_text, parents=[common])

    login = add("login", "get an API token with your password and save it in the config file")
    login.add_argument("--username")
    login.add_argument("--password", help="(visible to `ps`: prefer the prompt)")
    login.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from the first line of standard input",
    )

    submit = add(
        "submit", "submit a suite from a YAML or JSON file (the body of POST /api/suites/)"
    )
    submit.add_argument("file", help="suite.yaml, suite.json, or - for standard input")
    submit.add_argument(
        "--wait",
        action="store_true",
        help="follow the suite until it finishes; exit 1 if a job failed",
    )
    _interval(submit)

    for name, help_text in [
        ("status", "a suite and its jobs; exit 1 if a job failed"),
        ("watch", "print a suite's progress until it finishes; exit 1 if a job failed"),
    ]:
        command = add(name, help_text)
        command.add_argument("suite", type=positive_id, metavar="SUITE", help="the suite's id")
        if name == "watch":
            _interval(command)

    queue = add("queue", "queued jobs in the scheduler's order, and why each waits")
    queue.add_argument("--suite", type=positive_id)
    queue.add_argument("--label", action="append", help="repeat: AND")
    queue.add_argument("--limit", type=positive_id, default=50, help="jobs shown (50)")

    hosts = add("hosts", "hosts, their status, lock and lease")
    hosts.add_argument("--label", action="append", help="repeat: AND")
    hosts.add_argument("--status", action="append", help="repeat: OR (retired only when asked)")
    hosts.add_argument("--worker")

    lock = add("lock", "lock a host: the scheduler leases it nothing (staff)")
    lock.add_argument("host")
    lock.add_argument("--reason", required=True)
    add("unlock", "unlock a host (staff)").add_argument("host")

    reserve = add(
        "reserve",
        "reserve a free host that fits for manual work; with --wait, wait in line for one",
    )
    target = reserve.add_mutually_exclusive_group(required=True)
    target.add_argument("--label", action="append", help="a label it must carry; repeat: AND")
    target.add_argument("--host", help="the host, by name")
    reserve.add_argument(
        "--for",
        dest="duration",
        type=parse_duration,
        required=True,
        metavar="DURATION",
        help="how long: 2h, 90m, 1h30m, 1d",
    )
    reserve.add_argument("--reason", help="shown on the host (default: the command)")
    reserve.add_argument(
        "--wait",
        action="store_true",
        help="with no free host, wait in the server's line until one is yours (Ctrl-C leaves)",
    )
    _interval(reserve, default=5.0)

    reservations = add("reservations", "your reservations, waiting or holding a host")
    reservations.add_argument(
        "--status",
        action="append",
        choices=["waiting", "active", "ended", "cancelled"],
        help="repeat: OR (default: waiting and active)",
    )
    reservations.add_argument("--everyone", action="store_true", help="everyone's, not yours")

    release = add("release", "end a reservation: free its host, or leave the line")
    release.add_argument("id", type=positive_id, metavar="ID", help="the reservation's id")
    release.add_argument("--reason", help="a note for the host's timeline")

    job = add("job", "a job: its status, host, tries and output")
    job.add_argument("id", type=positive_id, metavar="ID")
    job.add_argument("--output", action="store_true", help="print the job's whole output")
    return parser


def _interval(parser: argparse.ArgumentParser, default: float = 5.0) -> None:
    parser.add_argument(
        "--interval",
        type=float,
        default=default,
        metavar="S",
        help=f"seconds between looks ({default:g})",
    )


def run(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Parse the command line and run one command; the exit status."""
    options = build_parser().parse_args(argv)
    out = out or sys.stdout
    options.interval = max(0.05, getattr(options, "interval", 5.0))
    options.retries = max(0, options.retries)
    if options.command == "login":
        return cmd_login(options, out)
    url, token = credentials(options)
    try:
        return COMMANDS[options.command](Client(url, token, options), options, out)
    except ApiError as exc:
        raise CliError(explain(exc, url)) from exc


class _ShortRetries(logging.Filter):
    """The client's retry warnings in a line: the request and what failed, not urllib3's tale."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and record.args:
            error = record.args[0]
            if isinstance(error, ApiUnavailable):
                what = _network_reason(str(error.body)) if not error.status else error.status
                record.args = (f"{_request_of(error)}: {what}", *record.args[1:])
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """The `schedsite` console script."""
    logging.basicConfig(level=logging.WARNING, format="schedsite: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_ShortRetries())
    try:
        return run(argv)
    except CliError as exc:
        print(f"schedsite: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("schedsite: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`schedsite hosts | head`): what it read was all it wanted.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
