"""The protocol benchmark's CPU accounting: what the server, the client and the rest used."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench import protocol_load

pytestmark = pytest.mark.skipif(not Path("/proc/stat").exists(), reason="reads Linux's /proc")


BURN = "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass"


def test_a_groups_cpu_counts_its_members_and_the_ones_they_reaped():
    # A group leader (as gunicorn and qcluster are started) whose child burned and was reaped:
    # a recycled worker's time is in its parent's children's.
    leader = (
        "import subprocess, sys, time\n"
        f"subprocess.run([sys.executable, '-c', {BURN!r}], check=True)\n"
        "print('reaped', flush=True)\ntime.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", leader], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout.readline().strip() == "reaped"
        assert protocol_load.group_cpu(proc.pid) >= 0.25
        assert protocol_load.group_cpu(proc.pid + 10**7) == 0  # no such group
    finally:
        proc.kill()
        proc.wait()


def test_the_clock_splits_the_machines_busy_time():
    clock = protocol_load.CpuClock(server_pid=os.getpgrp())
    clock.start()
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    clock.stop()
    seconds = clock.seconds()
    assert seconds["client"] >= 0.15 and seconds["server"] >= 0.1
    assert seconds["scheduler"] == 0  # none was given
    assert seconds["rest_of_machine"] >= 0


def test_the_runners_poll_keeps_the_etag_of_its_last_list():
    answer = b'HTTP/1.1 304 Not Modified\r\nDate: x\r\netag: "abc"\r\n\r\n'
    assert protocol_load.etag_of(answer) == '"abc"'
    assert protocol_load.etag_of(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}") == ""
