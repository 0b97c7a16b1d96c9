"""Load a lab description file (JSON, or YAML by extension) in one transaction."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from jobs import labfile


class Command(BaseCommand):
    help = "Load a lab file (JSON, or YAML by .yaml/.yml); a bad file is rejected whole."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file")

    def handle(self, *args: object, **options: object) -> None:
        try:
            result = labfile.import_lab(labfile.load(str(options["file"])))
        except labfile.LabFileError as exc:
            lines = "\n".join(f"  - {p}" for p in exc.problems)
            raise CommandError(f"{options['file']} rejected, nothing imported:\n{lines}") from exc
        self.stdout.write(f"imported {result}")
