"""manage.py purge_host: an admin removes a retired host and its history for real."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command

from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent
from jobs import services as job_services
from jobs.choices import JobStatus
from jobs.models import Job, Lease
from tests import factories as f

pytestmark = pytest.mark.django_db


def ran_a_test() -> Host:
    """A host that ran one test job to the end, then was retired."""
    host = f.host("h1", ["board:x"])
    f.job("J1")
    job_services.scheduler_tick()
    job_services.lease_job_complete(lease=Lease.objects.get(), result="passed", by="runner")
    return job_services.host_delete(host=host, by="sam")


def test_without_yes_it_only_says_what_it_would_remove():
    host = ran_a_test()
    with pytest.raises(CommandError, match=r"would purge h1 \(1 leases, .*add --yes"):
        call_command("purge_host", "h1")
    assert Host.objects.get(pk=host.pk).status == HostStatus.RETIRED


def test_it_removes_the_host_its_leases_and_events_and_keeps_the_jobs_result(capsys):
    host = ran_a_test()

    call_command("purge_host", "h1", "--yes")

    assert not Host.objects.exists()
    assert not Lease.objects.exists()
    assert not HostEvent.objects.filter(host_id=host.pk).exists()
    purged = HostEvent.objects.get()
    assert purged.kind == EventKind.DELETED and purged.subject == "h1"
    assert "purged" in purged.message
    assert Job.objects.get().status == JobStatus.PASSED
    assert "purged h1" in capsys.readouterr().out


def test_it_refuses_a_host_with_an_active_lease_or_an_unknown_name():
    host = f.host("h1")
    job_services.lease_reserve(host=host, holder="sam", duration=timedelta(hours=1), reason="x")
    with pytest.raises(CommandError, match="active lease"):
        call_command("purge_host", "h1", "--yes")
    with pytest.raises(CommandError, match="no host nope"):
        call_command("purge_host", "nope", "--yes")
    assert Host.objects.filter(pk=host.pk).exists()
