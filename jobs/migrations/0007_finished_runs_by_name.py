"""The index behind `ordering: size`'s run-time medians, and the settings row every tick reads.

The row is created here so that reading the settings is one SELECT from the first tick on
(SchedulerSettings.load() still creates it if someone deleted it).
"""

from django.conf import settings
from django.db import migrations, models


def create_settings_row(apps, schema_editor):
    apps.get_model("jobs", "SchedulerSettings").objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0004_reserved_names"),
        ("jobs", "0006_scheduler_settings"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status__in", ["passed", "failed"])),
                fields=["name", "-finished_at"],
                name="job_finished_by_name",
            ),
        ),
        migrations.RunPython(create_settings_row, migrations.RunPython.noop),
    ]
