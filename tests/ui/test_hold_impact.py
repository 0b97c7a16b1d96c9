"""Before locking a host or pausing a worker, staff see what it would change (what-if plans)."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def test_locking_the_only_kevin_host_names_the_jobs_it_would_strand(sam_client, lab):
    f.job("kevin-1", ["board:kevin"])
    f.job("kevin-2", ["board:kevin"])

    response = sam_client.get("/hosts/h3.lab/lock/impact/", headers=HTMX)

    assert response.status_code == 200
    text = response.content.decode()
    assert "2 queued jobs would lose their only matching host" in text
    assert "1 job the next tick would start would wait instead" in text  # one kevin host


def test_pausing_a_worker_whose_hosts_nothing_waits_for_changes_nothing(sam_client, lab):
    f.job("kevin-1", ["board:kevin"])  # on w2's host; w1's hosts have no work

    response = sam_client.get("/workers/w1/pause/impact/", headers=HTMX)

    assert "would lease the same hosts with or without this change" in response.content.decode()


def test_testers_are_refused_the_preview(alice_client, lab):
    assert alice_client.get("/hosts/h3.lab/lock/impact/", headers=HTMX).status_code == 403
    assert alice_client.get("/workers/w1/pause/impact/", headers=HTMX).status_code == 403


def test_the_slot_loads_only_when_staff_start_on_the_form(sam_client, lab):
    html = sam_client.get("/hosts/h3.lab/").content.decode()
    assert 'hx-get="/hosts/h3.lab/lock/impact/"' in html
    assert 'hx-trigger="focusin from:closest form once"' in html
