"""POST /api/workers/{name}/heartbeat/ with the leases a runner holds: extended, or `gone`."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework import serializers

from hosts.models import HostEvent, Worker
from jobs import services
from jobs.api.host_serializers import WorkerHeartbeatInputSerializer, WorkerHeartbeatSerializer
from jobs.api.serializers import JobStartInputSerializer
from jobs.models import Lease
from tests.api.conftest import active_lease

pytestmark = pytest.mark.django_db


def beat(client, worker: str, body: object) -> object:  # noqa: ANN001
    return client.post(f"/api/workers/{worker}/heartbeat/", body, format="json")


def expiries(*leases: Lease) -> list[object]:
    """The leases' expiry times as they are now, in the order given."""
    return [Lease.objects.get(pk=lease.pk).expires_at for lease in leases]


def test_it_extends_the_workers_leases_and_names_the_ones_gone(runner_client, lab, sam, settings):
    settings.LEASE_TTL = 900
    running, leased, other = (active_lease(j) for j in (lab.running, lab.leased, lab.other))
    released = services.lease_release(lease=leased, by=sam, requeue=True, reason="moved")
    Worker.objects.filter(pk=lab.w1.pk).update(last_seen=timezone.now() - timedelta(seconds=60))
    events = HostEvent.objects.count()

    response = beat(
        runner_client,
        "w1",
        {"leases": [running.pk, released.pk, other.pk, lab.reservation.pk, 999999]},
    )

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["gone"] == sorted([released.pk, other.pk, lab.reservation.pk, 999999])
    assert body["online"] is True and body["lease_ttl"] == 900 and body["name"] == "w1"
    running.refresh_from_db()
    assert running.expires_at - running.heartbeat_at == timedelta(seconds=900)
    assert timezone.now() - running.heartbeat_at < timedelta(seconds=5)
    lab.w1.refresh_from_db()
    assert timezone.now() - lab.w1.last_seen < timedelta(seconds=5)
    # Another worker's lease and a reservation are left exactly as they were.
    assert expiries(other, lab.reservation) == [other.expires_at, lab.reservation.expires_at]
    assert HostEvent.objects.count() == events  # heartbeats are not audited


def test_a_lease_past_its_expiry_is_gone_even_before_the_tick_releases_it(runner_client, lab):
    running = active_lease(lab.running)
    Lease.objects.filter(pk=running.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    body = beat(runner_client, "w1", {"leases": [running.pk, running.pk]}).json()

    assert body["gone"] == [running.pk]
    assert expiries(running)[0] < timezone.now()


def test_without_leases_it_only_marks_the_worker_seen(runner_client, lab):
    running = active_lease(lab.running)
    for body in (None, {}, {"leases": []}):
        response = runner_client.post("/api/workers/w1/heartbeat/", body, format="json")
        assert response.status_code == 200 and response.json()["gone"] == []
    assert expiries(running) == [running.expires_at]


@pytest.mark.parametrize(
    "body",
    [
        {"leases": "1,2"},
        {"leases": 5},
        {"leases": None},
        {"leases": [1, "2"]},
        {"leases": [1.5]},
        {"leases": [True]},
        {"leases": [0]},
        {"leases": [2**63]},
        {"leases": [[1]]},
        {"leases": list(range(1, 5002))},
        [1, 2],
    ],
)
def test_bad_input_is_a_400_that_changes_nothing(runner_client, lab, body):
    running = active_lease(lab.running)
    seen = timezone.now() - timedelta(seconds=60)
    Worker.objects.filter(pk=lab.w1.pk).update(last_seen=seen)

    response = beat(runner_client, "w1", body)

    assert response.status_code == 400, response.content
    assert expiries(running) == [running.expires_at]
    assert Worker.objects.get(pk=lab.w1.pk).last_seen == seen


def test_only_the_workers_runner_or_staff_may_beat_its_leases(
    runner_client, staff_client, alice_client, anon_client, lab
):
    other = active_lease(lab.other)  # on w2, runner-2's
    for client, code in ((runner_client, 403), (alice_client, 403), (anon_client, 401)):
        assert beat(client, "w2", {"leases": [other.pk]}).status_code == code
    assert expiries(other) == [other.expires_at]

    body = beat(staff_client, "w2", {"leases": [other.pk]}).json()

    assert body["gone"] == [] and expiries(other)[0] > other.expires_at


def test_a_retired_workers_heartbeat_is_a_conflict_that_extends_nothing(staff_client, lab):
    running = active_lease(lab.running)
    Worker.objects.filter(pk=lab.w1.pk).update(retired_at=timezone.now())

    response = beat(staff_client, "w1", {"leases": [running.pk]})

    assert response.status_code == 409
    assert expiries(running) == [running.expires_at]


@pytest.mark.parametrize("gone", [[], [7, 2**40]])
def test_the_answer_is_what_drfs_walk_gives(lab, gone):
    serializer = WorkerHeartbeatSerializer()
    for worker in (lab.w1, lab.w3, Worker(name="never-seen")):
        payload = WorkerHeartbeatSerializer.payload(worker, gone)
        walked = serializers.Serializer.to_representation(serializer, payload)
        made = serializer.to_representation(payload)
        assert made == walked and list(made) == list(walked), worker.name
    assert made["last_seen"] is None and made["gone"] == gone


def test_each_body_is_checked_with_fields_of_its_own(runner_client, staff_client, lab):
    # The input fields are built once per process and copied per body: staff may leave the
    # lease out, and what that sets on their copy must not reach the next runner's.
    lease = active_lease(lab.leased)
    staff = JobStartInputSerializer(data={}, lease_required=False)
    runner = JobStartInputSerializer(data={}, lease_required=True)
    assert staff.is_valid() and not runner.is_valid()
    assert staff.fields["lease"] is not runner.fields["lease"]
    answer = runner_client.post(f"/api/jobs/{lab.leased.pk}/start/", {}, format="json")
    assert answer.status_code == 400 and "lease" in answer.json()
    lists = [WorkerHeartbeatInputSerializer(data={"leases": [lease.pk]}) for _ in range(2)]
    assert all(each.is_valid() for each in lists)
    children = [each.fields["leases"].child for each in lists]
    assert children[0] is not children[1]
    assert [child.parent for child in children] == [each.fields["leases"] for each in lists]
    assert lists[0].validated_data == {"leases": [lease.pk]}
