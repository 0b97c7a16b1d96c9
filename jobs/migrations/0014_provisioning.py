"""Provisioning: a standalone job's own build, and the build a lease's runner must put on its
host first (docs/scheduling.md#provisioning)."""

from importlib import import_module

from django.db import migrations, models

# SQLite rebuilds jobs_job and jobs_lease, which the fair-share trigger names: off meanwhile (0010).
_usage = import_module("jobs.migrations.0010_owner_usage_sqlite")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0013_estimate_changes_logged"),
    ]

    operations = _usage.with_trigger_off(
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
    )
