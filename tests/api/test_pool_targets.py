"""/api/pool-targets/: staff only, the contract's field names, a preview that changes nothing."""

from __future__ import annotations

import pytest

from hosts.choices import HostStatus
from hosts.models import Host, HostEvent, PoolTarget
from tests import factories as f

pytestmark = pytest.mark.django_db

BODY = {"pool": "pool:cq", "spare": "pool:spare", "min_ready": 2, "same": ["board"]}


def short_pool() -> None:
    """pool:cq with one member in service, one repair_failed eve, and a ready eve spare."""
    f.host("good", ["board:eve", "pool:cq"])
    bad = f.host("bad", ["board:eve", "pool:cq"])
    Host.objects.filter(pk=bad.pk).update(status=HostStatus.REPAIR_FAILED)
    f.host("spare", ["board:eve", "pool:spare"])
    f.host("kip", ["board:kip", "pool:cq"])
    Host.objects.filter(hostname="kip").update(status=HostStatus.NEEDS_REPAIR)


def test_staff_create_read_change_and_delete_a_target(staff_client):
    made = staff_client.post("/api/pool-targets/", BODY, format="json")

    assert made.status_code == 201, made.json()
    body = made.json()
    assert {k: body[k] for k in BODY} == BODY
    url = f"/api/pool-targets/{body['id']}/"
    assert staff_client.get("/api/pool-targets/").json()["results"][0]["pool"] == "pool:cq"
    changed = staff_client.patch(url, {"min_ready": 8}, format="json")
    assert changed.status_code == 200 and changed.json()["min_ready"] == 8
    assert changed.json()["same"] == ["board"]  # untouched by a partial change
    event = HostEvent.objects.filter(subject="pool target pool:cq").first()
    assert (event.kind, event.actor, event.message) == ("updated", "sam", "min_ready 2 → 8")
    assert staff_client.delete(url).status_code == 204
    assert not PoolTarget.objects.exists()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"min_ready": -1}, "min_ready"),
        ({"spare": "pool:cq"}, "spare"),
        ({"pool": "bad label"}, "pool"),
        ({"same": "board"}, "same"),
        ({"same": ["board:eve"]}, "same"),
    ],
)
def test_a_bad_field_is_a_400_naming_it(staff_client, change, field):
    answer = staff_client.post("/api/pool-targets/", {**BODY, **change}, format="json")

    assert answer.status_code == 400, answer.json()
    assert field in str(answer.json())
    assert not PoolTarget.objects.exists()


def test_a_second_target_for_one_pool_is_a_conflict(staff_client):
    staff_client.post("/api/pool-targets/", BODY, format="json")
    again = staff_client.post("/api/pool-targets/", BODY, format="json")
    assert again.status_code == 409


@pytest.mark.parametrize("who", ["alice_client", "runner_client"])
def test_only_staff_may_read_write_or_preview(request, staff_client, who):
    target = staff_client.post("/api/pool-targets/", BODY, format="json").json()
    client = request.getfixturevalue(who)
    url = f"/api/pool-targets/{target['id']}/"

    assert client.get("/api/pool-targets/").status_code == 403
    assert client.get(url).status_code == 403
    assert client.get(f"{url}preview/").status_code == 403
    assert client.post("/api/pool-targets/", BODY, format="json").status_code == 403
    assert client.patch(url, {"min_ready": 0}, format="json").status_code == 403
    assert client.delete(url).status_code == 403
    assert PoolTarget.objects.get().min_ready == 2


def test_anonymous_is_refused(anon_client):
    assert anon_client.get("/api/pool-targets/").status_code == 401


def test_preview_says_the_swaps_and_warnings_and_changes_nothing(staff_client):
    short_pool()
    target = staff_client.post("/api/pool-targets/", {**BODY, "min_ready": 3}, format="json")
    labels_before = sorted(Host.objects.values_list("hostname", "labels__name"))
    events_before = HostEvent.objects.count()

    answer = staff_client.get(f"/api/pool-targets/{target.json()['id']}/preview/")

    assert answer.status_code == 200
    assert answer.json() == {
        "pool": "pool:cq",
        "min_ready": 3,
        "in_service": 1,
        "swaps": [
            {
                "out": "bad",
                "out_status": "repair_failed",
                "in": "spare",
                "reason": "pool:cq had 1 of 3 hosts in service; bad is repair_failed",
            }
        ],
        "waiting": [],
        "warnings": [
            "no ready spare pool:spare with board:kip to replace kip (needs_repair)",
            "pool:cq stays 1 short of 3 in service: 1 in service, no spare to swap in",
        ],
    }
    assert sorted(Host.objects.values_list("hostname", "labels__name")) == labels_before
    assert HostEvent.objects.count() == events_before
