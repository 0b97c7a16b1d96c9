"""`schedsite hosts`, `lock`, `unlock` and `reserve` against a live server."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from jobs.models import Lease
from jobs.services import lease_reserve
from jobs.services.reservations import reservation_end

# A live server answers from threads of its own while the test reads the database: SQLite's
# shared in-memory database refuses that ("database table is locked"), as in tests/e2e/.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_hosts_filters_by_label_and_status(cli, lab):
    done = cli("hosts", "--label", "board:x", token=lab["alice"])
    assert done.returncode == 0, done.stderr
    header, *rows = done.stdout.splitlines()
    assert header.split() == ["HOSTNAME", "WORKER", "STATUS", "LOCKED", "LEASE", "LABELS"]
    assert [row.split()[:3] for row in rows] == [["a.lab", "w1", "ready"], ["b.lab", "w1", "ready"]]
    Host.objects.filter(hostname="b.lab").update(status="needs_repair")
    # The shared options go before the command's name or after it.
    ready = json.loads(cli("--json", "hosts", "--status", "ready", token=lab["alice"]).stdout)
    assert [h["hostname"] for h in ready] == ["a.lab", "c.lab"]
    both = cli("hosts", "--label", "board:x", "--status", "needs_repair", token=lab["alice"])
    assert [row.split()[0] for row in both.stdout.splitlines()[1:]] == ["b.lab"]


def test_a_filter_the_server_refuses_is_exit_2_with_its_message(cli, lab):
    done = cli("hosts", "--status", "melted", token=lab["alice"])
    assert done.returncode == 2
    assert "HTTP 400" in done.stderr and "status: " in done.stderr and "melted" in done.stderr


def test_staff_lock_and_unlock_a_host(cli, lab):
    locked = cli("lock", "a.lab", "--reason", "flaky USB hub", token=lab["sam"])
    assert locked.returncode == 0, locked.stderr
    assert locked.stdout == "locked a.lab: flaky USB hub\n"
    host = Host.objects.get(hostname="a.lab")
    assert (host.locked, host.lock_reason, host.locked_by.username) == (
        True,
        "flaky USB hub",
        "sam",
    )
    listed = cli("hosts", "--label", "board:x", token=lab["sam"]).stdout
    assert "yes: flaky USB hub" in listed
    again = cli("lock", "a.lab", "--reason", "twice", token=lab["sam"])
    assert again.returncode == 2 and "HTTP 409" in again.stderr
    unlocked = cli("unlock", "a.lab", "--json", token=lab["sam"])
    assert unlocked.returncode == 0 and json.loads(unlocked.stdout)["locked"] is False
    assert not Host.objects.get(hostname="a.lab").locked


def test_a_tester_may_not_lock_and_is_told_so(cli, lab):
    done = cli("lock", "a.lab", "--reason", "mine", token=lab["alice"])
    assert done.returncode == 2
    assert done.stderr.startswith("schedsite: not allowed: ")
    assert not Host.objects.get(hostname="a.lab").locked


def test_a_missing_reason_is_a_usage_error(cli, lab):
    done = cli("lock", "a.lab", token=lab["sam"])
    assert done.returncode == 2 and "--reason" in done.stderr


def test_reserve_takes_a_free_host_with_the_label_for_the_duration(cli, lab, sam):
    lease_reserve(
        host=Host.objects.get(hostname="a.lab"), holder=sam, duration=timedelta(hours=1), reason="x"
    )
    before = timezone.now()
    done = cli("reserve", "--label", "board:x", "--for", "2h", "--json", token=lab["sam"])
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    lease = Lease.objects.get(pk=answer["id"])
    assert (lease.host.hostname, lease.job, lease.reason) == (
        "b.lab",
        None,
        "schedsite reserve --label board:x",
    )
    assert timedelta(hours=2) <= lease.expires_at - before < timedelta(hours=2, minutes=1)


def test_reserve_without_a_free_host_exits_1_and_with_wait_takes_the_first_freed(cli, lab, sam):
    held = [
        lease_reserve(host=h, holder=sam, duration=timedelta(hours=1), reason="busy")
        for h in Host.objects.filter(hostname__in=["a.lab", "b.lab"])
    ]
    none_free = cli("reserve", "--label", "board:x", "--for", "30m", token=lab["sam"])
    assert none_free.returncode == 1
    assert "no free host with board:x: all 2 are busy" in none_free.stderr
    waiting = cli.start(
        "reserve", "--label", "board:x", "--for", "30m", "--wait", "--interval", "0.2",
        "--reason", "bisecting", token=lab["sam"],
    )  # fmt: skip
    assert "waiting for a free host with board:x" in waiting.stderr.readline()
    reservation_end(lease=held[1], by=sam)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    freed = held[1].host.hostname
    assert out.startswith(f"reserved {freed} until ")
    lease = Lease.objects.active().get(host__hostname=freed)
    assert lease.reason == "bisecting"


def test_reserve_of_a_label_no_host_carries_fails_at_once_even_with_wait(cli, lab):
    done = cli("reserve", "--label", "board:nope", "--for", "1h", "--wait", token=lab["sam"])
    assert done.returncode == 2
    assert "no host in the lab carries board:nope" in done.stderr


def test_a_tester_may_not_reserve(cli, lab):
    done = cli("reserve", "--label", "board:x", "--for", "1h", token=lab["alice"])
    assert done.returncode == 2 and "not allowed: " in done.stderr
    assert not Lease.objects.exists()


def test_a_duration_it_cannot_read_is_a_usage_error(cli, lab):
    done = cli("reserve", "--label", "board:x", "--for", "two hours", token=lab["sam"])
    assert done.returncode == 2 and "is not a duration" in done.stderr
