"""One query language for deliveries, used by the staff delivery log."""

from __future__ import annotations

from django_filters import rest_framework as filters

from notifications.choices import Channel, DeliveryStatus, EventKind
from notifications.models import Delivery


class DeliveryFilterSet(filters.FilterSet):
    status = filters.ChoiceFilter(choices=DeliveryStatus.choices)
    channel = filters.ChoiceFilter(choices=Channel.choices)
    kind = filters.ChoiceFilter(field_name="event__kind", choices=EventKind.choices)
    user = filters.CharFilter(field_name="user__username")

    class Meta:
        model = Delivery
        fields = ["status", "channel", "kind", "user"]
