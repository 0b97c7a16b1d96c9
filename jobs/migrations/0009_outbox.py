"""The jobs outbox: what a state move did, written in its own transaction (jobs/outbox.py)."""

import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0008_wait_reasons_lz4"),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboxEntry",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("jobs_ended", "Jobs of suites ended"),
                            ("hosts_repair_failed", "Hosts reached repair_failed"),
                        ],
                        max_length=30,
                    ),
                ),
                ("payload", models.JSONField()),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("handled_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name_plural": "outbox entries",
                "indexes": [
                    models.Index(
                        condition=models.Q(("handled_at", None)),
                        fields=["id"],
                        name="outbox_unhandled",
                    )
                ],
            },
        ),
    ]
