"""Create (or get) a worker's runner account, link it to the worker, and print its API token."""

from __future__ import annotations

from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError
from rest_framework.authtoken.models import Token

from hosts import services
from schedsite.errors import ServiceError


class Command(BaseCommand):
    help = (
        "Create or get the runner account of WORKER (in group runners), link it as the "
        "worker's runner (creating the worker if missing) and print the account's API token."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("worker", help="worker name")
        parser.add_argument("--username", help="runner account name (default runner-WORKER)")

    def handle(self, *args: object, **options: object) -> None:
        try:
            worker, user = services.worker_runner_ensure(
                worker_name=str(options["worker"]),
                username=options.get("username"),  # type: ignore[arg-type]
                by="manage.py create_runner",
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        token, _ = Token.objects.get_or_create(user=user)
        self.stderr.write(f"{user.get_username()} is the runner of worker {worker.name}; token:")
        # Only the token on stdout, so that TOKEN=$(manage.py create_runner w1) works.
        self.stdout.write(token.key)
