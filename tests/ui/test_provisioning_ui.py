"""Provisioning on the pages: a host's build and when it was put there, the dashboard's
provisions per hour, a failed provisioning in the timeline, the queue's reimage count."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from hosts.choices import EventKind, ProvisionResult
from hosts.models import Host, HostEvent, Provision
from jobs import services
from jobs.models import Lease
from tests import factories as f

pytestmark = pytest.mark.django_db


def provisioned(host: Host, build: str, *, hours_ago: float) -> None:
    Host.objects.filter(pk=host.pk).update(
        current_build=build, provisioned_at=timezone.now() - timedelta(hours=hours_ago)
    )


def test_the_host_page_says_its_build_and_when_it_was_provisioned(alice_client, lab):
    provisioned(lab.h1, "R121-1", hours_ago=2)

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    build = html[html.index('id="host-build"') :]
    build = build[: build.index("</dd>")]
    assert "R121-1" in build
    assert "provisioned <time" in build and "2h" in build and " ago</time>" in build


def test_a_host_never_provisioned_shows_only_its_build(alice_client, lab):
    Host.objects.filter(pk=lab.h1.pk).update(current_build="R120-1")

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    build = html[html.index('id="host-build"') :]
    assert "R120-1" in build[: build.index("</dd>")]
    assert "provisioned" not in build[: build.index("</dd>")]


def test_the_hosts_list_shows_each_build_and_when_it_was_provisioned(alice_client, lab):
    provisioned(lab.h1, "R121-1", hours_ago=2)
    Host.objects.filter(pk=lab.h2.pk).update(current_build="R120-1")

    html = alice_client.get("/hosts/").content.decode()

    row = html[html.index(f'id="host-{lab.h1.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "R121-1 · provisioned <time" in row
    # The exact moment, with its time zone, is in the tooltip like every other time.
    when = timezone.localtime(Host.objects.get(pk=lab.h1.pk).provisioned_at)
    assert f'title="{when:%Y-%m-%d %H:%M:%S %Z}"' in row
    other = html[html.index(f'id="host-{lab.h2.pk}"') :]
    other = other[: other.index("</tr>")]
    assert "R120-1" in other and "provisioned" not in other


def test_a_failed_provisioning_is_red_in_the_timeline_with_its_output(alice_client, lab):
    now = timezone.now()
    for build, result, lease_id, message in [
        ("R120-1", ProvisionResult.OK, 7, "provisioned to R120-1 in 4m 10s"),
        (
            "R121-1",
            ProvisionResult.FAILED,
            8,
            "provisioning to R121-1 failed\nflashing...\nerror: device not found",
        ),
    ]:
        Provision.objects.create(
            host=lab.h1, hostname="h1.lab", board="board:eve", build=build, result=result,
            lease_id=lease_id, created_at=now,
        )  # fmt: skip
        HostEvent.objects.create(
            host=lab.h1, subject="h1.lab", kind=EventKind.PROVISIONED, actor="runner-1",
            message=message, lease_id=lease_id, created_at=now,
        )  # fmt: skip

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    timeline = html[html.index('class="timeline"') :]
    failed = timeline[: timeline.index("</li>")]  # newest first: the failure
    assert '<span class="badge tone-red">Provisioning failed</span>' in failed
    assert "provisioning to R121-1 failed" in failed
    assert '<pre class="example event-output">flashing...\nerror: device not found</pre>' in failed
    ok = timeline[timeline.index("</li>") + 5 :]
    ok = ok[: ok.index("</li>")]
    assert '<span class="badge tone-green">Provisioned</span>' in ok
    assert "provisioned to R120-1 in 4m 10s" in ok


def test_the_dashboard_counts_provisions_per_hour_and_hours_spent(alice_client, lab):
    now = timezone.now()
    for i in range(12):
        Provision.objects.create(
            hostname="h1.lab", board="board:eve", build="R121", result=ProvisionResult.OK,
            seconds=600, created_at=now - timedelta(hours=i),
        )  # fmt: skip
    Provision.objects.create(
        hostname="h1.lab", board="board:eve", build="R121", result=ProvisionResult.FAILED,
        seconds=None, created_at=now - timedelta(hours=3),
    )  # fmt: skip
    Provision.objects.create(  # older than a day: not counted
        hostname="h1.lab", board="board:eve", build="R120", result=ProvisionResult.OK,
        seconds=600, created_at=now - timedelta(hours=30),
    )  # fmt: skip

    html = alice_client.get("/").content.decode()

    card = html[html.index('id="provision-stats"') :]
    card = card[: card.index("</div>\n    </div>") if "</div>\n    </div>" in card else 600]
    # 13 in 24 hours: 0.5 an hour; 12 × 10 minutes = 2 hours.
    assert '<div class="value">0.5 <span class="sub">/ hour</span></div>' in card
    assert "13 in 24 h · 2.0 h spent · 1 failed" in card


def test_the_queue_says_how_many_of_the_last_ticks_leases_reimage(alice_client, lab):
    Host.objects.filter(pk=lab.h2.pk).update(current_build="R121")  # h1 carries no build
    f.suite("nightly", 2, labels=["board:eve"], build="R121")
    f.job("waits", ["board:none"])
    services.scheduler_tick()  # leases h1 (provision_to R121) and h2 (already on R121)
    assert Lease.objects.get(host=lab.h1).provision_to == "R121"

    html = alice_client.get("/queue/").content.decode()

    assert '(2 leases made, <span id="tick-provisions">1 of them after a reimage to R121' in html


def test_the_queue_names_no_reimage_when_no_lease_provisions(alice_client, lab):
    Host.objects.filter(pk__in=[lab.h1.pk, lab.h2.pk]).update(current_build="R121")
    f.suite("nightly", 2, labels=["board:eve"], build="R121")
    f.job("waits", ["board:none"])
    services.scheduler_tick()

    html = alice_client.get("/queue/").content.decode()

    assert "(2 leases made)" in html
    assert "reimage" not in html


def test_provisionings_are_read_only_in_the_admin(client, django_user_model, lab):
    root = django_user_model.objects.create_superuser("root", password="root-pass")
    client.force_login(root)
    row = Provision.objects.create(
        host=lab.h1, hostname="h1.lab", board="board:eve", build="R121",
        result=ProvisionResult.OK, seconds=300,
    )  # fmt: skip
    base = "/admin/hosts/provision/"

    assert client.get(base).status_code == 200
    assert "R121" in client.get(base).content.decode()
    assert client.get(f"{base}{row.pk}/change/").status_code == 200
    assert client.get(f"{base}add/").status_code == 403
    assert client.post(f"{base}{row.pk}/change/", {"build": "forged"}).status_code == 403
    assert client.post(f"{base}{row.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Provision.objects.get(pk=row.pk).build == "R121"
