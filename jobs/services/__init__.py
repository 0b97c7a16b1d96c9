"""State changes of suites, jobs and leases, grouped by who asks for them; each one is atomic.

Callers use `from jobs import services; services.suite_submit(...)`: this package re-exports
every action, and the scheduler tick from `jobs.scheduling.tick`.
"""

from jobs.scheduling.expiry import job_timeout_overdue, lease_expire_overdue
from jobs.scheduling.tick import (
    IDEMPOTENCY_KEY_LIFETIME,
    TickSummary,
    idempotency_keys_purge,
    scheduler_tick,
    tick_history_prune,
)
from jobs.services.health import host_purge, host_repair_now, host_verify_now
from jobs.services.hosts import host_delete, host_set_status, host_update, hosts_bulk_health
from jobs.services.reservations import (
    lease_extend,
    lease_reserve,
    reservation_cancel,
    reservation_check_manager,
    reservation_end,
    reservation_position,
    reservation_request,
    reservation_why,
)
from jobs.services.runner_protocol import (
    job_complete,
    job_start,
    lease_hand_back,
    lease_heartbeat,
    lease_job_abort,
    lease_job_complete,
    lease_job_heartbeat,
    lease_job_start,
    worker_leases_heartbeat,
)
from jobs.services.scheduler_settings import (
    scheduler_settings_clean,
    settings_value,
    update_scheduler_settings,
)
from jobs.services.staff import job_abort, job_set_priority, lease_release, suite_abort
from jobs.services.submission import JobSpec, job_submit, suite_prepare, suite_submit

__all__ = [
    "IDEMPOTENCY_KEY_LIFETIME",
    "JobSpec",
    "TickSummary",
    "host_delete",
    "host_purge",
    "host_repair_now",
    "host_set_status",
    "host_update",
    "host_verify_now",
    "hosts_bulk_health",
    "idempotency_keys_purge",
    "job_abort",
    "job_complete",
    "job_set_priority",
    "job_start",
    "job_submit",
    "job_timeout_overdue",
    "lease_expire_overdue",
    "lease_extend",
    "lease_hand_back",
    "lease_heartbeat",
    "lease_job_abort",
    "lease_job_complete",
    "lease_job_heartbeat",
    "lease_job_start",
    "lease_release",
    "lease_reserve",
    "reservation_cancel",
    "reservation_position",
    "reservation_request",
    "reservation_why",
    "reservation_check_manager",
    "reservation_end",
    "scheduler_settings_clean",
    "scheduler_tick",
    "settings_value",
    "suite_abort",
    "suite_prepare",
    "suite_submit",
    "tick_history_prune",
    "update_scheduler_settings",
    "worker_leases_heartbeat",
]
