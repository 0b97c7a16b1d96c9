"""The wait-reason table keeps each reason as JSON text, in pages with room to update in place.

A tick after 100 changes rewrites about a thousand of its rows. As `jsonb` each write was
parsed; as text it is stored as sent, and a fill factor of 50 leaves room on each page for the
new version of a row, so PostgreSQL updates it in place (a HOT update) without touching the
key's index (docs/performance.md#the-wait-reason-table). Readers see the same decoded value.
"""

from django.db import migrations

import schedsite.model_fields


def _fill_factor(percent: int):
    def run(apps, schema_editor):  # noqa: ANN001, ANN202 - a migration's callable
        if schema_editor.connection.vendor != "postgresql":
            return  # SQLite has no fill factor
        schema_editor.execute(f"ALTER TABLE jobs_waitreasonclass SET (fillfactor = {percent})")

    return run


class Migration(migrations.Migration):
    dependencies = [("jobs", "0016_merge_session14")]

    operations = [
        migrations.AlterField(
            model_name="waitreasonclass",
            name="reason",
            field=schedsite.model_fields.JSONText(),
        ),
        migrations.RunPython(_fill_factor(50), _fill_factor(100)),
    ]
