"""Joins the three migrations of session 14 made side by side: same-build-first, the queued-by-age
index and tester reservations (none touches another's tables)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0015_lead_same_build_first"),
        ("jobs", "0015_reserve_reservations"),
        ("jobs", "0015_tick_queued_by_age"),
    ]

    operations = []
