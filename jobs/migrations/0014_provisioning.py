"""Provisioning: a standalone job's own build, and the build a lease's runner must put on its
host first (docs/scheduling.md#provisioning)."""

from importlib import import_module

from django.db import migrations, models

# SQLite rebuilds jobs_job to add its column; the fair-share trigger of 0010 names that table,
# and SQLite refuses the rename while a trigger refers to it: off during the rebuild (as 0011).
_usage = import_module("jobs.migrations.0010_owner_usage_sqlite")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_estimate_changes_logged"),
    ]

    operations = [
        migrations.RunPython(_usage.drop_trigger, _usage.create_trigger),
        migrations.AddField(
            model_name="job",
            name="build",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="lease",
            name="provision_to",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.RunPython(_usage.create_trigger, _usage.drop_trigger),
    ]
