"""The wait reasons move from each tick's row to a table of one row per class of queued jobs.

A tick wrote its whole table (one JSON value, about 1.2 MB at 100,000 queued jobs with 5 %
multi-host) into its own row, a third of a tick after a change; it now writes only the classes
whose reason changed (docs/performance.md#the-wait-reason-table). The rows start empty: the
next tick that plans writes them all, and until then the queue says "waiting for the next
scheduler tick".
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0011_multi_host")]

    operations = [
        migrations.CreateModel(
            name="WaitReasonClass",
            fields=[
                ("key", models.TextField(primary_key=True, serialize=False)),
                ("reason", models.JSONField()),
            ],
        ),
        migrations.RemoveField(model_name="schedulertick", name="wait_reasons"),
    ]
