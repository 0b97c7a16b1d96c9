"""Who manages a reservation: one rule (Lease.managed_by), the same in the service and pages.

docs/ui.md#reservations: its holder or lab staff extend or end a manual reservation; a job's
lease is nobody's to extend. The service refuses, the host page and the leases page show the
controls, by the same rule.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse

from jobs import services
from jobs.models import Lease
from schedsite.errors import Forbidden
from tests import factories as f
from tests.factories import signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def reservation(alice):  # noqa: ANN001, ANN201
    """Host h1 reserved by Alice for an hour."""
    return services.lease_reserve(
        host=f.host("h1", ["board:x"]), holder=alice, duration=timedelta(hours=1), reason="fw"
    )


def test_its_holder_and_staff_manage_a_reservation_and_no_one_else(reservation, alice, bob, sam):
    assert [reservation.managed_by(u) for u in (alice, sam, bob)] == [True, True, False]


def test_no_one_manages_a_jobs_lease_as_a_reservation(reservation, alice, sam):
    Lease.objects.filter(pk=reservation.pk).update(job=f.job("t", ["board:x"], owner=alice))
    reservation.refresh_from_db()
    assert [reservation.managed_by(u) for u in (alice, sam)] == [False, False]


def _service_allows(lease: Lease, user: object) -> bool:
    try:
        services.reservation_check_manager(lease=lease, by=user)
    except Forbidden:
        return False
    return True


def test_the_service_and_both_pages_agree_with_the_rule(reservation, alice, bob, sam):
    # Bob holds a reservation too, so the leases page has its actions column for him.
    services.lease_reserve(
        host=f.host("h2", ["board:x"]), holder=bob, duration=timedelta(hours=1), reason="fw"
    )
    extend = reverse("jobs:reservation_extend", args=[reservation.pk])
    for user in (alice, bob, sam):
        client = signed_in(user)
        host_page = client.get(reverse("hosts:host_detail", args=["h1"])).content.decode()
        lease_page = client.get(reverse("jobs:lease_list")).content.decode()
        expected = reservation.managed_by(user)
        assert _service_allows(reservation, user) is expected, user
        assert (f'action="{extend}"' in host_page) is expected, ("host page", user)
        assert (f'action="{extend}"' in lease_page) is expected, ("leases page", user)
