"""A runner's lease list is conditional: 304 with no body while nothing it shows changed.

Each change commits on its own (transactional tests), as in production: PostgreSQL's row
versions, which the list's ETag is made of there, are per committed transaction.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs import services
from jobs.models import Lease
from tests import factories as f
from tests.api.conftest import active_lease
from tests.multihost import lease_hosts, multihost_job, role

pytestmark = pytest.mark.django_db(transaction=True)

W1_LEASES = "/api/workers/w1/leases/"


def listed(client, path: str = W1_LEASES, etag: str | None = None):  # noqa: ANN001, ANN201
    headers = {"If-None-Match": etag} if etag else {}
    return client.get(path, headers=headers)


def fresh(client, etag: str, path: str = W1_LEASES) -> dict:  # noqa: ANN001
    """The list after a change: a 200 with a new ETag, and the list itself."""
    answer = listed(client, path, etag)
    assert answer.status_code == 200, answer.content
    assert answer["ETag"] != etag
    return answer


def names(answer) -> list[str]:  # noqa: ANN001
    return [lease["job"]["name"] for lease in answer.json()["results"]]


def test_an_unchanged_list_is_a_304_with_no_body(runner_client, lab) -> None:  # noqa: ANN001
    first = listed(runner_client)
    assert first.status_code == 200 and first["ETag"].startswith('"')
    for _ in range(2):
        again = listed(runner_client, etag=first["ETag"])
        assert again.status_code == 304
        assert again.content == b""
        assert again["ETag"] == first["ETag"]
    # A list of several tags, a weak one among them, or `*`, matches as well.
    assert listed(runner_client, etag=f'"x", W/{first["ETag"]}').status_code == 304
    assert listed(runner_client, etag="*").status_code == 304
    # An ETag of another list (another page size) or garbage gets the list.
    for other in ('"nope"', "garbage", '""', "W/"):
        assert listed(runner_client, etag=other).status_code == 200
    smaller = listed(runner_client, f"{W1_LEASES}?page_size=1")
    assert smaller["ETag"] != first["ETag"]
    assert listed(runner_client, W1_LEASES, smaller["ETag"]).status_code == 200


def test_each_change_of_the_workers_leases_gets_a_fresh_list(
    runner_client,
    staff_client,
    lab,
    runner_user,  # noqa: ANN001
) -> None:
    etag = listed(runner_client)["ETag"]

    # Acquired: a job for w1's free host, leased by a tick.
    f.host("h4.lab", ["board:x"], worker=lab.w1)
    f.job("new-on-w1", ["board:x"], owner="alice")
    services.scheduler_tick()
    answer = fresh(runner_client, etag)
    assert "new-on-w1" in names(answer)
    etag = answer["ETag"]

    # Heartbeat: the leases' expiry moves.
    lease = active_lease(lab.leased)
    before = {x["id"]: x["expires_at"] for x in answer.json()["results"]}
    beat = runner_client.post("/api/workers/w1/heartbeat/", {"leases": [lease.pk]}, format="json")
    assert beat.status_code == 200 and beat.json()["gone"] == []
    answer = fresh(runner_client, etag)
    after = {x["id"]: x["expires_at"] for x in answer.json()["results"]}
    assert after[lease.pk] != before[lease.pk]
    etag = answer["ETag"]

    # Started: the job is running.
    start = f"/api/jobs/{lab.leased.pk}/start/"
    assert runner_client.post(start, {"lease": lease.pk}, format="json").status_code == 200
    answer = fresh(runner_client, etag)
    status = {x["job"]["name"]: x["job"]["status"] for x in answer.json()["results"]}
    assert status[lab.leased.name] == "running"
    etag = answer["ETag"]

    # The host's labels, changed by staff while it is leased.
    hostname = lease.host.hostname
    patch = staff_client.patch(f"/api/hosts/{hostname}/", {"labels": ["board:x", "usb:3"]})
    assert patch.status_code == 200, patch.content
    answer = fresh(runner_client, etag)
    labels = {x["host"]["hostname"]: x["host"]["labels"] for x in answer.json()["results"]}
    assert "usb:3" in labels[hostname]
    etag = answer["ETag"]

    # Released: the job completes.
    done = {"lease": lease.pk, "result": "passed"}
    complete = runner_client.post(f"/api/jobs/{lab.leased.pk}/complete/", done, format="json")
    assert complete.status_code == 200
    answer = fresh(runner_client, etag)
    assert lab.leased.name not in names(answer)
    etag = answer["ETag"]

    # Expired: a lease past its expiry, ended by the tick.
    expiring = active_lease(lab.running)
    Lease.objects.filter(pk=expiring.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    etag = fresh(runner_client, etag)["ETag"]  # the expiry itself is shown
    services.scheduler_tick()
    answer = fresh(runner_client, etag)
    assert expiring.pk not in [x["id"] for x in answer.json()["results"]]
    assert listed(runner_client, etag=answer["ETag"]).status_code == 304


def test_another_workers_changes_leave_the_list_unchanged(runner_client, lab) -> None:  # noqa: ANN001
    etag = listed(runner_client)["ETag"]
    w2_lease = active_lease(lab.other)
    services.worker_leases_heartbeat(worker=lab.w2, leases=[w2_lease.pk])
    services.job_start(job=lab.other, by="runner-2")
    assert listed(runner_client, etag=etag).status_code == 304


def test_a_multi_host_jobs_hosts_on_other_workers_are_part_of_the_list(
    runner_client,
    lab,
    alice,  # noqa: ANN001
) -> None:
    dut = f.host("dut.lab", ["board:m"], worker=lab.w1)
    peer = f.host("peer.lab", ["bt-peer"], worker=lab.w2)
    job = multihost_job("pair", [role("dut", ["board:m"]), role("peer", ["bt-peer"])], owner=alice)
    etag = listed(runner_client)["ETag"]
    lease_hosts(job, [("dut", dut), ("peer", peer)])
    answer = fresh(runner_client, etag)
    (pair,) = [x for x in answer.json()["results"] if x["job"]["name"] == "pair"]
    assert [h["hostname"] for h in pair["hosts"]] == ["dut.lab", "peer.lab"]
    etag = answer["ETag"]
    assert listed(runner_client, etag=etag).status_code == 304

    # Only the peer's lease, on w2, changes: w1's list shows it in `hosts`.
    Lease.objects.filter(host=peer, released_at=None).update(provision_to="R120-1")
    answer = fresh(runner_client, etag)
    (pair,) = [x for x in answer.json()["results"] if x["job"]["name"] == "pair"]
    assert pair["hosts"][1]["provision_to"] == "R120-1"
    etag = answer["ETag"]

    # The peer's host renamed: w1's list names it anew.
    peer.hostname = "peer2.lab"
    peer.save(update_fields=["hostname"])
    answer = fresh(runner_client, etag)
    (pair,) = [x for x in answer.json()["results"] if x["job"]["name"] == "pair"]
    assert pair["hosts"][1]["hostname"] == "peer2.lab"


@pytest.mark.postgres
def test_a_304_reads_no_lease_rows_only_their_versions(runner_client, lab) -> None:  # noqa: ANN001
    etag = listed(runner_client)["ETag"]
    with CaptureQueriesContext(connection) as captured:
        assert listed(runner_client, etag=etag).status_code == 304
    # The worker, the versions: no count, no page, no prefetches (the runner's token is
    # remembered from the list before: schedsite.api_authentication).
    assert len(captured.captured_queries) == 2, [q["sql"][:120] for q in captured]
    with CaptureQueriesContext(connection) as captured:
        assert listed(runner_client).status_code == 200
    # ... and the list (the token still remembered): the worker, the versions, its page (read
    # with one row more: shorter than a page, it is the whole list and counts itself), the
    # hosts' label names (no attempt of one-host jobs).
    assert len(captured.captured_queries) == 4, [q["sql"][:120] for q in captured]
    assert not any("COUNT(" in q["sql"] for q in captured.captured_queries)
