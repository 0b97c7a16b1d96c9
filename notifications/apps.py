"""App configuration for notifications."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # The receivers import the apps' models, which cannot load while the registry fills.
        from jobs.signals import hosts_moved, jobs_ended  # noqa: PLC0415
        from notifications import events, tasks  # noqa: PLC0415

        jobs_ended.connect(events.on_jobs_ended, dispatch_uid="notify-suites")
        hosts_moved.connect(events.on_hosts_moved, dispatch_uid="notify-hosts")
        post_migrate.connect(tasks.install_schedule, sender=self, dispatch_uid="notify-sweep")
