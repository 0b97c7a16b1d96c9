"""The lab's state rolled up per minute and per hour, per pool and board label
(docs/performance.md#lab-history, docs/api.md#statistics)."""

from __future__ import annotations

from django.db import models


class LabRollup(models.Model):
    """One label's figures over one bucket of time; label "" is the whole lab.

    Gauges (hosts, leased, held, queued) are the state sampled as the bucket ended; an hour row
    holds their mean over its minutes. Counters (finished, provisions, repairs, the wait
    histogram) count what happened in the bucket.
    """

    bucket = models.DateTimeField()  # the bucket's start
    label = models.CharField(max_length=100, blank=True)
    hosts = models.JSONField(default=dict)  # status -> hosts (retired hosts are not counted)
    hosts_total = models.FloatField(default=0)
    leased = models.FloatField(default=0)  # hosts with an active lease or reservation
    held = models.FloatField(default=0)  # free hosts held for a multi-host job
    queued = models.JSONField(default=dict)  # priority -> queued jobs
    queued_total = models.FloatField(default=0)
    # The wait of the jobs that got their hosts in the bucket: from submission to lease.
    waits = models.JSONField(default=list)  # counts per WAIT_BOUNDS bucket (stats.rollup)
    wait_p50_s = models.FloatField(null=True, blank=True)
    wait_p95_s = models.FloatField(null=True, blank=True)
    finished = models.JSONField(default=dict)  # result -> test jobs that ended in the bucket
    provisions = models.PositiveIntegerField(default=0)
    provisions_failed = models.PositiveIntegerField(default=0)
    repairs = models.PositiveIntegerField(default=0)
    repairs_failed = models.PositiveIntegerField(default=0)
    samples = models.PositiveSmallIntegerField(default=1)  # minute rows an hour row is made of

    class Meta:
        abstract = True
        ordering = ["bucket"]

    def __str__(self) -> str:
        return f"{self.label or 'lab'} {self.bucket:%Y-%m-%d %H:%M}"


class LabMinute(LabRollup):
    """A minute's figures, kept STATS_MINUTES_KEPT (48 hours)."""

    class Meta(LabRollup.Meta):
        constraints = [
            # Two clusters rolling up the same minute write it once.
            models.UniqueConstraint(fields=["bucket", "label"], name="lab_minute_once")
        ]
        indexes = [models.Index(fields=["label", "bucket"], name="lab_minute_label")]


class LabHour(LabRollup):
    """An hour's figures made from its minute rows, kept STATS_HOURS_KEPT (400 days)."""

    class Meta(LabRollup.Meta):
        constraints = [models.UniqueConstraint(fields=["bucket", "label"], name="lab_hour_once")]
        indexes = [models.Index(fields=["label", "bucket"], name="lab_hour_label")]
