"""The scheduler's policies: its settings, preemption and fair share.

- The scheduler settings (one row, created here so that a tick reads it in one query) and
  their audit trail. A change of them is logged in the lab's change log (0004) like any other
  write the plan depends on: the next tick plans again instead of finding the lab unchanged.
- Job.preemptible, and `preempted` as a lease's release reason.
- `job_finished_by_name`: a job name's last finished runs, for `ordering: size`'s medians;
  `lease_host_last_released`: each host's last release, for `host_choice: spread`.
- OwnerUsage, fair share's host-seconds per owner, kept by a trigger on lease release: it
  decays the owner's total to the release time with the half-life set then and adds the
  lease's host-seconds. Verify and repair jobs and manual reservations count for nobody.
"""

import datetime
import django.core.validators
import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


SETTINGS_TRIGGER = """
CREATE TRIGGER scheduler_lab_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE
ON jobs_schedulersettings FOR EACH STATEMENT EXECUTE FUNCTION scheduler_lab_changed();
"""

USAGE_TRIGGER = """
CREATE OR REPLACE FUNCTION scheduler_owner_usage() RETURNS trigger AS $$
DECLARE
    who bigint;
    half_life double precision;
BEGIN
    SELECT j.owner_id INTO who FROM jobs_job j WHERE j.id = NEW.job_id AND j.kind = 'test';
    IF who IS NULL THEN
        RETURN NULL;
    END IF;
    SELECT s.fair_share_half_life_hours * 3600.0 INTO half_life
    FROM jobs_schedulersettings s WHERE s.id = 1;
    half_life := coalesce(half_life, 86400.0);
    INSERT INTO jobs_ownerusage AS u (owner_id, host_seconds, at)
    VALUES (who, greatest(extract(epoch FROM NEW.released_at - NEW.acquired_at), 0),
            NEW.released_at)
    ON CONFLICT (owner_id) DO UPDATE SET
        host_seconds = u.host_seconds
            * power(0.5, greatest(extract(epoch FROM EXCLUDED.at - u.at), 0) / half_life)
            + EXCLUDED.host_seconds,
        at = greatest(u.at, EXCLUDED.at);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;

CREATE TRIGGER scheduler_owner_usage AFTER UPDATE OF released_at ON jobs_lease FOR EACH ROW
WHEN (OLD.released_at IS NULL AND NEW.released_at IS NOT NULL AND NEW.job_id IS NOT NULL)
EXECUTE FUNCTION scheduler_owner_usage();
"""


def create_triggers(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SETTINGS_TRIGGER)
        schema_editor.execute(USAGE_TRIGGER)


def drop_triggers(apps, schema_editor):  # noqa: ANN001, ARG001
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP TRIGGER IF EXISTS scheduler_owner_usage ON jobs_lease")
        schema_editor.execute("DROP FUNCTION IF EXISTS scheduler_owner_usage()")
        schema_editor.execute(
            "DROP TRIGGER IF EXISTS scheduler_lab_changed ON jobs_schedulersettings"
        )


def create_settings_row(apps, schema_editor):  # noqa: ANN001, ARG001
    apps.get_model("jobs", "SchedulerSettings").objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("hosts", "0005_worker_capacity"),
        ("jobs", "0005_fanout_follows_lab"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="OwnerUsage",
            fields=[
                (
                    "owner",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                ("host_seconds", models.FloatField(default=0.0)),
                ("at", models.DateTimeField()),
            ],
            options={
                "verbose_name_plural": "owner usage",
            },
        ),
        migrations.CreateModel(
            name="SchedulerSettings",
            fields=[
                (
                    "id",
                    models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False),
                ),
                (
                    "ordering",
                    models.CharField(
                        choices=[
                            ("fifo", "fifo: submission order"),
                            ("size", "size: shortest expected first"),
                            ("dynsize", "dynsize: shortest first, shrinking as it waits"),
                        ],
                        default="fifo",
                        help_text="Within a priority: fifo = submission order; size = shortest expected first; dynsize = shortest first, with a job's size shrinking the longer it waits (nothing starves).",
                        max_length=10,
                    ),
                ),
                (
                    "aging_minutes",
                    models.PositiveIntegerField(
                        default=0,
                        help_text="A queued job gains one priority level per this many minutes it waits; 0 = no aging.",
                    ),
                ),
                (
                    "aging_cap",
                    models.PositiveIntegerField(
                        default=20,
                        help_text="The most priority levels aging may add to a job (0–100).",
                        validators=[django.core.validators.MaxValueValidator(100)],
                    ),
                ),
                (
                    "host_choice",
                    models.CharField(
                        choices=[
                            ("affinity", "affinity: same build, fewest labels"),
                            ("spread", "spread: the host idle longest"),
                            ("pack", "pack: hosts of busy workers first"),
                        ],
                        default="affinity",
                        help_text="Which free host a job gets when several fit: affinity = one with its build and the fewest extra labels; spread = the one idle longest; pack = hosts of workers already busy first.",
                        max_length=10,
                    ),
                ),
                (
                    "default_duration",
                    models.DurationField(
                        default=datetime.timedelta(seconds=600),
                        help_text="How long a job with no estimate and no run history is expected to take (what size and dynsize order it by).",
                    ),
                ),
                (
                    "preemption",
                    models.BooleanField(
                        default=False,
                        help_text="Let a job that cannot otherwise run stop a preemptible job at least preempt_margin priority levels below it (never maintenance work or reservations).",
                    ),
                ),
                (
                    "preempt_margin",
                    models.PositiveSmallIntegerField(
                        default=20,
                        help_text="How many priority levels higher a job must be to preempt one (1–100).",
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(100),
                        ],
                    ),
                ),
                (
                    "fair_share",
                    models.BooleanField(
                        default=False,
                        help_text="Among jobs of equal priority, the owner who used fewer host-seconds recently goes first.",
                    ),
                ),
                (
                    "fair_share_half_life_hours",
                    models.PositiveIntegerField(
                        default=24,
                        help_text="How fast past use is forgotten for fair share: it counts half after this many hours (1–8760).",
                        validators=[
                            django.core.validators.MinValueValidator(1),
                            django.core.validators.MaxValueValidator(8760),
                        ],
                    ),
                ),
                ("version", models.PositiveIntegerField(default=0)),
                ("updated_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("updated_by", models.CharField(blank=True, max_length=150)),
            ],
            options={
                "verbose_name_plural": "scheduler settings",
            },
        ),
        migrations.CreateModel(
            name="SchedulerSettingsChange",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                ("actor", models.CharField(max_length=150)),
                ("changes", models.JSONField(default=dict)),
                ("reason", models.TextField(blank=True)),
                ("version", models.PositiveIntegerField(default=0)),
            ],
            options={
                "ordering": ["-at", "-id"],
            },
        ),
        migrations.AddField(
            model_name="job",
            name="preemptible",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AlterField(
            model_name="lease",
            name="release_reason",
            field=models.CharField(
                blank=True,
                choices=[
                    ("completed", "Completed"),
                    ("aborted", "Aborted"),
                    ("expired", "Expired"),
                    ("released", "Released"),
                    ("timeout", "Timed out"),
                    ("preempted", "Preempted"),
                ],
                max_length=10,
            ),
        ),
        migrations.AddIndex(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status__in", ["passed", "failed"])),
                fields=["name", "-finished_at"],
                name="job_finished_by_name",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("id", 1)), name="scheduler_settings_one_row"
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("ordering__in", ["fifo", "size", "dynsize"])),
                name="scheduler_settings_ordering_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("host_choice__in", ["affinity", "spread", "pack"])),
                name="scheduler_settings_host_choice_valid",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("aging_cap__lte", 100)),
                name="scheduler_settings_aging_cap_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("default_duration__gt", datetime.timedelta(0))),
                name="scheduler_settings_default_duration_positive",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(("preempt_margin__gte", 1), ("preempt_margin__lte", 100)),
                name="scheduler_settings_preempt_margin_range",
            ),
        ),
        migrations.AddConstraint(
            model_name="schedulersettings",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("fair_share_half_life_hours__gte", 1),
                    ("fair_share_half_life_hours__lte", 8760),
                ),
                name="scheduler_settings_half_life_range",
            ),
        ),
        migrations.AddIndex(
            model_name="lease",
            index=models.Index(
                condition=models.Q(("released_at__isnull", False)),
                fields=["host", "-released_at"],
                name="lease_host_last_released",
            ),
        ),
        migrations.RunPython(create_triggers, drop_triggers),
        migrations.RunPython(create_settings_row, migrations.RunPython.noop),
    ]
