"""Fair share on SQLite too: the OwnerUsage trigger of migration 0006, in SQLite's dialect.

The demo (`make run`) and `make test` without PostgreSQL run on SQLite; without this trigger
nothing counted an owner's use and fair share ordered nobody (docs/scheduling.md#fair-share).
PostgreSQL keeps its own trigger (0006); this migration does nothing there.
"""

from __future__ import annotations

from django.db import migrations

# The same arithmetic as 0006: the finished lease's host-seconds added to the owner's total,
# decayed from the total's time to the release by the half-life. Timestamps are ISO text in
# UTC; julianday() reads them. A job without an owner counts for nobody (a NULL key would
# be given a fresh rowid by SQLite). POWER is SQLite's own (3.35+) or the one Django registers.
USAGE_TRIGGER = """
CREATE TRIGGER scheduler_owner_usage AFTER UPDATE OF released_at ON jobs_lease
FOR EACH ROW
WHEN OLD.released_at IS NULL AND NEW.released_at IS NOT NULL AND NEW.job_id IS NOT NULL
    AND EXISTS (
        SELECT 1 FROM jobs_job j
        WHERE j.id = NEW.job_id AND j.kind = 'test' AND j.owner_id IS NOT NULL
    )
BEGIN
    INSERT INTO jobs_ownerusage (owner_id, host_seconds, at)
    SELECT j.owner_id,
           max((julianday(NEW.released_at) - julianday(NEW.acquired_at)) * 86400.0, 0),
           NEW.released_at
    FROM jobs_job j WHERE j.id = NEW.job_id
    ON CONFLICT (owner_id) DO UPDATE SET
        host_seconds = host_seconds * POWER(
            0.5,
            max((julianday(excluded.at) - julianday(at)) * 86400.0, 0) / coalesce(
                (SELECT s.fair_share_half_life_hours * 3600.0
                 FROM jobs_schedulersettings s WHERE s.id = 1),
                86400.0
            )
        ) + excluded.host_seconds,
        at = max(at, excluded.at);
END;
"""


def create_trigger(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(USAGE_TRIGGER)


def drop_trigger(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute("DROP TRIGGER IF EXISTS scheduler_owner_usage")


def with_trigger_off(*operations: migrations.operations.base.Operation) -> list:
    """The operations with the trigger dropped before and made again after (both ways).

    SQLite adds or alters a column by rebuilding the table (a copy, then a rename), and refuses
    the rename of a table the trigger names: jobs_lease, jobs_job, jobs_schedulersettings,
    jobs_ownerusage. A later migration that changes one of them wraps its operations in this.
    """
    return [
        migrations.RunPython(drop_trigger, create_trigger),
        *operations,
        migrations.RunPython(create_trigger, drop_trigger),
    ]


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0009_outbox"),
    ]

    operations = [
        migrations.RunPython(create_trigger, drop_trigger),
    ]
