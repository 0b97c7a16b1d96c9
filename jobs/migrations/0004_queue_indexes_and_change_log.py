"""Reads that do not scan the queue: partial indexes for the tick's every-time checks, and the
lab's change log, whose triggers note every statement that writes what the tick plans from.

PostgreSQL only (docs/performance.md#what-was-changed); elsewhere every tick plans.
"""

from django.db import migrations, models

# Tables the plan reads, written by statements of any kind: one log row per statement.
WHOLE_TABLES = ("hosts_host", "hosts_host_labels", "hosts_label", "jobs_suite")

CREATE = """
CREATE TABLE scheduler_lab_change (
    id bigserial PRIMARY KEY,
    source text NOT NULL
);
CREATE FUNCTION scheduler_lab_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scheduler_lab_change (source) VALUES (TG_TABLE_NAME);
    RETURN NULL;
END $$;
"""
WHOLE_TABLE_TRIGGER = """
CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table}
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();
"""
# Heartbeats rewrite active leases many times a second: only taking, moving and releasing a
# lease count, so updates are logged per row and only when those columns change.
LEASE_TRIGGERS = """
CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR DELETE OR TRUNCATE ON jobs_lease
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();
CREATE TRIGGER scheduler_lab_changed_update AFTER UPDATE ON jobs_lease FOR EACH ROW
WHEN (OLD.released_at IS DISTINCT FROM NEW.released_at OR OLD.job_id IS DISTINCT FROM NEW.job_id
      OR OLD.host_id IS DISTINCT FROM NEW.host_id)
EXECUTE FUNCTION scheduler_lab_changed();
"""
# A job's start, heartbeat or end rewrites its row but not the plan, which reads queued jobs and
# the priority and suite of the jobs holding hosts: an UPDATE counts only if it touched those.
JOB_TRIGGERS = """
CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR DELETE OR TRUNCATE ON jobs_job
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();
CREATE FUNCTION scheduler_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (
        SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id
        WHERE o.status = 'queued' OR n.status = 'queued' OR o.priority <> n.priority
              OR o.suite_id IS DISTINCT FROM n.suite_id
    ) THEN
        INSERT INTO scheduler_lab_change (source) VALUES (TG_TABLE_NAME);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER scheduler_lab_changed_update AFTER UPDATE ON jobs_job
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
FOR EACH STATEMENT EXECUTE FUNCTION scheduler_jobs_changed();
"""
DROP = """
DROP TRIGGER IF EXISTS scheduler_lab_changed_update ON jobs_lease;
DROP TRIGGER IF EXISTS scheduler_lab_changed_update ON jobs_job;
{drops}
DROP FUNCTION IF EXISTS scheduler_jobs_changed();
DROP FUNCTION IF EXISTS scheduler_lab_changed();
DROP TABLE IF EXISTS scheduler_lab_change;
"""


def create_log(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor != "postgresql":
        return
    triggers = "".join(WHOLE_TABLE_TRIGGER.format(table=table) for table in WHOLE_TABLES)
    schema_editor.execute(CREATE + triggers + JOB_TRIGGERS + LEASE_TRIGGERS)


def drop_log(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor != "postgresql":
        return
    drops = "".join(
        f"DROP TRIGGER IF EXISTS scheduler_lab_changed ON {table};\n"
        for table in (*WHOLE_TABLES, "jobs_job", "jobs_lease")
    )
    schema_editor.execute(DROP.format(drops=drops))


class Migration(migrations.Migration):
    dependencies = [
        ("hosts", "0004_reserved_names"),
        ("jobs", "0003_suite_origins_and_templates"),
    ]

    operations = [
        *(
            migrations.AddIndex(model_name="job", index=index)
            for index in (
                models.Index(
                    condition=models.Q(("not_before__isnull", False), ("status", "queued")),
                    fields=["not_before"],
                    name="job_queued_backoff",
                ),
                models.Index(
                    condition=models.Q(("expires_at__isnull", False), ("status", "queued")),
                    fields=["expires_at"],
                    name="job_queued_expiry",
                ),
                models.Index(
                    condition=models.Q(
                        ("status", "queued"), models.Q(("kind", "test"), _negated=True)
                    ),
                    fields=["id"],
                    name="job_queued_maintenance",
                ),
            )
        ),
        migrations.RunPython(create_log, drop_log),
    ]
