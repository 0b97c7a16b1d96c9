"""Write the lab in the import_lab format."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandParser

from jobs import labexport


class Command(BaseCommand):
    help = "Write workers, hosts and unfinished suites and jobs in the lab-file format."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", nargs="?", help="output file (default: standard output)")
        parser.add_argument(
            "--format",
            choices=["json", "yaml"],
            default=None,
            help="default: by the file's extension, else JSON",
        )

    def handle(self, *args: object, **options: object) -> None:
        target = options["file"]
        fmt = options["format"] or (
            "yaml" if target and str(target).endswith((".yaml", ".yml")) else "json"
        )
        text = labexport.dump(labexport.export_lab(), fmt)
        if target:
            Path(str(target)).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {target}")
        else:
            self.stdout.write(text, ending="")
