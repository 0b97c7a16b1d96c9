"""App configuration for suites, jobs, leases and the scheduler."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        from jobs.tasks import install_schedule

        post_migrate.connect(install_schedule, sender=self, dispatch_uid="schedsite-schedule")
