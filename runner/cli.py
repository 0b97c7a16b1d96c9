"""The runner's command line, shared by `python -m runner` and `manage.py run_worker`."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
from collections.abc import Sequence
from typing import Any

from runner.client import Api
from runner.worker import Runner, RunnerConfig

log = logging.getLogger("schedsite.runner")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `run_worker`, shared by `manage.py run_worker` and `python -m runner`."""
    env = os.environ.get
    parser.add_argument("--worker", required=True, help="the worker this runner serves")
    parser.add_argument(
        "--api",
        default=env("SCHEDSITE_API"),
        help="base URL of the REST API, e.g. https://lab.example/api/ (env SCHEDSITE_API)",
    )
    parser.add_argument(
        "--token",
        default=env("SCHEDSITE_TOKEN"),
        help="the runner account's API token (env SCHEDSITE_TOKEN keeps it out of `ps`)",
    )
    parser.add_argument("--concurrency", type=int, default=4, help="jobs run at once (4)")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between polls (2)")
    parser.add_argument(
        "--grace", type=float, default=60.0, help="seconds jobs may finish after SIGTERM (60)"
    )
    parser.add_argument(
        "--heartbeat", type=float, default=None, help="lease heartbeat period (lease TTL / 3)"
    )
    parser.add_argument("--retries", type=int, default=5, help="retries of a failing API call")
    parser.add_argument(
        "--host-broken-exit-code",
        type=int,
        default=None,
        help="exit status by which a test reports the host broken (→ needs_repair)",
    )
    parser.add_argument("--output-tail", type=int, default=4000, help="characters of output kept")
    parser.add_argument(
        "--verify-cmd",
        default=env("SCHEDSITE_VERIFY_CMD"),
        metavar="CMD",
        help="shell-style command run for verify jobs (env SCHEDSITE_VERIFY_CMD)",
    )
    parser.add_argument(
        "--repair-cmd",
        default=env("SCHEDSITE_REPAIR_CMD"),
        metavar="CMD",
        help="shell-style command run for repair jobs (env SCHEDSITE_REPAIR_CMD)",
    )
    parser.add_argument(
        "--provision-cmd",
        default=env("SCHEDSITE_PROVISION_CMD"),
        metavar="CMD",
        help="shell-style command that puts a lease's provision_to build on its host before "
        "the test, given as SCHEDSITE_BUILD (env SCHEDSITE_PROVISION_CMD)",
    )
    parser.add_argument(
        "--provision-timeout",
        type=float,
        default=3600.0,
        help="seconds provisioning one host may take (3600)",
    )
    parser.add_argument("command", nargs="+", help="-- COMMAND [ARGS]: run once per job")


def split_command(option: str, value: str | None) -> list[str]:
    """A shell-style option value as an argument list; none or blank: no command."""
    try:
        return shlex.split(value or "")
    except ValueError as exc:  # an unclosed quote
        raise SystemExit(f"run_worker: {option} {value!r}: {exc}") from exc


def config_from_options(options: dict[str, Any]) -> RunnerConfig:
    """The runner's configuration from parsed options; SystemExit names what is wrong."""
    if not options.get("api") or not options.get("token"):
        raise SystemExit(
            "run_worker: --api and --token (or SCHEDSITE_API/SCHEDSITE_TOKEN) are needed"
        )
    command = list(options["command"])
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise SystemExit("run_worker: give the command to run after --")
    return RunnerConfig(
        worker=options["worker"],
        command=command,
        verify_command=split_command("--verify-cmd", options.get("verify_cmd")),
        repair_command=split_command("--repair-cmd", options.get("repair_cmd")),
        provision_command=split_command("--provision-cmd", options.get("provision_cmd")),
        provision_timeout=max(1.0, float(options.get("provision_timeout") or 3600.0)),
        api_url=options["api"],
        concurrency=max(1, int(options["concurrency"])),
        poll=max(0.05, float(options["poll"])),
        grace=max(0.0, float(options["grace"])),
        heartbeat=options.get("heartbeat"),
        output_tail=max(200, int(options["output_tail"])),
        host_broken_exit_code=options.get("host_broken_exit_code"),
    )


def run_from_options(options: dict[str, Any]) -> int:
    """Build a runner from parsed options, stop it gracefully on SIGTERM/SIGINT, run it."""
    config = config_from_options(options)
    runner = Runner(Api(options["api"], options["token"], retries=int(options["retries"])), config)

    def on_signal(signum: int, _frame: object) -> None:
        log.info("got %s", signal.Signals(signum).name)
        runner.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    return runner.run()


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m runner --worker W --api URL --token T -- COMMAND [ARGS]`."""
    parser = argparse.ArgumentParser(
        prog="python -m runner",
        description="The reference runner: run a worker's leased jobs over the REST API only.",
    )
    add_arguments(parser)
    options = vars(parser.parse_args(argv))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return run_from_options(options)
