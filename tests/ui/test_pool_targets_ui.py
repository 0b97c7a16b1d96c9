"""The pool targets pages (docs/ui.md#pool-targets): staff see each pool against its target,
its members, its last swaps and what the balancer would do now, and add, change and delete
targets with the API's rules; testers are refused."""

from __future__ import annotations

from datetime import timedelta

import pytest

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent, PoolTarget
from jobs import services
from jobs.services import balancer
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


def set_status(host: Host, status: str) -> Host:
    Host.objects.filter(pk=host.pk).update(status=status)
    host.refresh_from_db()
    return host


@pytest.fixture
def cq(db):  # noqa: ANN001, ANN201
    """pool:cq wants 2 in service: cq1 is ready, cq2 (eve) repair_failed, cq3 (kevin) needs
    repair; one ready eve spare, no kevin spare."""
    target = balancer.pool_target_create(
        by="sam", pool="pool:cq", spare="pool:spare", min_ready=3, same=["board"]
    )
    f.host("cq1", ["board:eve", "pool:cq"])
    set_status(f.host("cq2", ["board:eve", "pool:cq"]), HostStatus.REPAIR_FAILED)
    set_status(f.host("cq3", ["board:kevin", "pool:cq"]), HostStatus.NEEDS_REPAIR)
    f.host("sp1", ["board:eve", "pool:spare"])
    return target


def test_the_list_shows_each_pool_against_its_target_and_warns_when_it_cannot_be_met(
    sam_client, cq
):  # noqa: ANN001
    html = sam_client.get("/pool-targets/").content.decode()

    row = html[html.index(f'id="pool-{cq.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "pool:cq" in row and "pool:spare" in row and ">3<" in row and "board" in row
    assert "1 of 3 hosts" in row and "2 short" in row
    assert "1 swap due" in row
    # No kevin spare for cq3: said on the row, not looped over.
    assert (
        "Cannot be met: no ready spare pool:spare with board:kevin to replace cq3 (needs_repair)"
        in row
    )
    # Linked from the navigation, for staff.
    assert 'href="/pool-targets/" aria-current="page">Pool targets</a>' in html


def test_the_target_page_shows_members_swaps_and_the_balancers_preview(sam_client, cq):  # noqa: ANN001
    balancer.pools_balance()  # swaps sp1 in for cq2; cq3 stays, no kevin spare

    html = sam_client.get(f"/pool-targets/{cq.pk}/").content.decode()

    members = html[html.index("Members (3)") : html.index("Last swaps")]
    for name in ("cq1", "sp1", "cq3"):
        assert f'href="/hosts/{name}/">{name}</a>' in members
    assert "cq2" not in members  # swapped out: a spare now
    assert "Needs repair" in members and "Ready" in members
    swaps = html[html.index("Last swaps") :]
    assert "labels pool:cq → pool:spare: swapped out for sp1" in swaps
    assert "labels pool:spare → pool:cq: swapped in for cq2" in swaps
    assert "pool:cq had 1 of 3 hosts in service; cq2 is repair_failed" in swaps
    now = html[html.index("What the balancer would do now") : html.index("Members (3)")]
    assert (
        "Cannot be met: no ready spare pool:spare with board:kevin to replace cq3 (needs_repair)"
        in now
    )
    assert "Swap " not in now  # nothing left to swap: what the preview API says too
    assert balancer.pool_plan(cq).swaps == []


def test_staff_add_a_target_and_a_refusal_names_the_field(sam_client):  # noqa: ANN001
    bad = {"pool": "pool:cq", "spare": "pool:cq", "min_ready": "2", "same": "board"}
    refused = sam_client.post("/pool-targets/new/", bad, headers=HTMX)

    assert refused.status_code == 400
    html = refused.content.decode()
    assert 'id="id_spare-error"' in html and "Spare: must differ from pool" in html
    assert PoolTarget.objects.count() == 0

    for fields, field, words in [
        ({"pool": "", "spare": "pool:spare", "min_ready": "2"}, "pool", "Pool: one label"),
        ({"pool": "pool:cq", "spare": "pool:spare", "min_ready": ""}, "min_ready", "Min_ready:"),
        (
            {"pool": "pool:cq", "spare": "pool:spare", "min_ready": "2", "same": "board:eve"},
            "same",
            "is not a label prefix",
        ),
        (
            {"pool": "pool:cq", "spare": "pool:spare", "min_ready": "2", "same": "p " * 21},
            "same",
            "Same: at most 20 label prefixes",
        ),
    ]:
        answer = sam_client.post("/pool-targets/new/", fields, headers=HTMX)
        assert answer.status_code == 400, fields
        page = answer.content.decode()
        assert f'id="id_{field}-error"' in page and words in page, fields
    assert PoolTarget.objects.count() == 0

    good = {"pool": "pool:cq", "spare": "pool:spare", "min_ready": "2", "same": "board, model"}
    added = sam_client.post("/pool-targets/new/", good, headers=HTMX)

    assert added.status_code == 200
    target = PoolTarget.objects.get()
    assert (target.pool, target.spare, target.min_ready, target.same) == (
        "pool:cq",
        "pool:spare",
        2,
        ["board", "model"],
    )
    assert "Added the pool target for pool:cq" in added.content.decode()
    assert HostEvent.objects.filter(actor="sam", subject="pool target pool:cq").exists()
    # The same pool twice: the API's 409, next to the pool field.
    again = sam_client.post("/pool-targets/new/", good, headers=HTMX)
    assert again.status_code == 409
    assert "Pool pool:cq has a target already" in again.content.decode()


def test_staff_change_and_delete_a_target(sam_client, cq):  # noqa: ANN001
    form = sam_client.get(f"/pool-targets/{cq.pk}/edit/").content.decode()
    assert 'value="pool:cq"' in form and 'value="3"' in form and 'value="board"' in form

    refused = sam_client.post(
        f"/pool-targets/{cq.pk}/edit/",
        {"pool": "pool:cq", "spare": "pool:spare", "min_ready": "-1", "same": "board"},
    )
    assert refused.status_code == 400
    assert "Min_ready: a whole number from 0 to 10000" in refused.content.decode()
    cq.refresh_from_db()
    assert cq.min_ready == 3

    saved = sam_client.post(
        f"/pool-targets/{cq.pk}/edit/",
        {"pool": "pool:cq", "spare": "pool:spare", "min_ready": "1", "same": ""},
    )
    assert saved.status_code == 302 and saved["Location"] == f"/pool-targets/{cq.pk}/"
    cq.refresh_from_db()
    assert (cq.min_ready, cq.same) == (1, [])
    assert "Met" in sam_client.get(f"/pool-targets/{cq.pk}/").content.decode()

    deleted = sam_client.post(f"/pool-targets/{cq.pk}/delete/", headers=HTMX)
    assert deleted.status_code == 200 and deleted["HX-Redirect"] == "/pool-targets/"
    assert not PoolTarget.objects.exists()
    assert Host.objects.filter(labels__name="pool:cq").count() == 3  # hosts keep their labels


@pytest.mark.parametrize(
    ("method", "url", "doing"),
    [
        ("get", "/pool-targets/", "see pool targets"),
        ("get", "/pool-targets/{pk}/", "see pool targets"),
        ("get", "/pool-targets/{pk}/edit/", "change pool targets"),
        ("post", "/pool-targets/new/", "add pool targets"),
        ("post", "/pool-targets/{pk}/edit/", "change pool targets"),
        ("post", "/pool-targets/{pk}/delete/", "delete pool targets"),
    ],
)
def test_a_tester_is_refused_every_pool_page(alice_client, cq, method, url, doing):  # noqa: ANN001
    data = {"pool": "pool:x", "spare": "pool:y", "min_ready": "0"} if method == "post" else {}
    answer = getattr(alice_client, method)(url.format(pk=cq.pk), data)

    assert answer.status_code == 403
    assert f"Only lab staff can {doing}." in answer.content.decode()
    cq.refresh_from_db()
    assert (cq.pool, cq.min_ready) == ("pool:cq", 3)
    assert PoolTarget.objects.count() == 1


def test_the_pool_link_is_not_in_a_testers_navigation(alice_client, lab):  # noqa: ANN001
    assert "Pool targets" not in alice_client.get("/hosts/").content.decode()


def test_a_broken_member_a_job_holds_is_shown_waiting_not_swapped(sam_client, cq):  # noqa: ANN001
    # A reservation on cq2: the balancer waits for it rather than pulling it out from under.
    services.lease_reserve(
        host=Host.objects.get(hostname="cq2"),
        holder="sam",
        duration=timedelta(hours=1),
        reason="debug",
    )

    row = sam_client.get("/pool-targets/").content.decode()
    page = sam_client.get(f"/pool-targets/{cq.pk}/").content.decode()

    assert "1 member held by a job" in row and "swap due" not in row
    assert "Waiting for the job that holds them:" in page
    assert "cq2 (repair_failed) waits: a job holds it" in page
    member = page[page.index('id="member-cq2"') :]
    assert "by a job" in member[: member.index("</tr>")]
