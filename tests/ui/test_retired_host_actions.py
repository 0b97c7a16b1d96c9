"""A retired host offers no lock, reservation or edit: it is out of service for good."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs import services
from jobs import services as job_services
from schedsite.errors import Conflict
from tests import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def retired(sam):
    host = f.host("old1", ["board:x"], worker=f.worker())
    services.lease_reserve(host=host, holder=sam, duration=timedelta(hours=1), reason="x")
    services.lease_release(lease=host.leases.get(), by=sam)
    job_services.host_delete(host=host, by=sam)  # it has history: retired, not deleted
    host.refresh_from_db()
    assert host.status == "retired"
    return host


def test_the_page_of_a_retired_host_offers_staff_no_lock_reserve_or_edit(sam_client, retired):
    page = sam_client.get("/hosts/old1/").content.decode()

    assert "the host is retired" in page
    assert "Reserve it for manual work" not in page
    assert "Lock it for debugging" not in page
    assert "Edit labels, worker, build" not in page


def test_a_retired_host_in_the_list_has_no_lock_button(sam_client, retired):
    page = sam_client.get("/hosts/?status=retired").content.decode()

    assert ">old1</a>" in page
    assert 'aria-label="Lock old1…"' not in page


def test_a_live_host_still_offers_them(sam_client):
    f.host("dut1", ["board:x"], worker=f.worker())
    page = sam_client.get("/hosts/dut1/").content.decode()

    assert "Reserve it for manual work" in page and "Lock it for debugging" in page


def test_reserving_a_retired_host_is_refused_and_leases_nothing(retired, sam):
    with pytest.raises(Conflict, match="retired"):
        services.lease_reserve(host=retired, holder=sam, duration=timedelta(hours=1), reason="x")

    assert not retired.leases.active().exists()


def test_a_leased_host_offers_no_retire_and_says_why_before_anyone_confirms(sam_client, sam):
    host = f.host("busy1", ["board:x"], worker=f.worker())
    services.lease_reserve(host=host, holder=sam, duration=timedelta(hours=1), reason="x")

    page = sam_client.get("/hosts/busy1/").content.decode()

    assert 'action="/hosts/busy1/retire/"' not in page
    assert "Retire: not while it is leased" in page


def test_a_free_host_offers_retire_with_its_confirmation(sam_client):
    f.host("free1", ["board:x"], worker=f.worker())
    page = sam_client.get("/hosts/free1/").content.decode()
    assert 'action="/hosts/free1/retire/"' in page and "Retire: not while" not in page
