"""One query language for suites, jobs and leases, used by the API and the UI alike."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django_filters import rest_framework as filters

from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease, Suite
from schedsite.filters import IdFilter, RepeatedCharFilter, StrictBooleanFilter

# The kind of a lease that holds no job: a manual reservation.
RESERVATION = "reservation"


class JobFilterSet(filters.FilterSet):
    # A job's own columns: no join, so no DISTINCT (django-filter adds one by default, and at
    # 100,000 jobs PostgreSQL sorts megabytes on disk to apply it).
    status = filters.MultipleChoiceFilter(choices=JobStatus.choices, distinct=False)
    kind = filters.MultipleChoiceFilter(choices=JobKind.choices, distinct=False)
    suite = IdFilter(field_name="suite_id")
    standalone = StrictBooleanFilter(field_name="suite", lookup_expr="isnull")
    label = RepeatedCharFilter(
        method="filter_label", help_text="Jobs requiring every given label (repeat for AND)"
    )
    host = filters.CharFilter(field_name="host__hostname", label="Pinned host")
    owner = filters.CharFilter(field_name="owner__username")
    q = filters.CharFilter(method="filter_q", label="Search")

    class Meta:
        model = Job
        fields = ["status", "kind", "suite", "standalone", "label", "host", "owner", "q"]

    def filter_label(self, queryset: QuerySet[Job], name: str, value: list[str]) -> QuerySet:
        # Jobs store their labels as ",a,b,", so one label is a plain substring test.
        for label in value or []:
            queryset = queryset.filter(label_key__contains=f",{label},")
        return queryset

    def filter_q(self, queryset: QuerySet[Job], name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(Q(name__icontains=value) | Q(suite__name__icontains=value))


class SuiteFilterSet(filters.FilterSet):
    owner = filters.CharFilter(field_name="owner__username")
    aborted = StrictBooleanFilter(field_name="aborted_at", lookup_expr="isnull", exclude=True)
    active = StrictBooleanFilter(method="filter_active", label="Has unfinished jobs")
    rerun_of = IdFilter(field_name="rerun_of_id", label="Re-runs of suite")
    cloned_from = IdFilter(field_name="cloned_from_id", label="Clones of suite")
    q = filters.CharFilter(method="filter_q", label="Search")

    class Meta:
        model = Suite
        fields = ["owner", "aborted", "active", "rerun_of", "cloned_from", "q"]

    def filter_active(self, queryset: QuerySet[Suite], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.unfinished() if value else queryset.finished()

    def filter_q(self, queryset: QuerySet[Suite], name: str, value: str) -> QuerySet:
        value = value.strip()
        return (
            queryset.filter(Q(name__icontains=value) | Q(build__icontains=value))
            if value
            else queryset
        )


class LeaseFilterSet(filters.FilterSet):
    active = StrictBooleanFilter(method="filter_active", label="Released at is null")
    worker = filters.CharFilter(field_name="host__worker__name")
    host = filters.CharFilter(field_name="host__hostname")
    job = IdFilter(field_name="job_id")
    manual = StrictBooleanFilter(field_name="job", lookup_expr="isnull", label="Manual reservation")
    kind = filters.MultipleChoiceFilter(
        choices=[*JobKind.choices, (RESERVATION, "Reservation")],
        method="filter_kind",
        help_text="Its job's kind, or reservation",
    )

    class Meta:
        model = Lease
        fields = ["active", "worker", "host", "job", "manual", "kind"]

    def filter_active(self, queryset: QuerySet[Lease], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.active() if value else queryset.released()  # type: ignore[attr-defined]

    def filter_kind(self, queryset: QuerySet[Lease], name: str, value: list[str]) -> QuerySet:
        if not value:
            return queryset
        wanted = Q(job__kind__in=[kind for kind in value if kind != RESERVATION])
        if RESERVATION in value:
            wanted |= Q(job__isnull=True)
        return queryset.filter(wanted)
