"""A job's estimated_duration changed while it holds hosts is a change the plan reads: its hosts'
busy_until (the holder's expected start, docs/scheduling.md#holds-and-backfill). The change
log's job trigger (0007) logs it too, so the tick re-reads those hosts instead of copying the
last plan. PostgreSQL only, like the log."""

from django.db import migrations


def _function(extra: str) -> str:
    return f"""
CREATE OR REPLACE FUNCTION scheduler_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    SELECT array_agg(n.id) INTO changed FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE o.status = 'queued' OR n.status = 'queued' OR o.priority <> n.priority
          OR o.suite_id IS DISTINCT FROM n.suite_id{extra};
    IF changed IS NOT NULL THEN
        INSERT INTO scheduler_lab_change (source, ids) VALUES (TG_TABLE_NAME, changed);
    END IF;
    RETURN NULL;
END $$;
"""


def forward(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        extra = "\n          OR o.estimated_duration IS DISTINCT FROM n.estimated_duration"
        schema_editor.execute(_function(extra), params=None)


def backward(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_function(""), params=None)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0012_wait_reason_classes")]

    operations = [migrations.RunPython(forward, backward)]
