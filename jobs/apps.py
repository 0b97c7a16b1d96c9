"""App configuration for suites, jobs, leases and the scheduler."""

from __future__ import annotations

from django.apps import AppConfig
from django.core.management import call_command
from django.db.models.signals import post_migrate


def create_cache_table(using: str = "default", **_kwargs: object) -> None:
    """Make the database cache's table, so `migrate` alone readies a database."""
    # Throttles and the login lockout count in the cache: without its table every request
    # would fail. createcachetable skips tables that exist and caches that are not in the
    # database (Redis).
    call_command("createcachetable", database=using, verbosity=0)


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Scheduling"

    def ready(self) -> None:
        # jobs.tasks imports the models, which cannot load while the app registry is filling
        # (django_q.signals too). schedsite.pgarrays registers the `in_array` lookup.
        from django_q.signals import post_spawn  # noqa: PLC0415

        import schedsite.pgarrays  # noqa: F401, PLC0415
        from hosts.signals import tick_wanted_signal  # noqa: PLC0415
        from jobs.scheduling.triggers import (  # noqa: PLC0415
            on_tick_wanted,
            on_worker_started,
            watch_lost_requests,
        )
        from jobs.tasks import install_schedule  # noqa: PLC0415

        tick_wanted_signal.connect(on_tick_wanted, dispatch_uid="jobs-tick-wanted")
        # A cluster asks for a tick as it starts (docs/scheduling.md#triggers).
        post_spawn.connect(on_worker_started, dispatch_uid="jobs-cluster-started")
        # And watches for a request another cluster lost, dying with it.
        post_spawn.connect(watch_lost_requests, dispatch_uid="jobs-lost-request-watcher")

        post_migrate.connect(install_schedule, sender=self, dispatch_uid="schedsite-schedule")
        post_migrate.connect(create_cache_table, sender=self, dispatch_uid="schedsite-cache")
        from schedsite.cache import install_schedule as install_cache_cull  # noqa: PLC0415

        post_migrate.connect(install_cache_cull, sender=self, dispatch_uid="schedsite-cache-cull")
