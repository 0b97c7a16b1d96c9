"""Delete a host and its history for real: an admin's tool (docs/deployment.md#purging-a-host)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from hosts.models import Host
from jobs.services.health import host_purge, host_purge_counts
from schedsite.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Delete a host with its leases, events and maintenance jobs. Deleting a host with "
        "history through the API or UI only retires it; this removes it. --yes to do it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("hostname")
        parser.add_argument("--yes", action="store_true", help="Purge: without it, only show.")

    def handle(self, *args: object, **options: object) -> None:
        host = Host.objects.filter(hostname=options["hostname"]).first()
        if host is None:
            raise CommandError(f"no host {options['hostname']}")
        if not options["yes"]:
            counts = host_purge_counts(host)
            listed = ", ".join(f"{n} {what}" for what, n in counts.items())
            raise CommandError(f"would purge {host.hostname} ({listed}); add --yes to do it")
        try:
            counts = host_purge(host=host, by="manage.py purge_host")
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(
            f"purged {host.hostname}: " + ", ".join(f"{n} {w}" for w, n in counts.items())
        )
