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


def test_a_parents_cpu_counts_its_live_and_its_reaped_children():
    burn = [
        sys.executable,
        "-c",
        "import time; t = time.process_time()\nwhile time.process_time() - t < 0.3: pass",
    ]
    before = protocol_load.server_cpu(os.getpid())
    subprocess.run(burn, check=True)  # reaped: its time is in our children's
    assert protocol_load.server_cpu(os.getpid()) - before >= 0.25


def test_the_clock_splits_the_machines_busy_time():
    clock = protocol_load.CpuClock(os.getpid())
    clock.start()
    t = time.process_time()
    while time.process_time() - t < 0.2:
        pass
    clock.stop()
    seconds = clock.seconds()
    assert seconds["client"] >= 0.15 and seconds["server"] >= 0.1
    assert seconds["rest_of_machine"] >= 0
