"""The runner's loop: heartbeat the worker, take its leases, run the command, report results."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from runner.client import Api, ApiError, ApiUnavailable

log = logging.getLogger("schedsite.runner")

# Environment variables a test command must not see: the runner's credentials.
SECRET_ENV = ("SCHEDSITE_TOKEN",)
# What a job is for: a tester's test, or a maintenance job (check or repair its host).
TEST, VERIFY, REPAIR = "test", "verify", "repair"
# The option that gives the command for each maintenance kind; `--` COMMAND runs tests.
MAINTENANCE_OPTIONS = {VERIFY: "--verify-cmd", REPAIR: "--repair-cmd"}
HAND_BACK_REASON = "runner stopping: handed back before start"
LOST = "lease lost"  # a command's stop reason when its lease went: nothing is reported


@dataclass
class RunnerConfig:
    """How a runner behaves; the defaults suit a production lab server."""

    worker: str
    command: Sequence[str]
    api_url: str = ""
    verify_command: Sequence[str] = ()  # runs verify jobs; none: they fail with a message
    repair_command: Sequence[str] = ()  # runs repair jobs; likewise
    concurrency: int = 4
    poll: float = 2.0  # seconds between looks at the worker's leases
    grace: float = 60.0  # seconds running jobs get to finish after SIGTERM
    heartbeat: float | None = None  # lease heartbeat period; default: a third of the lease TTL
    output_tail: int = 4000  # characters of output sent as the job's message
    host_broken_exit_code: int | None = None  # the command's way to say "the DUT is broken"
    kill_timeout: float = 5.0  # seconds between SIGTERM and SIGKILL for a command
    # Puts a lease's provision_to build on its host before the test (SCHEDSITE_BUILD); none:
    # the runner starts the test as it is (docs/api.md#provisioning).
    provision_command: Sequence[str] = ()
    provision_timeout: float = 3600.0  # seconds provisioning one host may take

    def command_for(self, kind: str) -> Sequence[str]:
        """The command that runs a job of this kind; empty when this runner has none."""
        return {TEST: self.command, VERIFY: self.verify_command, REPAIR: self.repair_command}.get(
            kind, ()
        )


def job_kind(lease: dict) -> str:
    """The kind of a lease's job; a server that predates maintenance jobs sends none: a test."""
    return lease.get("kind") or lease["job"].get("kind") or TEST


def runs_here(lease: dict) -> bool:
    """Whether this runner runs the lease's job. A host held for a multi-host job that
    another worker's runner runs (its slot 0 host is there) is listed with `runs_here` false:
    leave it alone. A server that predates multi-host jobs sends none: ours."""
    return lease.get("runs_here", True) is not False


def hosts_by_role(lease: dict) -> dict[str, list[str]]:
    """The job's hosts by role, in slot order: {"dut": ["dut1", "dut2"], "ap": ["ap1"]} (a
    one-host job: {"": [its host]}), for SCHEDSITE_HOSTS."""
    hosts = lease.get("hosts") or [{"role": "", "hostname": lease["host"]["hostname"]}]
    roles: dict[str, list[str]] = {}
    for host in hosts:
        roles.setdefault(host.get("role") or "", []).append(host["hostname"])
    return roles


def provision_targets(lease: dict) -> list[tuple[str, str]]:
    """The (hostname, build) pairs the lease's job asks to provision first, in slot order: each
    host of the attempt whose lease has a provision_to (a one-host job: its own). None from a
    server that predates provisioning."""
    hosts = lease.get("hosts") or []
    found = [(h["hostname"], h["provision_to"]) for h in hosts if h.get("provision_to")]
    if not found and lease.get("provision_to"):
        found = [(lease["host"]["hostname"], lease["provision_to"])]
    return found


def start_order(lease: dict) -> tuple[int, int]:
    """Highest job priority first, then the lease taken first (the lowest id)."""
    return (-(lease["job"].get("priority") or 0), lease["id"])


class Runner:
    """Heartbeat the worker, take its leases, run the command for each, report the results."""

    def __init__(self, api: Api, config: RunnerConfig) -> None:
        self.api = api
        self.config = config
        self.stopping = threading.Event()  # SIGTERM: take no new leases
        self.killing = threading.Event()  # grace over (or a second signal): kill and abort
        self.runs: dict[int, JobRun] = {}  # lease id -> the run of its job
        self.waiting: dict[int, dict] = {}  # lease id -> a lease no slot is free for yet
        self.ignored: set[int] = set()
        self.lease_ttl = 600.0
        self.offline_timeout = 120.0
        self._last_beat = 0.0
        outcomes = ("passed", "failed", "aborted", "lost", "handed_back")
        self.results: dict[str, int] = dict.fromkeys(outcomes, 0)
        self._warned_kinds: set[str] = set()
        self._warned_lock = threading.Lock()

    # --- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Work until asked to stop; return the process exit status."""
        log.info(
            "runner for worker %s at %s: concurrency %d, command %s, verify %s, repair %s, "
            "provision %s",
            self.config.worker,
            self.api.base_url,
            self.config.concurrency,
            shlex.join(self.config.command),
            shlex.join(self.config.verify_command) or "none",
            shlex.join(self.config.repair_command) or "none",
            shlex.join(self.config.provision_command) or "none",
        )
        while not self.stopping.is_set():
            try:
                self.step()
            except ApiUnavailable as exc:
                log.warning("API unavailable, will try again: %s", exc)
            except ApiError as exc:
                if exc.status in (401, 403, 404):
                    # Wrong token, not this worker's runner, or no such worker: retrying is futile.
                    log.error("cannot work for worker %s: %s", self.config.worker, exc)
                    self.stopping.set()
                    self.shutdown()
                    return 2
                log.warning("API error, will try again: %s", exc)
            self.stopping.wait(self.config.poll)
        self.shutdown()
        return 0

    def step(self) -> None:
        """One pass: heartbeat the worker and its leases when due, start what fits."""
        self._reap()
        self._beat()
        self._take_leases()

    def stop(self) -> None:
        """Take no new leases; let running jobs finish within the grace period."""
        if self.stopping.is_set():
            self.kill()  # a second signal: stop now
        self.stopping.set()

    def kill(self) -> None:
        """Kill every running command and abort its job."""
        self.stopping.set()
        self.killing.set()

    def shutdown(self) -> None:
        """Hand back leases not yet started, wait out the grace period, then kill what runs."""
        self._reap()
        for lease in self._unstarted_leases():
            outcome = self.hand_back(lease)
            if outcome:
                self.results[outcome] += 1
        self.waiting.clear()
        if self.runs:
            log.info(
                "stopping: waiting up to %.0f s for %d job(s)", self.config.grace, len(self.runs)
            )
        deadline = time.monotonic() + self.config.grace
        while self._reap() and time.monotonic() < deadline and not self.killing.is_set():
            self._beat_while_stopping()
            time.sleep(0.1)
        if self._reap():
            log.warning("grace period over: killing %d job(s)", len(self.runs))
            self.killing.set()
            for run in list(self.runs.values()):
                run.join(self.config.kill_timeout + 30)
        self._reap()
        log.info("runner stopped: %s", ", ".join(f"{k} {v}" for k, v in self.results.items()))

    # --- pieces -----------------------------------------------------------------------------

    def _unstarted_leases(self) -> list[dict]:
        """The worker's leases whose jobs nobody started, including any not yet seen."""
        # One last look: the scheduler may have leased a host since the last poll, and such a
        # lease would otherwise sit until it expires (and flags its host for repair).
        try:
            leases = list(self.api.pages(f"workers/{self.config.worker}/leases/"))
        except ApiError as exc:
            log.warning("could not list leases while stopping: %s", exc)
            return list(self.waiting.values())
        return [
            lease
            for lease in leases
            if lease["job"]["status"] == "leased"
            and lease["id"] not in self.runs
            and runs_here(lease)
        ]

    def _reap(self) -> int:
        for lease_id, run in list(self.runs.items()):
            if not run.is_alive():
                self.runs.pop(lease_id)
                self.results[run.outcome] = self.results.get(run.outcome, 0) + 1
        return len(self.runs)

    def _beat(self) -> None:
        """When due, one heartbeat for the worker and every lease it holds; stop the ones gone.

        Due every `offline_timeout / 4` for the worker, and every heartbeat period while it
        holds leases (docs/api.md#the-runner-protocol-and-run_worker).
        """
        now = time.monotonic()
        held = sorted([*self.runs, *self.waiting])
        period = max(1.0, self.offline_timeout / 4)
        if held:
            period = min(period, self.heartbeat_period)
        if now - self._last_beat < period:
            return
        # The concurrency caps the worker's capacity on the server: the scheduler leases it no
        # more jobs than this runner starts at once (docs/api.md#worker-capacity).
        body = {"leases": held, "concurrency": self.config.concurrency}
        info = self.api.call("POST", f"workers/{self.config.worker}/heartbeat/", body)
        info = info if isinstance(info, dict) else {}
        self.lease_ttl = float(info.get("lease_ttl") or self.lease_ttl)
        self.offline_timeout = float(info.get("offline_timeout") or self.offline_timeout)
        self._last_beat = now
        gone = info.get("gone")
        if gone is None:  # a server that predates the bulk heartbeat: one call per lease
            gone = self._beat_each(held)
        for lease_id in gone:
            self._lost(lease_id)

    def _beat_while_stopping(self) -> None:
        """Keep running jobs' leases alive through the grace period, without the worker.

        A worker heartbeat would bring a stopping worker back online (docs/health.md#runners):
        the leases are beaten one by one, as the single heartbeat does not.
        """
        now = time.monotonic()
        if now - self._last_beat < self.heartbeat_period:
            return
        self._last_beat = now
        try:
            for lease_id in self._beat_each(sorted(self.runs)):
                self._lost(lease_id)
        except ApiError as exc:
            log.warning("could not heartbeat leases while stopping: %s", exc)

    def _beat_each(self, lease_ids: list[int]) -> list[int]:
        """Heartbeat leases one by one; return those gone (an unreachable API is retried)."""
        gone = []
        for lease_id in lease_ids:
            try:
                self.api.call("POST", f"leases/{lease_id}/heartbeat/")
            except ApiUnavailable as exc:
                log.warning("lease %s: heartbeat failed, will retry: %s", lease_id, exc)
            except ApiError as exc:
                log.info("lease %s: heartbeat refused: %s", lease_id, exc)
                gone.append(lease_id)
        return gone

    def _lost(self, lease_id: int) -> None:
        """A lease that is gone (released, aborted, expired, timed out): stop its job."""
        run = self.runs.get(lease_id)
        if run is not None:
            if run.reporting:
                # Our own result (or abort) ended the lease before this heartbeat reached the
                # server, or before the run was reaped: nothing was lost.
                log.debug("lease %s: ended by its job's own report", lease_id)
            else:
                log.warning("lease %s lost, stopping its job", lease_id)
            run.lost.set()
        self.waiting.pop(lease_id, None)

    @property
    def heartbeat_period(self) -> float:
        # At least every TTL/3 (docs/api.md#the-runner-protocol-and-run_worker), so one lost
        # heartbeat does not lose the lease.
        return self.config.heartbeat or max(0.2, self.lease_ttl / 3)

    def _take_leases(self) -> None:
        seen: set[int] = set()
        # With more leases than free slots, the most urgent job starts first: a host leased to
        # a priority-90 job must not sit idle while a priority-10 job runs.
        leases = sorted(self.api.pages(f"workers/{self.config.worker}/leases/"), key=start_order)
        for lease in leases:
            if not runs_here(lease):
                continue  # a host of a multi-host job another worker's runner runs
            lease_id = lease["id"]
            seen.add(lease_id)
            if lease_id in self.runs:
                continue
            job = lease["job"]
            if job["status"] != "leased":
                if lease_id not in self.ignored and lease_id not in self.waiting:
                    # Started by an earlier runner process we cannot reattach to: let it expire,
                    # so the scheduler requeues the job and flags the host (state unknown).
                    log.warning(
                        "lease %s: job %s is %s but not ours; leaving it to expire",
                        lease_id,
                        job["id"],
                        job["status"],
                    )
                    self.ignored.add(lease_id)
                continue
            if self.stopping.is_set():
                return
            if len(self.runs) >= self.config.concurrency:
                # No free slot: keep the lease alive until one frees up.
                self.waiting.setdefault(lease_id, lease)
                continue
            self.waiting.pop(lease_id, None)
            self._start(lease)
        for lease_id in list(self.waiting):
            if lease_id not in seen:  # released meanwhile (by staff, or expired)
                self.waiting.pop(lease_id)

    def _start(self, lease: dict) -> None:
        job = lease["job"]
        if self.config.provision_command and provision_targets(lease):
            # The run provisions first, then starts the job (a `start` with its build): until
            # then the job stays leased, its lease heartbeated with the runs' (docs/api.md).
            log.info(
                "%s job %s (%s): provisioning %s",
                job_kind(lease),
                job["id"],
                job["name"],
                ", ".join(f"{host} to {build}" for host, build in provision_targets(lease)),
            )
            run = JobRun(self, lease, provision=True)
            self.runs[lease["id"]] = run
            run.start()
            return
        try:
            self.api.call("POST", f"jobs/{job['id']}/start/", {"lease": lease["id"]})
        except ApiError as exc:
            if exc.status == 409:  # the lease moved on (released, expired) before we began
                log.info("lease %s: not started: %s", lease["id"], exc)
                return
            raise
        log.info(
            "%s job %s (%s) started on %s",
            job_kind(lease),
            job["id"],
            job["name"],
            ", ".join(host for hosts in hosts_by_role(lease).values() for host in hosts),
        )
        run = JobRun(self, lease)
        self.runs[lease["id"]] = run
        run.start()

    def hand_back(self, lease: dict) -> str | None:
        """Return a lease whose job nobody started; the job is queued again, using no retry.

        Returns the outcome to count: "handed_back", "aborted" when the server refused the
        hand-back and the job was aborted instead, or None when the lease had already ended.
        """
        try:
            self.api.call(
                "POST",
                f"leases/{lease['id']}/release/",
                {"requeue": True, "reason": HAND_BACK_REASON},
            )
        except ApiError as exc:
            if exc.status == 409:  # released, expired or aborted meanwhile: nothing to give up
                log.info("lease %s: already gone, nothing to hand back: %s", lease["id"], exc)
                return None
            # A server that does not let runners release (403) still lets them abort.
            log.warning("lease %s: could not hand back, aborting its job: %s", lease["id"], exc)
            aborted = self.abort_job(lease, "runner stopped before starting the job")
            return "aborted" if aborted else None
        log.info("lease %s: job %s handed back to the queue", lease["id"], lease["job"]["id"])
        return "handed_back"

    def missing_command(self, kind: str) -> str:
        """The message failing a job this runner has no command for; logs it once per kind."""
        option = MAINTENANCE_OPTIONS.get(kind)
        if option:
            message = (
                f"runner on worker {self.config.worker} has no {option}: it cannot {kind} hosts; "
                f"start the runner with {option}"
            )
        else:
            message = (
                f"runner on worker {self.config.worker} does not know jobs of kind {kind!r}: "
                "upgrade the runner"
            )
        with self._warned_lock:
            first = kind not in self._warned_kinds
            self._warned_kinds.add(kind)
        if first:
            log.warning("%s (failing such jobs)", message)
        return message

    def abort_job(self, lease: dict, reason: str) -> bool:
        """Give up a job this worker holds; False if the API refused (it ended already)."""
        job = lease["job"]
        try:
            self.api.call("POST", f"jobs/{job['id']}/abort/", {"reason": reason})
        except ApiError as exc:
            log.warning("job %s: could not abort: %s", job["id"], exc)
            return False
        log.info("job %s aborted: %s", job["id"], reason)
        return True


class JobRun(threading.Thread):
    """Run the command for one lease, stop it if the lease is lost, then report its result."""

    def __init__(self, runner: Runner, lease: dict, *, provision: bool = False) -> None:
        super().__init__(name=f"lease-{lease['id']}", daemon=True)
        self.provision = provision  # run the provision command, and `start`, first
        self.runner = runner
        self.lease = lease
        self.job = lease["job"]
        self.kind = job_kind(lease)
        self.command = list(runner.config.command_for(self.kind))
        self.outcome = "lost"
        self.lost = threading.Event()  # set by the runner when the lease's heartbeat says gone
        # Set before this run reports its result or aborts its job: from then on the lease may
        # end at the runner's own request, and a heartbeat saying "gone" is no loss.
        self.reporting = False
        self._tail: list[str] = []
        self._tail_len = 0
        # Where the command may write the hostnames it found broken, one a line
        # (SCHEDSITE_BROKEN_HOSTS_FILE): a multi-host job's way to name which host broke.
        self.broken_file = ""

    def environment(self) -> dict[str, str]:
        """What the command learns about its job, host and suite."""
        host, job = self.lease["host"], self.job
        env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV}
        env.update(
            {
                "SCHEDSITE_API": self.runner.api.base_url,
                "SCHEDSITE_WORKER": self.runner.config.worker,
                "SCHEDSITE_LEASE_ID": str(self.lease["id"]),
                "SCHEDSITE_HOST": host["hostname"],  # a multi-host job's slot 0 host
                # Every host of the job by role, as JSON: {"dut": ["dut1"], "ap": ["ap1"]}.
                "SCHEDSITE_HOSTS": json.dumps(hosts_by_role(self.lease)),
                "SCHEDSITE_BROKEN_HOSTS_FILE": self.broken_file,
                "SCHEDSITE_HOST_LABELS": ",".join(host.get("labels") or ()),
                "SCHEDSITE_HOST_BUILD": host.get("current_build") or "",
                "SCHEDSITE_JOB_ID": str(job["id"]),
                "SCHEDSITE_JOB_KIND": self.kind,
                "SCHEDSITE_JOB_NAME": job["name"],
                "SCHEDSITE_JOB_LABELS": ",".join(job.get("labels") or ()),
                "SCHEDSITE_JOB_ATTEMPT": str(job["attempts"]),
                "SCHEDSITE_JOB_TIMEOUT": str(job["timeout"]),
                # Maintenance jobs belong to no suite: null, or absent from older answers.
                "SCHEDSITE_SUITE_ID": str(job.get("suite") or ""),
                "SCHEDSITE_SUITE": job.get("suite_name") or "",
                "SCHEDSITE_BUILD": job.get("build") or "",
            }
        )
        return env

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # a thread must never die silently: the lease would just expire
            log.exception("lease %s: runner error", self.lease["id"])

    def _run(self) -> None:
        if self.provision and not self._provision():
            return
        if not self.command:
            # Failing at once, rather than leaving the lease to expire, tells the host's
            # events and the staff which option this runner lacks.
            self._complete("failed", self.runner.missing_command(self.kind), host_ok=True)
            return
        fd, self.broken_file = tempfile.mkstemp(prefix="schedsite-broken-", suffix=".txt")
        os.close(fd)
        try:
            self._run_command()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.broken_file)

    def _run_command(self) -> None:
        timeout = float(self.job.get("timeout") or 0)
        status, stop_reason = self._execute(self.command, self.environment(), timeout)
        if stop_reason == LOST:
            return
        if status is None:
            self._complete("failed", stop_reason, host_ok=True)
            return
        self._report(status, stop_reason)

    def _execute(
        self, command: Sequence[str], env: dict[str, str], timeout: float
    ) -> tuple[int | None, str]:
        """Run a command to its end, its output's tail kept: (exit status, why it was stopped).

        The status is None when it could not start (the reason says why) or its lease was lost
        (the reason is LOST: it was killed, and nothing is to be reported).
        """
        self._tail, self._tail_len = [], 0
        try:
            proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: a kill reaches its children
            )
        except OSError as exc:
            return None, f"could not run {command[0]}: {exc}"
        reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        reader.start()
        started = time.monotonic()
        stop_reason = ""
        while proc.poll() is None:
            now = time.monotonic()
            if self.runner.killing.is_set():
                stop_reason = "runner stopped (grace period over) while the job ran"
            elif timeout and now - started > timeout:
                stop_reason = f"timed out after {timeout:.0f} s"
            elif self.lost.is_set():
                self._kill(proc)
                reader.join(5)
                return None, LOST
            if stop_reason:
                self._kill(proc)
                break
            time.sleep(0.1)
        reader.join(5)
        return proc.wait(), stop_reason

    def _provision(self) -> bool:
        """Put the job's build on each host whose lease asks for it, then start the job with
        the build; True when the test may run.

        A failure (an exit status other than 0, or a timeout) completes the job as the host's
        failure: provision_failed, host_ok false (a multi-host job: that host in hosts_ok), the
        output's tail as the message, so the host is repaired and the job retried elsewhere.
        """
        config = self.runner.config
        targets = provision_targets(self.lease)
        took: list[float] = []
        for hostname, build in targets:
            env = {**self.environment(), "SCHEDSITE_HOST": hostname, "SCHEDSITE_BUILD": build}
            began = time.monotonic()
            status, stop_reason = self._execute(
                config.provision_command, env, config.provision_timeout
            )
            seconds = round(time.monotonic() - began, 3)
            if stop_reason == LOST:
                return False
            if status == 0 and not stop_reason:
                log.info(
                    "job %s: %s provisioned to %s in %.1f s",
                    self.job["id"],
                    hostname,
                    build,
                    seconds,
                )
                took.append(seconds)
                continue
            output = "".join(self._tail)[-config.output_tail :].rstrip("\n")
            why = stop_reason or f"exit status {status}"
            said = f"provisioning {hostname} to {build} failed"
            message = "\n".join(part for part in (said, output, f"[{why}]") if part)
            # A command that could not start says nothing of the host; else the host is in an
            # unknown state (a half-written image, say): it goes to repair.
            host_ok, hosts_ok = status is None, None
            if not host_ok and len(self.lease.get("hosts") or ()) > 1:
                host_ok, hosts_ok = True, {hostname: False}  # only that host of the job
            self._complete(
                "failed",
                message,
                host_ok=host_ok,
                hosts_ok=hosts_ok,
                provision_failed=True,
                provision_seconds=seconds,
            )
            return False
        body = {
            "lease": self.lease["id"],
            "build": targets[0][1],
            "provision_seconds": round(sum(took) / len(took), 3),
        }
        try:
            self.runner.api.call("POST", f"jobs/{self.job['id']}/start/", body)
        except ApiError as exc:
            # 409: the lease ended while the host was provisioned (released, expired).
            log.warning("job %s: not started after provisioning: %s", self.job["id"], exc)
            return False
        log.info("%s job %s (%s) started", self.kind, self.job["id"], self.job["name"])
        return True

    def _report(self, status: int, stop_reason: str) -> None:
        """Report how the command ended: aborted, failed by a stop, or by its exit status."""
        config = self.runner.config
        output = "".join(self._tail)[-config.output_tail :]
        if stop_reason.startswith("runner stopped"):
            self.reporting = True
            if self.runner.abort_job(self.lease, stop_reason):
                self.outcome = "aborted"
            return
        if stop_reason:
            self._complete("failed", f"{output}\n[{stop_reason}]".lstrip(), host_ok=True)
            return
        result = "passed" if status == 0 else "failed"
        # A maintenance job's result is itself the verdict on the host; only a test can say
        # "the DUT is broken" besides its own result: every host of it by the exit status,
        # some hosts by naming them in SCHEDSITE_BROKEN_HOSTS_FILE.
        host_ok = (
            self.kind != TEST
            or config.host_broken_exit_code is None
            or status != config.host_broken_exit_code
        )
        broken = self._broken_hosts() if self.kind == TEST else []
        message = f"{output}\n[exit status {status}]".lstrip()
        if host_ok and broken:
            self._complete(result, message, host_ok=True, hosts_ok=dict.fromkeys(broken, False))
        else:
            self._complete(result, message, host_ok=host_ok)

    def _broken_hosts(self) -> list[str]:
        """The job's hosts the command named broken in its file (others are ignored)."""
        try:
            with open(self.broken_file, encoding="utf-8") as fh:
                named = {line.strip() for line in fh if line.strip()}
        except OSError:
            return []
        ours = [host for hosts in hosts_by_role(self.lease).values() for host in hosts]
        unknown = named - set(ours)
        if unknown:
            log.warning(
                "job %s: %s named broken, not hosts of the job; ignored",
                self.job["id"],
                ", ".join(sorted(unknown)),
            )
        return [host for host in ours if host in named]

    def _read(self, proc: subprocess.Popen) -> None:
        assert proc.stdout is not None
        limit = self.runner.config.output_tail
        for raw in iter(proc.stdout.readline, b""):
            line = raw.decode("utf-8", errors="replace")
            self._tail.append(line)
            self._tail_len += len(line)
            while self._tail_len > limit and len(self._tail) > 1:
                self._tail_len -= len(self._tail.pop(0))

    def _kill(self, proc: subprocess.Popen) -> None:
        for sig, wait in ((signal.SIGTERM, self.runner.config.kill_timeout), (signal.SIGKILL, 5)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _complete(
        self,
        result: str,
        message: str,
        *,
        host_ok: bool,
        hosts_ok: dict | None = None,
        provision_failed: bool = False,
        provision_seconds: float | None = None,
    ) -> None:
        body = {"lease": self.lease["id"], "result": result, "message": message, "host_ok": host_ok}
        if hosts_ok:
            body["hosts_ok"] = hosts_ok
        if provision_failed:
            body["provision_failed"] = True
            body["provision_seconds"] = provision_seconds
        self.reporting = True
        try:
            self.runner.api.call("POST", f"jobs/{self.job['id']}/complete/", body)
        except ApiError as exc:
            # 409: the lease ended first (expired, released by staff); the result is moot.
            log.warning("job %s: result %s not recorded: %s", self.job["id"], result, exc)
            return
        self.outcome = result
        log.info("job %s (%s) %s", self.job["id"], self.job["name"], result)
