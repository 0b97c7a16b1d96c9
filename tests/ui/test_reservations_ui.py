"""Reservations on the host and leases pages; who holds and who waits; the host timeline."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from hosts import services as host_services
from hosts.models import HostEvent
from jobs import services
from jobs.models import Lease
from tests import factories as f
from tests.ui.conftest import HTMX, expiry

pytestmark = pytest.mark.django_db


def test_the_holder_sees_extend_and_end_on_the_host_page_another_tester_does_not(
    alices, alice_client, bob_client
):
    mine = alice_client.get("/hosts/h1.lab/").content.decode()
    assert "Extend the reservation by" in mine and "End reservation" in mine
    assert "Reserved by" in mine and "<strong>alice</strong>" in mine
    theirs = bob_client.get("/hosts/h1.lab/").content.decode()
    assert "<strong>alice</strong>" in theirs
    assert "Extend the reservation by" not in theirs and "End reservation" not in theirs


def test_the_holder_extends_from_the_host_page(alices, alice_client):
    before = expiry(alices)
    response = alice_client.post(
        f"/leases/{alices.pk}/extend/", {"minutes": 120, "fragment": "host"}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="host-detail"')
    assert "Extended the reservation of h1.lab until" in html
    assert expiry(alices) == before + timedelta(hours=2)


def test_an_extension_past_the_cap_is_refused_next_to_the_field(alices, alice_client, settings):
    settings.MAX_RESERVATION_SECONDS = 4 * 3600
    before = expiry(alices)
    response = alice_client.post(
        f"/leases/{alices.pk}/extend/", {"minutes": 240, "fragment": "host"}, headers=HTMX
    )
    html = response.content.decode()
    assert response.status_code == 400
    error = html.split('id="detail-extend-error"')[1].split("</p>")[0]
    assert "at most 4h 00m from now" in error and "at most 3h 00m more" in error
    assert expiry(alices) == before


def test_a_bad_duration_is_a_400_that_changes_nothing(alices, alice_client):
    before = expiry(alices)
    response = alice_client.post(f"/leases/{alices.pk}/extend/", {"minutes": "7"}, headers=HTMX)
    assert response.status_code == 400
    assert "Choose how long to extend it by" in response.content.decode()
    assert expiry(alices) == before


def test_another_tester_is_refused_extend_and_end(alices, bob_client):
    before = expiry(alices)
    extend = bob_client.post(f"/leases/{alices.pk}/extend/", {"minutes": 60}, headers=HTMX)
    end = bob_client.post(f"/leases/{alices.pk}/end/", headers=HTMX)
    assert extend.status_code == end.status_code == 403
    assert "Only the holder of a reservation or lab staff" in end.content.decode()
    lease = Lease.objects.get(pk=alices.pk)
    assert lease.expires_at == before and lease.released_at is None


def test_staff_end_a_reservation_from_the_leases_page_and_get_its_row(alices, sam_client):
    page = sam_client.get("/leases/").content.decode()
    assert "Extend or end…" in page
    response = sam_client.post(f"/leases/{alices.pk}/end/", {"reason": "needed"}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith(f'<tr id="lease-{alices.pk}"')
    assert "Ended the reservation of h1.lab." in html
    assert Lease.objects.get(pk=alices.pk).released_by == "sam"


def test_the_leases_page_offers_a_tester_actions_only_on_her_own_reservation(
    alices, lab, bob, alice_client, bob_client
):
    services.lease_reserve(host=lab.h2, holder=bob, duration=timedelta(hours=1), reason="bob's")
    html = alice_client.get("/leases/").content.decode()
    assert html.count("Extend or end…") == 1
    assert f'action="/leases/{alices.pk}/end/"' in html
    nothing = f.signed_in(None).get("/leases/")  # signed out: the login page
    assert nothing.status_code == 302


def test_ending_twice_is_a_conflict_shown_in_the_row(alices, alice_client):
    alice_client.post(f"/leases/{alices.pk}/end/", headers=HTMX)
    again = alice_client.post(f"/leases/{alices.pk}/end/", headers=HTMX)
    assert again.status_code == 409
    assert "is no longer active" in again.content.decode()


def test_without_javascript_ending_redirects_back_with_a_message(alices, alice_client):
    response = alice_client.post(f"/leases/{alices.pk}/end/", follow=True)
    assert "Ended the reservation of h1.lab." in response.content.decode()


# --- who holds and who waits ----------------------------------------------------------------


def test_the_host_page_lists_the_jobs_waiting_for_it_in_queue_order(lab, sam_client):
    host_services.host_lock(host=lab.h1, by="sam", reason="bench")
    host_services.host_lock(host=lab.h2, by="sam", reason="bench")
    low = f.job("low-eve", ["board:eve"], priority=20)
    high = f.job("high-eve", ["board:eve", "pool:cq"], priority=70)
    f.job("kevin-only", ["board:kevin"], priority=80)  # h1 lacks the label
    f.job("pinned-h2", ["board:eve"], priority=80, host=lab.h2)  # pinned elsewhere
    mine = f.job("pinned-h1", [], priority=10, host=lab.h1)
    html = sam_client.get("/hosts/h1.lab/").content.decode()
    # Locked, it runs none of them now (the card says so), yet they are the ones it could run.
    assert "3 queued jobs fit its labels; none runs here while it is locked" in html
    waiting = html[html.index('id="host-waiters-title"') :]
    names = [name for name in ("high-eve", "low-eve", "pinned-h1") if name in waiting]
    assert names == ["high-eve", "low-eve", "pinned-h1"]
    assert sorted(names, key=waiting.index) == names  # in the queue's order
    assert "kevin-only" not in waiting and "pinned-h2" not in waiting
    assert f'href="/jobs/{high.pk}/"' in waiting and f'href="/jobs/{low.pk}/"' in waiting
    assert f'href="/jobs/{mine.pk}/"' in waiting and "pinned here" in waiting


def test_the_host_page_shows_the_first_ten_waiters_and_how_many_more(lab, sam_client):
    for i in range(13):
        f.job(f"eve-{i}", ["board:eve"])
    html = sam_client.get("/hosts/h1.lab/").content.decode()
    assert "13 queued jobs could run here" in html and "and 3 more" in html


def test_who_waits_costs_the_same_queries_for_many_queued_jobs(lab, sam_client):
    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert sam_client.get("/hosts/h1.lab/").status_code == 200
        return len(ctx.captured_queries)

    f.job("one", ["board:eve"])
    few = count()
    for i in range(40):
        f.job(f"eve-{i}", ["board:eve"] if i % 2 else ["pool:cq", f"team:{i}"])
    assert count() <= few + 2  # a quota suite or a filtered page adds a query; nothing per job


def test_the_host_page_says_which_job_and_whose_suite_holds_it(lab, sam_client, alice):
    f.suite("nightly", 1, owner=alice, labels=["board:kevin"])
    services.scheduler_tick()
    html = sam_client.get("/hosts/h3.lab/").content.decode()
    held = html[html.index('id="host-lease-title"') : html.index('id="host-waiters-title"')]
    assert "nightly-t0" in held and "nightly" in held and "alice" in held
    assert "Since" in held and "Until" in held


# --- the timeline ---------------------------------------------------------------------------


def test_every_event_is_reachable_through_load_older(lab, sam_client):
    for i in range(120):
        HostEvent.objects.create(host=lab.h1, kind="updated", actor="sam", message=f"note {i:03d}")
    html = sam_client.get("/hosts/h1.lab/").content.decode()
    seen = {i for i in range(120) if f"note {i:03d}" in html}
    assert seen == set(range(70, 120))
    url = html.split('hx-get="/hosts/h1.lab/events/?before=')[1].split('"')[0]
    pages = 0
    while url:
        pages += 1
        older = sam_client.get(f"/hosts/h1.lab/events/?before={url}", headers=HTMX)
        fragment = older.content.decode()
        assert fragment.lstrip().startswith("<li")
        seen |= {
            i for i in range(120) if f"note {i:03d} " in fragment or f"note {i:03d}<" in fragment
        }
        url = fragment.split("?before=")[1].split('"')[0] if "?before=" in fragment else ""
    assert pages == 2
    assert seen == set(range(120))
    assert "labels: board:eve" in fragment  # the host's first event, "created"


def test_older_events_without_javascript_are_a_page(lab, sam_client):
    newer = HostEvent.objects.create(host=lab.h1, kind="updated", actor="sam", message="newer")
    response = sam_client.get(f"/hosts/h1.lab/events/?before={newer.pk}")
    html = response.content.decode()
    assert response.status_code == 200 and "h1.lab: older events" in html
    assert "labels: board:eve" in html and "newer" not in html


def test_load_older_in_the_live_page_cancels_a_poll_on_its_way(lab, sam_client):
    """A poll of the host's page answered after "Load older" would replace the older entries:
    the link takes the live region's request slot (hx-sync replace), as the page's forms do —
    on the page and in the entries it loads. The no-JavaScript page of older events has no live
    region, and names none (htmx fails on a sync element it cannot find)."""
    for i in range(120):
        HostEvent.objects.create(host=lab.h1, kind="updated", actor="sam", message=f"note {i:03d}")
    sync = 'hx-sync="closest .live-region:replace"'
    html = sam_client.get("/hosts/h1.lab/").content.decode()
    assert sync in html[html.index('<li class="timeline-more">') :].split("</li>")[0]
    before = html.split('hx-get="/hosts/h1.lab/events/?before=')[1].split('"')[0]
    fragment = sam_client.get(f"/hosts/h1.lab/events/?before={before}", headers=HTMX)
    assert sync in fragment.content.decode().split('<li class="timeline-more">')[1]
    page = sam_client.get(f"/hosts/h1.lab/events/?before={before}").content.decode()
    assert "Load older events" in page and sync not in page


@pytest.mark.parametrize("before", ["x", "99999999999999999999", "0"])
def test_a_bad_older_events_cursor_is_a_400(lab, sam_client, before):
    assert sam_client.get(f"/hosts/h1.lab/events/?before={before}").status_code == 400
