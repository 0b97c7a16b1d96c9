"""`schedsite reserve`, `reservations` and `release` against a live server: a tester takes a
free host, or waits in the server's line for the next one (docs/cli.md#reserve)."""

from __future__ import annotations

import json
import signal
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.models import Host
from jobs import services
from jobs.models import Lease, Reservation
from tests.e2e.support import token_for

# A live server answers from threads of its own while the test reads the database: SQLite's
# shared in-memory database refuses that ("database table is locked"), as in tests/e2e/.
pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT = ("reserve", "--label", "board:x", "--for", "30m", "--wait", "--interval", "0.2")


def take_board_x(sam) -> list[Lease]:  # noqa: ANN001
    """Staff reserve both board:x hosts (a.lab, b.lab): none is free for a tester."""
    return [
        services.lease_reserve(host=h, holder=sam, duration=timedelta(hours=1), reason="lab work")
        for h in Host.objects.filter(hostname__in=["a.lab", "b.lab"]).order_by("hostname")
    ]


def next_line(process: subprocess.Popen) -> str:
    """The waiting client's next progress line (standard error), its clock cut off."""
    line = process.stderr.readline()
    assert line, f"the client ended early: {process.wait(10)}, {process.stdout.read()}"
    return line.split(" ", 1)[1] if line[:2].isdigit() else line


def test_a_tester_reserves_a_free_host_with_the_label_for_the_duration(cli, lab, alice):
    before = timezone.now()
    done = cli("reserve", "--label", "board:x", "--for", "2h", token=lab["alice"])
    assert done.returncode == 0, done.stderr
    reservation = Reservation.objects.get()
    lease = reservation.lease
    assert (reservation.owner, reservation.status, lease.holder) == (alice, "active", alice)
    assert lease.host.hostname in {"a.lab", "b.lab"} and lease.active
    assert reservation.reason == "schedsite reserve --label board:x"
    assert timedelta(hours=2) <= lease.expires_at - before < timedelta(hours=2, minutes=1)
    assert done.stdout.splitlines() == [
        f"reserved {lease.host.hostname} until {done.stdout.split(' until ')[1].split()[0]} "
        f"(reservation {reservation.pk})",
        f"  give it back: schedsite release {reservation.pk}",
    ]


def test_a_tester_reserves_a_host_by_name_and_gets_the_reservation_as_json(cli, lab):
    done = cli(
        "reserve", "--host", "c.lab", "--for", "90m", "--reason", "bisecting", "--json",
        token=lab["alice"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert (answer["status"], answer["host"], answer["duration"]) == ("active", "c.lab", 5400)
    assert answer["owner"] == "alice" and answer["reason"] == "bisecting"
    assert Lease.objects.get(pk=answer["lease"]).host.hostname == "c.lab"


def test_without_a_free_host_it_exits_1_with_the_servers_reason_and_reserves_nothing(cli, lab, sam):
    take_board_x(sam)
    done = cli("reserve", "--label", "board:x", "--for", "30m", token=lab["alice"])
    assert done.returncode == 1
    assert done.stderr.startswith("schedsite: no host reserved: no free host you may take: ")
    assert "none of the 2 hosts that fit (a host with board:x) is free" in done.stderr
    assert done.stdout == ""
    assert not Reservation.objects.exists()


def test_with_wait_it_waits_in_line_until_a_host_frees_and_the_tick_gives_it(cli, lab, sam):
    held = take_board_x(sam)
    waiting = cli.start(*WAIT, "--reason", "wifi flake", token=lab["alice"])
    first = next_line(waiting)  # said once the server answered
    reservation = Reservation.objects.get()
    assert first == (
        f"reservation {reservation.pk} waits in line for board:x (Ctrl-C leaves the line)\n"
    )
    assert next_line(waiting).startswith("place 1 in line: none of the 2 hosts that fit")
    # A host frees up: the client says so as the server does, and still waits for the tick.
    services.reservation_end(lease=held[1], by=sam)
    assert next_line(waiting) == "place 1 in line: 1 free host fit; the next tick takes one\n"
    assert Reservation.objects.get().status == "waiting"
    assert waiting.poll() is None
    lab["staff"].post("scheduler/tick/")
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 0, err
    reservation.refresh_from_db()
    assert reservation.status == "active" and reservation.lease.host.hostname == "b.lab"
    assert reservation.lease.holder.username == "alice"
    assert out.startswith("reserved b.lab until ")
    assert f"(reservation {reservation.pk})\n  give it back: schedsite release" in out


def test_ctrl_c_while_waiting_takes_the_reservation_out_of_the_line_and_exits_130(cli, lab, sam):
    take_board_x(sam)
    waiting = cli.start(*WAIT, token=lab["alice"])
    next_line(waiting)
    next_line(waiting)  # its place in line: it polls now
    waiting.send_signal(signal.SIGINT)
    out, err = waiting.communicate(timeout=30)
    reservation = Reservation.objects.get()
    assert waiting.returncode == 130, err
    assert f"interrupted: reservation {reservation.pk} left the line" in err
    assert reservation.status == "cancelled" and reservation.lease is None
    assert out == ""


def test_a_reservation_cancelled_elsewhere_while_waiting_ends_the_wait_with_exit_1(cli, lab, sam):
    take_board_x(sam)
    waiting = cli.start(*WAIT, token=lab["alice"])
    next_line(waiting)
    next_line(waiting)
    services.reservation_cancel(reservation=Reservation.objects.get(), by=sam)
    out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 1
    assert "was taken out of the line (cancelled by its owner or lab staff)" in err
    assert out == ""


def test_a_label_no_host_carries_exits_1_with_the_servers_message_even_with_wait(cli, lab):
    done = cli("reserve", "--label", "board:nope", "--for", "1h", "--wait", token=lab["alice"])
    assert done.returncode == 1
    assert done.stderr.startswith("schedsite: no host reserved: labels: no host carries board:nope")
    assert not Reservation.objects.exists()


def test_over_the_per_tester_limit_it_exits_1_naming_the_limit(cli, lab, alice, settings):
    settings.RESERVATION_HOSTS_PER_TESTER = 1
    services.reservation_request(
        owner=alice, host=Host.objects.get(hostname="c.lab"), duration=timedelta(hours=1),
        reason="mine",
    )  # fmt: skip
    done = cli("reserve", "--label", "board:x", "--for", "1h", "--wait", token=lab["alice"])
    assert done.returncode == 1
    assert "you hold or wait for 1 reservation, the most a tester may" in done.stderr
    assert "(RESERVATION_HOSTS_PER_TESTER = 1)" in done.stderr
    assert Reservation.objects.count() == 1


def test_longer_than_a_tester_may_it_exits_1_saying_the_most(cli, lab, settings):
    settings.RESERVATION_TESTER_MAX_SECONDS = 4 * 3600
    done = cli("reserve", "--label", "board:x", "--for", "5h", token=lab["alice"])
    assert done.returncode == 1
    assert "no host reserved: duration: duration may be at most 4h" in done.stderr
    assert not Reservation.objects.exists()


def test_reservations_lists_mine_and_release_ends_one_or_leaves_the_line(cli, lab, alice, bob, sam):
    c_lab = Host.objects.get(hostname="c.lab")
    mine = services.reservation_request(
        owner=alice, host=c_lab, duration=timedelta(hours=1), reason="firmware"
    )
    take_board_x(sam)
    queued = services.reservation_request(
        owner=alice, labels=["board:x"], duration=timedelta(hours=1), reason="wifi", wait=True
    )
    services.reservation_request(
        owner=bob, labels=["board:x"], duration=timedelta(hours=1), reason="bob's", wait=True
    )
    listed = cli("reservations", token=lab["alice"])
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["ID", "STATUS", "HOST", "UNTIL", "WANTS", "REASON"]
    assert [row.split()[:3] for row in rows[:2]] == [
        [str(queued.pk), "waiting", "(1)"],
        [str(mine.pk), "active", "c.lab"],
    ]
    assert rows[2].startswith(f"reservation {queued.pk}, place 1 in line: none of the 2 hosts")
    assert len(rows) == 3  # bob's is not hers
    everyone = json.loads(cli("reservations", "--everyone", "--json", token=lab["alice"]).stdout)
    assert [r["owner"] for r in everyone] == ["bob", "alice", "alice"]

    ended = cli("release", str(mine.pk), token=lab["alice"])
    assert ended.returncode == 0, ended.stderr
    assert ended.stdout == f"reservation {mine.pk} ended: c.lab is free again\n"
    assert not Lease.objects.active().filter(host=c_lab).exists()
    left = cli("release", str(queued.pk), token=lab["alice"])
    assert left.stdout == f"reservation {queued.pk} left the line\n"
    assert Reservation.objects.get(pk=queued.pk).status == "cancelled"
    assert cli("reservations", token=lab["alice"]).stdout == "(no reservations)\n"
    again = cli("release", str(queued.pk), token=lab["alice"])
    assert again.returncode == 2 and "HTTP 409" in again.stderr


def test_another_tester_may_not_release_mine(cli, lab, alice, bob):
    mine = services.reservation_request(
        owner=alice, labels=["board:y"], duration=timedelta(hours=1), reason="firmware"
    )
    done = cli("release", str(mine.pk), token=token_for(bob))
    assert done.returncode == 2 and "not allowed: " in done.stderr
    assert Reservation.objects.get(pk=mine.pk).lease.active


def test_labels_and_a_host_together_or_an_unreadable_duration_are_usage_errors(cli, lab):
    both = cli("reserve", "--label", "board:x", "--host", "a.lab", "--for", "1h", token="t")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    done = cli("reserve", "--label", "board:x", "--for", "two hours", token=lab["alice"])
    assert done.returncode == 2 and "is not a duration" in done.stderr
    assert not Reservation.objects.exists()
