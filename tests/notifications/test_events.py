"""Each event is announced exactly once: a suite finishing, a host failing repair, a worker gone."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import HostStatus
from hosts.models import Host, Worker
from jobs import services
from jobs import services as job_services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job, Lease, Suite
from notifications import events
from notifications.choices import Channel, DeliveryStatus, EventKind
from notifications.models import Delivery, Event
from notifications.tasks import sweep
from tests import factories as f
from tests.api.conftest import token_client
from tests.factories import run, tick
from tests.notifications.conftest import subscribe

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("sync_tasks")]


rack = pytest.fixture(f.rack)


def finished_events() -> list[Event]:
    return list(Event.objects.filter(kind=EventKind.SUITE_FINISHED))


def test_a_suite_finishing_mails_its_owner_once(rack, alice, django_capture_on_commit_callbacks):
    subscribe(alice)
    suite = f.suite("bvt", 2, owner=alice)
    first, second = suite.jobs.order_by("id")
    t0 = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        tick(t0, rack)
        run(first, JobStatus.PASSED, at=t0)
    assert mail.outbox == []  # one job still running: the suite is not finished

    with django_capture_on_commit_callbacks(execute=True):
        run(second, JobStatus.FAILED, at=t0 + timedelta(seconds=5))

    (message,) = mail.outbox
    assert message.to == ["alice@lab.example"]
    assert message.subject == "[schedsite] Suite bvt completed: 1 passed, 1 failed"
    assert f"/suites/{suite.pk}/" in message.body
    (event,) = finished_events()
    assert event.payload["suite"]["outcome"] == f.outcome(passed=1, failed=1)
    assert event.payload["suite"]["counts"] == {"passed": 1, "failed": 1}
    assert Delivery.objects.get().status == DeliveryStatus.SENT

    # Told again (a late report of the same jobs): nothing more is sent.
    with django_capture_on_commit_callbacks(execute=True):
        assert events.suites_ended([suite.pk]) == 0
    assert len(mail.outbox) == 1 and len(finished_events()) == 1


@pytest.mark.parametrize("subscribed", [True, False])
def test_a_suite_finished_through_the_runner_api_mails_an_owner_who_asked(
    rack, alice, sam, subscribed, django_capture_on_commit_callbacks
):
    # The runner's `complete` reads the owner's settings with the lease: the check after commit
    # is skipped only for an owner who has none.
    if subscribed:
        subscribe(alice)
    suite = f.suite("api", 2, owner=alice)
    client = token_client(sam)
    t0 = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        tick(t0, rack)
    for job in suite.jobs.order_by("id"):
        lease = Lease.objects.active().get(job=job).pk
        for step, body in (("start", {}), ("complete", {"result": "passed"})):
            with django_capture_on_commit_callbacks(execute=True):
                answer = client.post(
                    f"/api/jobs/{job.pk}/{step}/", {"lease": lease, **body}, format="json"
                )
            assert answer.status_code == 200, answer.content

    assert [m.subject for m in mail.outbox] == (
        ["[schedsite] Suite api completed: 2 passed, 0 failed"] if subscribed else []
    )
    assert len(finished_events()) == (1 if subscribed else 0)


def test_a_suite_whose_last_job_expires_in_the_queue_is_announced(
    alice, django_capture_on_commit_callbacks
):
    subscribe(alice)
    suite = f.suite("nightly", 1, owner=alice, expires_after=60)  # no host carries board:x
    later = timezone.now() + timedelta(seconds=120)
    with django_capture_on_commit_callbacks(execute=True):
        services.scheduler_tick(now=later)

    assert Job.objects.get(suite=suite).status == JobStatus.EXPIRED
    (event,) = finished_events()
    assert event.payload["suite"]["outcome"]["failed"] == 1
    assert len(mail.outbox) == 1


def test_an_aborted_suite_is_announced_once_as_aborted(
    rack, alice, django_capture_on_commit_callbacks
):
    subscribe(alice)
    suite = f.suite("cq", 3, owner=alice)
    with django_capture_on_commit_callbacks(execute=True):
        tick(timezone.now(), rack)  # two of its jobs run, one waits
        services.suite_abort(suite=suite, by=alice)

    (event,) = finished_events()
    assert event.payload["suite"]["status"] == "aborted"
    assert event.payload["suite"]["outcome"]["aborted"] == 3
    assert mail.outbox[0].subject.startswith("[schedsite] Suite cq aborted")


def test_the_last_job_aborted_by_its_owner_finishes_the_suite(
    rack, alice, django_capture_on_commit_callbacks
):
    subscribe(alice)
    suite = f.suite("one", 2, owner=alice)
    first, second = suite.jobs.order_by("id")
    with django_capture_on_commit_callbacks(execute=True):
        tick(timezone.now(), rack)
        run(first, JobStatus.PASSED)
        services.job_abort(job=second, by=alice)
    assert len(finished_events()) == 1 and len(mail.outbox) == 1


def test_nothing_is_recorded_when_nobody_asked(
    rack, alice, bob, django_capture_on_commit_callbacks
):
    subscribe(bob)  # Bob wants his own suites, not Alice's
    suite = f.suite("quiet", 1, owner=alice)
    with django_capture_on_commit_callbacks(execute=True):
        tick(timezone.now(), rack)
        run(suite.jobs.get(), JobStatus.PASSED)
    assert Event.objects.count() == 0 and mail.outbox == []


def test_a_suite_can_ask_for_a_webhook_its_owner_does_not_want_by_default(
    rack, alice, receiver, django_capture_on_commit_callbacks
):
    subscribe(alice, events=(), email=False, webhook=receiver.url)  # profile: nothing by default
    suite = f.suite("hooked", 1, owner=alice)
    from notifications.services import suite_notify_set

    suite_notify_set(suite=suite, channels=["webhook"])
    with django_capture_on_commit_callbacks(execute=True):
        tick(timezone.now(), rack)
        run(suite.jobs.get(), JobStatus.PASSED)
    (body,) = receiver.bodies()
    assert body["event"] == "suite_finished" and body["suite"]["id"] == suite.pk
    assert mail.outbox == []


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_last_jobs_ending_at_once_announce_the_suite_exactly_once(rack, alice):
    from tests.threads import race

    subscribe(alice)
    suite = f.suite("race", 2, owner=alice)
    tick(timezone.now(), rack)
    jobs = list(Job.objects.filter(suite=suite))
    for job in jobs:
        services.job_start(job=job, by="runner-1")

    def complete(job: Job):  # noqa: ANN202
        return lambda: services.job_complete(job=job, result=JobStatus.PASSED, by="runner-1")

    results = race(*(complete(job) for job in jobs))
    assert not [r for r in results if isinstance(r, BaseException)]
    assert Suite.objects.get(pk=suite.pk).jobs.filter(status=JobStatus.PASSED).count() == 2
    assert Event.objects.filter(kind=EventKind.SUITE_FINISHED).count() == 1
    assert len(mail.outbox) == 1


# --- hosts ------------------------------------------------------------------------------------


def test_a_host_reaching_repair_failed_tells_subscribed_staff_once(
    rack, sam, alice, settings, django_capture_on_commit_callbacks
):
    settings.REPAIR_MAX_ATTEMPTS = 1
    subscribe(sam, events=("host_repair_failed",))
    subscribe(alice)  # a tester hears nothing of hosts
    t0 = timezone.now()
    job = f.job("J", owner=alice)
    with django_capture_on_commit_callbacks(execute=True):
        tick(t0, rack)
        run(job, JobStatus.PASSED, host_ok=False, at=t0)  # h1 broken: needs_repair
        tick(t0 + timedelta(seconds=1), rack)
        repair = Job.objects.get(kind=JobKind.REPAIR)
        run(repair, JobStatus.FAILED, at=t0 + timedelta(seconds=2))

    assert Host.objects.get(hostname="h1").status == HostStatus.REPAIR_FAILED
    (event,) = Event.objects.filter(kind=EventKind.HOST_REPAIR_FAILED)
    assert event.payload["host"]["hostname"] == "h1"
    assert "repair failed 1 times in a row" in event.payload["host"]["reason"]
    (message,) = mail.outbox
    assert message.to == ["sam@lab.example"]
    assert message.subject == "[schedsite] Host h1 reached repair_failed"

    # Staff send it back to repair; it fails again: a second edge, a second notification.
    with django_capture_on_commit_callbacks(execute=True):
        services.host_repair_now(host=Host.objects.get(hostname="h1"), by=sam)
        tick(t0 + timedelta(seconds=3), rack)
        repair = Job.objects.filter(kind=JobKind.REPAIR).latest("id")
        run(repair, JobStatus.FAILED, at=t0 + timedelta(seconds=4))
    assert Event.objects.filter(kind=EventKind.HOST_REPAIR_FAILED).count() == 2
    assert len(mail.outbox) == 2


def test_staff_setting_a_host_repair_failed_by_hand_is_an_edge_too(
    rack, sam, django_capture_on_commit_callbacks
):
    subscribe(sam, events=("host_repair_failed",), email=False, webhook="")
    # No destination: the event is not even recorded.
    host = Host.objects.get(hostname="h2")
    with django_capture_on_commit_callbacks(execute=True):
        job_services.host_set_status(host=host, status=HostStatus.REPAIR_FAILED, by=sam)
    assert Event.objects.count() == 0

    subscribe(sam, events=("host_repair_failed",))
    with django_capture_on_commit_callbacks(execute=True):
        job_services.host_set_status(host=host, status=HostStatus.READY, by=sam)
        job_services.host_set_status(host=host, status=HostStatus.REPAIR_FAILED, by=sam)
    assert Event.objects.filter(kind=EventKind.HOST_REPAIR_FAILED).count() == 1
    assert Delivery.objects.get().channel == Channel.EMAIL


# --- workers ----------------------------------------------------------------------------------


def test_a_worker_going_offline_is_announced_once_per_outage(
    sam, settings, django_capture_on_commit_callbacks
):
    settings.WORKER_OFFLINE_TIMEOUT = 120
    subscribe(sam, events=("worker_offline",))
    rack = f.worker("rack-7")
    f.host("h7", ["board:x"], worker=rack)
    f.worker("never-seen", online=False)  # never heartbeated: never was online
    now = timezone.now()

    def swept() -> int:
        with django_capture_on_commit_callbacks(execute=True):
            return sweep()["workers_offline"]

    host_services.worker_heartbeat(worker=rack, at=now - timedelta(seconds=60))
    assert swept() == 0  # still online

    Worker.objects.filter(pk=rack.pk).update(last_seen=now - timedelta(seconds=300))
    assert swept() == 1
    assert swept() == 0  # the same outage: said once
    (message,) = mail.outbox
    assert message.subject == "[schedsite] Worker rack-7 went offline"
    assert "1 host(s) take no work" in message.body

    # Back, then gone again: a new outage.
    host_services.worker_heartbeat(worker=rack, at=now - timedelta(seconds=200))
    assert swept() == 1
    assert len(mail.outbox) == 2


def test_an_outage_older_than_the_look_back_is_not_news(sam, settings):
    settings.NOTIFY_OFFLINE_LOOKBACK = 3600
    subscribe(sam, events=("worker_offline",))
    rack = f.worker("rack-old")
    Worker.objects.filter(pk=rack.pk).update(last_seen=timezone.now() - timedelta(days=2))
    assert sweep()["workers_offline"] == 0
    assert mail.outbox == []


def test_a_fanout_finished_by_skipping_its_last_job_mails_its_owner_with_the_skip(
    rack, alice, django_capture_on_commit_callbacks
):
    subscribe(alice)
    h1 = Host.objects.get(hostname="h1")
    host_services.host_lock(host=h1, by="sam", reason="debugging")  # its job waits
    suite = services.suite_submit(owner=alice, name="fan", fanout_labels=["board:x"])
    t0 = timezone.now()
    with django_capture_on_commit_callbacks(execute=True):
        tick(t0, rack)
        run(suite.jobs.get(host__hostname="h2"), JobStatus.PASSED, at=t0)
    assert mail.outbox == []  # h1's job still waits

    with django_capture_on_commit_callbacks(execute=True):
        job_services.host_delete(host=h1, by="sam")  # retired
        tick(t0 + timedelta(seconds=5), rack)

    (message,) = mail.outbox
    assert message.subject == "[schedsite] Suite fan completed: 1 passed, 0 failed, 1 skipped"
    (event,) = finished_events()
    assert event.payload["suite"]["outcome"]["skipped"] == 1
