"""Build the demo lab (workers, hosts, users, suites) if the database has no hosts yet."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from jobs import demo


class Command(BaseCommand):
    help = "Seed a demo lab with users admin/admin (staff) and alice/alice (tester)."

    def handle(self, *args: object, **options: object) -> None:
        self.stdout.write(demo.seed())
