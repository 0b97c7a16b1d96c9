"""Compress each tick's wait-reason table with lz4 instead of pglz (PostgreSQL).

At 100,000 queued jobs the table is about 290 KB of JSON a tick; pglz took about 3 ms of a
churn tick to compress it, lz4 about 0.5 ms, for a stored row about a fifth larger
(docs/performance.md#the-incremental-tick). A server built without lz4 keeps pglz.
"""

from django.db import migrations

LZ4 = """
DO $$
BEGIN
    ALTER TABLE jobs_schedulertick ALTER COLUMN wait_reasons SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
    RAISE NOTICE 'lz4 is not available: wait reasons stay compressed with pglz';
END $$;
"""
PGLZ = "ALTER TABLE jobs_schedulertick ALTER COLUMN wait_reasons SET COMPRESSION pglz"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LZ4)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PGLZ)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0007_lab_change_ids")]

    operations = [migrations.RunPython(forwards, backwards)]
