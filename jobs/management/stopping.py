"""How the long-running demo commands stop: at the end of a step, on SIGINT, SIGTERM or SIGHUP,
and how the processes they start stop with them."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # linux/prctl.h


class StopRequest:
    """Set by SIGINT, SIGTERM or SIGHUP (or by the command itself); the command's loop checks it.

    SIGHUP is what closing the terminal sends: it stops the command as Ctrl-C does, rather than
    killing it on the spot and leaving the processes it started behind.
    """

    def __init__(self) -> None:
        self.requested = False
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(signum, self.request)

    def request(self, *_: object) -> None:
        self.requested = True


def die_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` that sends the child `signum` when this process dies, even by SIGKILL.

    Linux only (prctl PR_SET_PDEATHSIG); elsewhere None, and only a clean stop ends the
    children. The signal reaches the child itself, not what it forks: a child that has workers
    (qcluster) stops them on SIGTERM.
    """
    if not sys.platform.startswith("linux"):
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    prctl = libc.prctl  # looked up here: the child, between fork and exec, only calls it
    parent = os.getpid()

    def arm() -> None:
        prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the call: no signal would come
            os.kill(os.getpid(), signum)

    return arm
