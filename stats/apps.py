"""App configuration for the lab statistics."""

from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


class StatsConfig(AppConfig):
    name = "stats"
    verbose_name = "Lab statistics"

    def ready(self) -> None:
        # stats.tasks imports the models, which cannot load while the registry fills.
        from stats import tasks  # noqa: PLC0415

        post_migrate.connect(tasks.install_schedule, sender=self, dispatch_uid="lab-rollup")
