"""`schedsite hosts`, `lock` and `unlock` against a live server (reserve: test_reservations)."""

from __future__ import annotations

import json

import pytest

from hosts.models import Host

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
