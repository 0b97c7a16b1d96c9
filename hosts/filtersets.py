"""One query language for hosts and workers, used by the API and the UI alike."""

from __future__ import annotations

from django.db.models import Q, QuerySet
from django.utils import timezone
from django_filters import rest_framework as filters

from hosts.choices import HostStatus
from hosts.models import Host, Worker
from schedsite.filters import RepeatedCharFilter, StrictBooleanFilter


class HostFilterSet(filters.FilterSet):
    label = RepeatedCharFilter(
        method="filter_label", help_text="Repeat for AND: ?label=board:eve&label=pool:cq"
    )
    status = filters.MultipleChoiceFilter(
        choices=HostStatus.choices,
        distinct=False,  # the host's own column: nothing to deduplicate
        help_text="Retired hosts are listed only when asked for.",
    )
    locked = StrictBooleanFilter()
    leased = StrictBooleanFilter(method="filter_leased", label="Leased")
    worker = filters.CharFilter(field_name="worker__name")
    q = filters.CharFilter(method="filter_q", label="Search")

    class Meta:
        model = Host
        fields = ["label", "status", "locked", "leased", "worker", "q"]

    def filter_queryset(self, queryset: QuerySet[Host]) -> QuerySet[Host]:
        # Retired hosts are kept for their history, not for work: hidden unless asked for.
        if not self.form.cleaned_data.get("status"):
            queryset = queryset.exclude(status=HostStatus.RETIRED)
        return super().filter_queryset(queryset)

    def filter_label(self, queryset: QuerySet[Host], name: str, value: list[str]) -> QuerySet:
        return queryset.filter(pk__in=Host.objects.carrying(value or []).values("pk"))

    def filter_leased(self, queryset: QuerySet[Host], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.leased() if value else queryset.unleased()

    def filter_q(self, queryset: QuerySet[Host], name: str, value: str) -> QuerySet:
        value = value.strip()
        if not value:
            return queryset
        return queryset.filter(
            Q(hostname__icontains=value)
            | Q(lock_reason__icontains=value)
            | Q(current_build__icontains=value)
            | Q(labels__name__iexact=value)
        ).distinct()


class WorkerFilterSet(filters.FilterSet):
    paused = StrictBooleanFilter()
    retired = StrictBooleanFilter(
        method="filter_retired", label="Retired", help_text="Retired workers are hidden by default."
    )
    online = StrictBooleanFilter(method="filter_online", label="Online")
    q = filters.CharFilter(field_name="name", lookup_expr="icontains", label="Search")

    class Meta:
        model = Worker
        fields = ["paused", "retired", "online", "q"]

    def filter_queryset(self, queryset: QuerySet[Worker]) -> QuerySet[Worker]:
        # The `retired` filter's method runs only when it is given: hide them by default here.
        if self.form.cleaned_data.get("retired") is None:
            queryset = queryset.filter(retired_at__isnull=True)
        return super().filter_queryset(queryset)

    def filter_retired(self, queryset: QuerySet[Worker], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        return queryset.filter(retired_at__isnull=not value)

    def filter_online(self, queryset: QuerySet[Worker], name: str, value: bool | None) -> QuerySet:
        if value is None:
            return queryset
        now = timezone.now()
        return queryset.online(now) if value else queryset.offline(now)
