"""The scheduler setting same_build_first_minutes (docs/scheduling.md#same-build-first)."""

from importlib import import_module

import django.core.validators
from django.db import migrations, models

# SQLite rebuilds jobs_schedulersettings, which the fair-share trigger names: off meanwhile (0010).
_usage = import_module("jobs.migrations.0010_owner_usage_sqlite")


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0014_provisioning"),
    ]

    operations = _usage.with_trigger_off(
        migrations.AddField(
            model_name="schedulersettings",
            name="same_build_first_minutes",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Within a priority, jobs a free host already carries the build of go "
                "before jobs that would need a reimage, until those have waited this many "
                "minutes; 0 = off (0–10080).",
                validators=[django.core.validators.MaxValueValidator(10080)],
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("same_build_first_minutes__lte", 10080)),
                name="scheduler_settings_same_build_first_range",
            ),
        ),
    )
