"""App configuration for notifications."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        # These import the apps' models, which cannot load while the registry fills.
        from jobs import outbox, signals  # noqa: PLC0415
        from notifications import events, queue, services, tasks  # noqa: PLC0415

        # The moves write the outbox in their own transactions; this app takes it.
        outbox.connect(outbox.Reader(wake=queue.wake_outbox, wants_ended=events.wants_ended))
        # A suite's `notify` is this app's: checked before it is submitted, recorded with it.
        signals.suite_notify_checked.connect(
            services.on_suite_notify_checked, dispatch_uid="notify-check"
        )
        signals.suite_notify_chosen.connect(
            services.on_suite_notify_chosen, dispatch_uid="notify-set"
        )
        post_migrate.connect(tasks.install_schedule, sender=self, dispatch_uid="notify-sweep")
