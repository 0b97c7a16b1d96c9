# Provisioning: when a host was last provisioned, the `provisioned` event and a row per provisioning.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0008_repair_rounds"),
    ]

    operations = [
        migrations.AddField(
            model_name="host",
            name="provisioned_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="hostevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("created", "Created"),
                    ("updated", "Updated"),
                    ("deleted", "Deleted"),
                    ("status", "Status changed"),
                    ("locked", "Locked"),
                    ("unlocked", "Unlocked"),
                    ("leased", "Leased"),
                    ("started", "Job started"),
                    ("completed", "Job completed"),
                    ("released", "Released"),
                    ("expired", "Lease expired"),
                    ("timed_out", "Job timed out"),
                    ("reserved", "Reserved"),
                    ("extended", "Reservation extended"),
                    ("paused", "Worker paused"),
                    ("resumed", "Worker resumed"),
                    ("capacity", "Capacity changed"),
                    ("retired", "Retired"),
                    ("retried", "Job retried"),
                    ("preempted", "Job preempted"),
                    ("provisioned", "Provisioned"),
                ],
                max_length=20,
            ),
        ),
        migrations.CreateModel(
            name="Provision",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("hostname", models.CharField(max_length=255)),
                ("board", models.CharField(blank=True, max_length=100)),
                ("build", models.CharField(max_length=200)),
                ("from_build", models.CharField(blank=True, max_length=200)),
                (
                    "result",
                    models.CharField(
                        choices=[("ok", "Provisioned"), ("failed", "Provisioning failed")],
                        max_length=10,
                    ),
                ),
                ("seconds", models.FloatField(blank=True, null=True)),
                ("lease_id", models.BigIntegerField(blank=True, null=True)),
                ("job_id", models.BigIntegerField(blank=True, null=True)),
                (
                    "created_at",
                    models.DateTimeField(db_index=True, default=django.utils.timezone.now),
                ),
                (
                    "host",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="provisions",
                        to="hosts.host",
                    ),
                ),
            ],
            options={
                "ordering": ["-created_at", "-id"],
                "indexes": [
                    models.Index(
                        fields=["board", "result", "-created_at"],
                        name="hosts_provi_board_e45bdf_idx",
                    )
                ],
            },
        ),
    ]
