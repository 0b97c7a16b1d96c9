"""App configuration for notifications."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # These import the apps' models, which cannot load while the registry fills.
        from jobs import outbox  # noqa: PLC0415
        from notifications import events, queue, tasks  # noqa: PLC0415

        # The moves write the outbox in their own transactions; this app takes it.
        outbox.connect(outbox.Reader(wake=queue.wake_outbox, wants_ended=events.wants_ended))
        post_migrate.connect(tasks.install_schedule, sender=self, dispatch_uid="notify-sweep")
