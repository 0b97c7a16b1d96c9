"""The transactional outbox: a job's end writes its notification's entry in its own transaction.

A process that dies right after that commit, before any after-commit work, loses nothing: the
sweep turns the entry into the notification, exactly once however often it runs
(docs/notifications.md#the-outbox).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from django.core import mail
from django.db import transaction
from django.utils import timezone
from django_q.models import OrmQ

from jobs import services
from jobs.choices import JobStatus, OutboxKind
from jobs.models import Job, Lease, OutboxEntry
from notifications.choices import EventKind
from notifications.models import Delivery, Event
from notifications.queue import OUTBOX_FUNC
from notifications.tasks import sweep
from tests import factories as f
from tests.api.conftest import token_client
from tests.notifications.conftest import subscribe
from tests.reliability.support import live_database_url, processes, subprocess_env

__all__ = ["processes"]  # the fixture, used by name

rack = pytest.fixture(f.rack)

# Run in a child process: end the job in a transaction whose FIRST after-commit callback kills
# the process, so the commit happens and none of the move's own after-commit work does.
CHILD = """
import os, signal, sys
from django.db import transaction
from jobs import services
from jobs.models import Job

job = Job.objects.get(pk={job_id})
with transaction.atomic():
    transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
    services.job_complete(job=job, result="passed", by="runner-1")
print("survived the commit", flush=True)
sys.exit(3)
"""


def queued_funcs() -> list[str]:
    """The functions of the tasks waiting in the (database) queue."""
    return [task.func() for task in OrmQ.objects.all()]


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_process_killed_right_after_the_commit_still_notifies_exactly_once(
    rack, alice, processes, sync_tasks, tmp_path: Path
):
    subscribe(alice)
    suite = f.suite("crash", 1, owner=alice)
    f.tick(timezone.now(), rack)
    job = Job.objects.get(suite=suite)
    services.job_start(job=job, by="runner-1")

    child = processes(
        "complete",
        "shell",
        "-c",
        CHILD.format(job_id=job.pk),
        env=subprocess_env(DATABASE_URL=live_database_url("outbox-kill")),
    )
    assert child.popen.wait(60) == -signal.SIGKILL, child.output()

    # The move committed; the process died before it could wake anyone.
    job.refresh_from_db()
    assert job.status == JobStatus.PASSED
    assert OUTBOX_FUNC not in queued_funcs()
    assert Delivery.objects.count() == 0 and mail.outbox == []
    (entry,) = OutboxEntry.objects.all()
    assert (entry.kind, entry.handled_at) == (OutboxKind.JOBS_ENDED, None)
    assert entry.payload["suite_ids"] == [suite.pk]

    # The periodic sweep is the safety net: the suite is announced once...
    assert sweep()["outbox"] == 1
    (event,) = Event.objects.filter(kind=EventKind.SUITE_FINISHED)
    assert event.payload["suite"]["id"] == suite.pk
    (delivery,) = Delivery.objects.all()
    assert delivery.user == alice
    assert [m.subject for m in mail.outbox] == [
        "[schedsite] Suite crash completed: 1 passed, 0 failed"
    ]
    entry.refresh_from_db()
    assert entry.handled_at is not None

    # ...and only once, however often the sweep runs again.
    assert sweep()["outbox"] == 0
    assert Delivery.objects.count() == 1 and len(mail.outbox) == 1
    OutboxEntry.objects.update(handled_at=None)  # even an entry taken twice announces once
    assert sweep()["outbox"] == 1
    assert Delivery.objects.count() == 1 and len(mail.outbox) == 1


class Undo(Exception):
    pass


@pytest.mark.django_db(transaction=True)
def test_the_entry_is_written_in_the_moves_own_transaction(rack, alice):
    subscribe(alice)
    suite = f.suite("undone", 1, owner=alice)
    f.tick(timezone.now(), rack)
    job = Job.objects.get(suite=suite)
    services.job_start(job=job, by="runner-1")

    # A move rolled back leaves no entry (and no notification) behind.
    with pytest.raises(Undo), transaction.atomic():
        services.job_complete(job=job, result="passed", by="runner-1")
        assert OutboxEntry.objects.count() == 1  # written inside, before the commit
        raise Undo
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    assert OutboxEntry.objects.count() == 0

    # The same move committed leaves exactly one.
    services.job_complete(job=job, result="passed", by="runner-1")
    (entry,) = OutboxEntry.objects.all()
    assert entry.payload["suite_ids"] == [suite.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("subscribed", [True, False])
def test_the_runners_complete_writes_an_entry_only_for_an_owner_with_settings(
    rack, alice, bob, sam, subscribed
):
    # `complete` reads the owner's settings with the lease: an owner who has none cannot be
    # told anything, and costs no entry (docs/performance.md#the-runner-protocol).
    subscribe(bob)  # someone else's settings do not count
    if subscribed:
        subscribe(alice)
    suite = f.suite("quiet", 1, owner=alice)
    f.tick(timezone.now(), rack)
    job = Job.objects.get(suite=suite)
    lease = Lease.objects.active().get(job=job).pk
    client = token_client(sam)
    for step, body in (("start", {}), ("complete", {"result": "passed"})):
        answer = client.post(f"/api/jobs/{job.pk}/{step}/", {"lease": lease, **body}, format="json")
        assert answer.status_code == 200, answer.content
    assert OutboxEntry.objects.count() == (1 if subscribed else 0)
