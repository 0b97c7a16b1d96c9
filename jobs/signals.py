"""Signals the job and host state machines send, for the apps built on top (notifications)."""

from __future__ import annotations

from django.dispatch import Signal

# After the transaction that ended some jobs commits: `jobs`, a queryset of the jobs ended,
# `status`, the status they ended in, and `known`, the ended jobs as the sender held them (with
# the relations it had read), or () when it held none. Sent after commit so that a receiver sees
# every job that a concurrent transaction ended too (the last of two jobs ending at once sees
# both); `known` lets a receiver skip its query when what was read already rules it out.
jobs_ended = Signal()

# Inside the transaction that moved some hosts: `host_ids`, `to` (the new status), `at` and
# `why`. A receiver writes in the same transaction, so its rows exist exactly when the move does.
hosts_moved = Signal()
