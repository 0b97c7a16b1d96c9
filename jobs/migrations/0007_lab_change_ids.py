"""The lab's change log names the rows it changed, so that a tick re-reads only those.

A tick no longer deletes the rows it takes: it stamps them with its take number (`taken`, from
the sequence `scheduler_lab_take`), so that a scheduler process whose lab is older can read
what other processes' ticks took since; rows are dropped some takes later.

Each log row (0004) gains `ids`: for `hosts_host` and `jobs_job` the ids of the rows a
statement wrote; for `hosts_host_labels` and `jobs_lease` the hosts whose labels or leases it
changed. The tick keeps the lab it read in memory between ticks and reads again only what the
log names (jobs/scheduling/labstate.py, docs/performance.md#the-incremental-tick). A TRUNCATE
logs NULL: everything may have changed. A statement that changed no row logs nothing. The other logged tables (labels, suites, the settings)
keep logging one row per statement with no ids: the tick re-reads them whole or rebuilds.

PostgreSQL only; a trigger with transition tables takes one event, hence one trigger each.
"""

from django.db import migrations

# The rows a statement changed, by the column that names them (TG_ARGV[0]).
ROWS_CHANGED = """
ALTER TABLE scheduler_lab_change ADD COLUMN ids bigint[], ADD COLUMN taken bigint;
CREATE INDEX scheduler_lab_change_taken ON scheduler_lab_change (taken);
CREATE SEQUENCE scheduler_lab_take;
CREATE FUNCTION scheduler_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        EXECUTE format('INSERT INTO scheduler_lab_change (source, ids) '
                       'SELECT %L, array_agg(DISTINCT %I) FROM new_rows HAVING count(*) > 0', TG_TABLE_NAME, TG_ARGV[0]);
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format('INSERT INTO scheduler_lab_change (source, ids) '
                       'SELECT %L, array_agg(DISTINCT %I) FROM old_rows HAVING count(*) > 0', TG_TABLE_NAME, TG_ARGV[0]);
    ELSE
        EXECUTE format('INSERT INTO scheduler_lab_change (source, ids) SELECT %L, array_agg(x) '
                       'FROM (SELECT %I AS x FROM old_rows UNION SELECT %I FROM new_rows) c HAVING count(*) > 0',
                       TG_TABLE_NAME, TG_ARGV[0], TG_ARGV[0]);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION scheduler_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    changed bigint[];
BEGIN
    SELECT array_agg(n.id) INTO changed FROM old_rows o JOIN new_rows n ON n.id = o.id
    WHERE o.status = 'queued' OR n.status = 'queued' OR o.priority <> n.priority
          OR o.suite_id IS DISTINCT FROM n.suite_id;
    IF changed IS NOT NULL THEN
        INSERT INTO scheduler_lab_change (source, ids) VALUES (TG_TABLE_NAME, changed);
    END IF;
    RETURN NULL;
END $$;
CREATE FUNCTION scheduler_lease_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO scheduler_lab_change (source, ids)
    VALUES (TG_TABLE_NAME, ARRAY[OLD.host_id, NEW.host_id]);
    RETURN NULL;
END $$;
"""

# (table, the column naming the rows the tick keeps, events). A host's labels and leases
# name the host: that is the row the tick re-reads.
TABLES = (
    ("hosts_host", "id", ("INSERT", "UPDATE", "DELETE")),
    ("hosts_host_labels", "host_id", ("INSERT", "UPDATE", "DELETE")),
    ("jobs_job", "id", ("INSERT", "DELETE")),  # updates: scheduler_jobs_changed, as before
    ("jobs_lease", "host_id", ("INSERT", "DELETE")),  # updates: per row, below
)
TRANSITION = {
    "INSERT": "NEW TABLE AS new_rows",
    "UPDATE": "OLD TABLE AS old_rows NEW TABLE AS new_rows",
    "DELETE": "OLD TABLE AS old_rows",
}


def _forward_sql() -> str:
    sql = [ROWS_CHANGED]
    for table, column, events in TABLES:
        sql.append(f"DROP TRIGGER scheduler_lab_changed ON {table};")
        sql.append(
            f"CREATE TRIGGER scheduler_lab_changed AFTER TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();"
        )
        for event in events:
            sql.append(
                f"CREATE TRIGGER scheduler_rows_changed_{event.lower()} AFTER {event} ON {table} "
                f"REFERENCING {TRANSITION[event]} FOR EACH STATEMENT "
                f"EXECUTE FUNCTION scheduler_rows_changed('{column}');"
            )
    sql.append(
        "DROP TRIGGER scheduler_lab_changed_update ON jobs_lease;"
        "CREATE TRIGGER scheduler_lab_changed_update AFTER UPDATE ON jobs_lease FOR EACH ROW "
        "WHEN (OLD.released_at IS DISTINCT FROM NEW.released_at OR OLD.job_id IS DISTINCT FROM "
        "NEW.job_id OR OLD.host_id IS DISTINCT FROM NEW.host_id) "
        "EXECUTE FUNCTION scheduler_lease_changed();"
    )
    return "\n".join(sql)


def _backward_sql() -> str:
    sql = []
    for table, _column, events in TABLES:
        sql.append(f"DROP TRIGGER scheduler_lab_changed ON {table};")
        for event in events:
            sql.append(f"DROP TRIGGER scheduler_rows_changed_{event.lower()} ON {table};")
    for table in ("hosts_host", "hosts_host_labels"):
        sql.append(
            f"CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
            f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();"
        )
    for table in ("jobs_job", "jobs_lease"):
        sql.append(
            f"CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR DELETE OR TRUNCATE ON {table} "
            "FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();"
        )
    sql.append(
        "DROP TRIGGER scheduler_lab_changed_update ON jobs_lease;"
        "CREATE TRIGGER scheduler_lab_changed_update AFTER UPDATE ON jobs_lease FOR EACH ROW "
        "WHEN (OLD.released_at IS DISTINCT FROM NEW.released_at OR OLD.job_id IS DISTINCT FROM "
        "NEW.job_id OR OLD.host_id IS DISTINCT FROM NEW.host_id) "
        "EXECUTE FUNCTION scheduler_lab_changed();"
        "DROP FUNCTION scheduler_lease_changed();"
        "DROP FUNCTION scheduler_rows_changed();"
        "CREATE OR REPLACE FUNCTION scheduler_jobs_changed() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN IF EXISTS (SELECT 1 FROM old_rows o JOIN new_rows n ON n.id = o.id "
        "WHERE o.status = 'queued' OR n.status = 'queued' OR o.priority <> n.priority "
        "OR o.suite_id IS DISTINCT FROM n.suite_id) THEN "
        "INSERT INTO scheduler_lab_change (source) VALUES (TG_TABLE_NAME); END IF; "
        "RETURN NULL; END $$;"
        "DROP SEQUENCE scheduler_lab_take;"
        "DELETE FROM scheduler_lab_change WHERE taken IS NOT NULL;"
        "ALTER TABLE scheduler_lab_change DROP COLUMN ids, DROP COLUMN taken;"
    )
    return "\n".join(sql)


def forward(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_forward_sql(), params=None)


def backward(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(_backward_sql(), params=None)


class Migration(migrations.Migration):
    dependencies = [("jobs", "0006_scheduler_policies")]

    operations = [migrations.RunPython(forward, backward)]
