# The lab digest on each tick (docs/performance.md): a steady-state tick compares a digest of
# the lab with the previous tick's and, when nothing changed, keeps that tick's plan and reasons.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("jobs", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedulertick",
            name="fingerprint",
            field=models.CharField(blank=True, max_length=40),
        ),
        migrations.AddField(
            model_name="schedulertick",
            name="unchanged",
            field=models.BooleanField(default=False),
        ),
    ]
