"""How the long-running demo commands stop: at the end of a step, on SIGINT or SIGTERM."""

from __future__ import annotations

import signal


class StopRequest:
    """Set by SIGINT or SIGTERM (or by the command itself); the command's loop checks it."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGINT, self.request)
        signal.signal(signal.SIGTERM, self.request)

    def request(self, *_: object) -> None:
        self.requested = True
