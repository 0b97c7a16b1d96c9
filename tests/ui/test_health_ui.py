"""The host health card, its staff buttons, the hosts status filter and the policies page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from hosts import services as host_services
from hosts.choices import EventKind, HostStatus
from hosts.models import HealthPolicy, Host, HostEvent
from jobs import services
from jobs.choices import JobKind, JobStatus
from jobs.models import Job
from jobs.scheduling.maintenance import create_maintenance_jobs
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

POLICY = {"name": "eve daily", "labels": "board:eve", "every_jobs": "", "every_hours": "24"}


def refreshed(obj):  # noqa: ANN001, ANN201
    obj.refresh_from_db()
    return obj


def failed_repairs(host: Host, n: int = 3) -> Host:
    """The host after n failed repairs in a row, as the tick leaves it."""
    Host.objects.filter(pk=host.pk).update(
        status=HostStatus.REPAIR_FAILED, repair_attempts=n, last_verified_at=None
    )
    return refreshed(host)


def policy(**fields: object) -> HealthPolicy:
    values = {"name": "eve daily", "labels": ["board:eve"], "every_hours": 24, **fields}
    return host_services.health_policy_create(by="sam", **values)


# --- the host page --------------------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("who", ["sam_client", "alice_client"])
def test_the_host_page_shows_the_health_card_to_everyone(request, lab, settings, debug, who):
    settings.DEBUG = debug
    client = request.getfixturevalue(who)
    failed_repairs(lab.h1)

    response = client.get("/hosts/h1.lab/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "Health" in html and "Maintenance history" in html
    assert '<span class="badge tone-red">Repair failed</span>' in html
    assert "3 of 3 failed in a row" in html
    assert "After its repair: the automatic one, or staff press Repair now" in html
    staff = who == "sam_client"
    assert ("Repair now</button>" in html) is staff and ("Retire</button>" in html) is staff
    assert "Verify now" not in html  # a host that needs repair is not verified


def test_the_next_check_counts_the_jobs_left_under_the_policy_that_applies(alice_client, lab):
    policy(every_jobs=5, every_hours=None)
    Host.objects.update(last_verified_at=timezone.now())
    f.job("t1", ["board:eve", "pool:cq"])
    services.scheduler_tick()  # one test job leased on h1.lab since its verify

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    assert "After 4 more jobs" in html
    assert 'href="/health-policies/#policy-' in html and ">eve daily</a>" in html


@pytest.mark.parametrize(
    ("verified_hours_ago", "text"),
    [
        (None, "Due now: never verified"),
        (30, "Due now: last verified over 24 h ago"),
        (21, "In 3h"),
    ],
)
def test_the_next_check_by_hours(alice_client, lab, verified_hours_ago, text):
    policy(every_hours=24)
    if verified_hours_ago is not None:
        at = timezone.now() - timedelta(hours=verified_hours_ago)
        Host.objects.filter(pk=lab.h1.pk).update(last_verified_at=at)

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    assert text in html


def test_a_host_no_policy_selects_is_never_verified_automatically(alice_client, lab):
    policy()  # board:eve; h3 is a kevin

    html = alice_client.get("/hosts/h3.lab/").content.decode()

    assert "No policy: never verified automatically" in html and "none applies" in html


def test_the_maintenance_history_lists_the_hosts_verify_and_repair_jobs(alice_client, lab):
    create_maintenance_jobs([(lab.h1, JobKind.VERIFY)], now=timezone.now(), why="staff")
    services.scheduler_tick()
    job = Job.objects.get(kind=JobKind.VERIFY)
    services.job_complete(job=job, result=JobStatus.FAILED, by="runner-1", message="no ssh")

    html = alice_client.get("/hosts/h1.lab/").content.decode()

    history = html[html.index("Maintenance history") :]
    assert f'<a href="/jobs/{job.pk}/">Verify #{job.pk}</a></th>' in history
    assert "tone-red" in history and "no ssh" in history


# --- the staff buttons ----------------------------------------------------------------------


def test_verify_now_queues_a_verify_and_answers_with_the_page_body(sam_client, lab):
    response = sam_client.post("/hosts/h1.lab/verify/", {"fragment": "detail"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="host-detail"')
    assert "Verify job queued for h1.lab" in html
    assert "A verify or repair job is queued or running" in html
    assert "Verify now" not in html  # one at a time
    job = Job.objects.get(host=lab.h1)
    assert job.kind == JobKind.VERIFY and job.status == JobStatus.QUEUED
    assert HostEvent.objects.filter(host=lab.h1, job_id=job.pk, actor="sam").exists()


def test_repair_now_gives_a_failed_host_another_round(sam_client, lab):
    failed_repairs(lab.h1)

    response = sam_client.post("/hosts/h1.lab/repair/", {"fragment": "detail"}, headers=HTMX)

    assert response.status_code == 200
    host = refreshed(lab.h1)
    assert host.status == HostStatus.NEEDS_REPAIR and host.repair_attempts == 0
    assert Job.objects.filter(host=host, kind=JobKind.REPAIR).exists()
    event = HostEvent.objects.get(host=host, kind=EventKind.STATUS)
    assert (event.actor, event.old_status, event.new_status) == (
        "sam",
        HostStatus.REPAIR_FAILED,
        HostStatus.NEEDS_REPAIR,
    )
    assert "0 of 3" in response.content.decode()


def test_retire_keeps_a_host_with_history_out_of_service(sam_client, lab):
    host_services.host_lock(host=lab.h1, by="sam", reason="broken")
    host_services.host_unlock(host=lab.h1, by="sam")

    response = sam_client.post("/hosts/h1.lab/retire/", {"fragment": "detail"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 200
    assert '<span class="badge tone-grey">Retired</span>' in html
    assert "Retire</button>" not in html and "Repair now" not in html
    assert refreshed(lab.h1).status == HostStatus.RETIRED
    assert HostEvent.objects.filter(host=lab.h1, kind=EventKind.RETIRED, actor="sam").exists()


def test_retiring_a_host_without_history_deletes_it_and_goes_to_the_list(sam_client, lab):
    response = sam_client.post("/hosts/h1.lab/retire/", {"fragment": "detail"}, headers=HTMX)

    assert response.status_code == 200 and response["HX-Redirect"] == "/hosts/"
    assert not Host.objects.filter(hostname="h1.lab").exists()
    assert "Deleted h1.lab: it had no history" in sam_client.get("/hosts/").content.decode()


@pytest.mark.parametrize("debug", [True, False])
def test_retiring_a_leased_host_shows_the_conflict_in_the_card(sam_client, lab, settings, debug):
    settings.DEBUG = debug
    f.job("t1", ["board:kevin"])
    services.scheduler_tick()  # h3.lab holds the lease

    response = sam_client.post("/hosts/h3.lab/retire/", {"fragment": "detail"}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 409
    assert 'id="health-error"' in html and "has an active lease; release it first" in html
    assert html.lstrip().startswith('<div id="host-detail"')  # the page stays usable
    assert refreshed(lab.h3).status == HostStatus.READY


def test_verify_now_on_a_host_that_needs_repair_says_why_not(sam_client, lab):
    failed_repairs(lab.h1)

    response = sam_client.post("/hosts/h1.lab/verify/", {"fragment": "detail"}, headers=HTMX)

    assert response.status_code == 409
    assert "Host h1.lab needs repair: use repair" in response.content.decode()
    assert not Job.objects.exists()


def test_without_javascript_an_action_redirects_back_with_its_result(sam_client, lab):
    response = sam_client.post("/hosts/h1.lab/verify/", {"fragment": "detail"}, follow=True)

    assert response.status_code == 200
    assert "Verify job queued for h1.lab" in response.content.decode()


@pytest.mark.parametrize("action", ["verify", "repair", "retire"])
def test_a_tester_may_not_press_the_staff_buttons(alice_client, lab, action):
    failed_repairs(lab.h2)
    before = HostEvent.objects.count()

    response = alice_client.post(f"/hosts/h2.lab/{action}/", {"fragment": "detail"}, headers=HTMX)

    assert response.status_code == 403
    assert "Only lab staff can" in response.content.decode()
    assert refreshed(lab.h2).status == HostStatus.REPAIR_FAILED
    assert not Job.objects.exists() and HostEvent.objects.count() == before


# --- the hosts list -------------------------------------------------------------------------


def test_the_status_filter_offers_every_status_and_shows_retired_hosts_only_when_asked(
    alice_client, lab
):
    failed_repairs(lab.h1)
    Host.objects.filter(pk=lab.h2.pk).update(status=HostStatus.RETIRED)

    page = alice_client.get("/hosts/").content.decode()
    failed = alice_client.get("/hosts/?status=repair_failed").content.decode()
    retired = alice_client.get("/hosts/?status=retired").content.decode()

    for value in HostStatus.values:
        assert f'name="status" value="{value}"' in page
    assert ">h2.lab</a>" not in page and ">h1.lab</a>" in page
    assert ">h1.lab</a>" in failed and ">h3.lab</a>" not in failed
    assert '<span class="badge tone-red">Repair failed</span>' in failed
    assert ">h2.lab</a>" in retired and '<span class="badge tone-grey">Retired</span>' in retired


@pytest.mark.parametrize(
    ("status", "tone"),
    [
        (HostStatus.NEEDS_VERIFY, "teal"),
        (HostStatus.VERIFYING, "indigo"),
        (HostStatus.NEEDS_REPAIR, "amber"),
        (HostStatus.REPAIRING, "blue"),
    ],
)
def test_each_health_status_has_its_own_colour_and_its_words(alice_client, lab, status, tone):
    Host.objects.filter(pk=lab.h1.pk).update(status=status)

    html = alice_client.get(f"/hosts/?status={status}").content.decode()

    assert f'<span class="badge tone-{tone}">{HostStatus(status).label}</span>' in html


# --- the policies page ----------------------------------------------------------------------


@pytest.mark.parametrize("debug", [True, False])
@pytest.mark.parametrize("who", ["sam_client", "alice_client"])
def test_everyone_reads_the_policies_with_the_hosts_each_selects(
    request, lab, settings, debug, who
):
    settings.DEBUG = debug
    client = request.getfixturevalue(who)
    policy()
    policy(name="all weekly", labels=[], every_hours=168, enabled=False)

    response = client.get("/health-policies/")

    html = response.content.decode()
    assert response.status_code == 200
    assert ">eve daily</a>" in html and ">all weekly</a>" in html
    assert ">2</a></td>" in html and ">3</a></td>" in html  # eve: h1, h2; all: every host
    assert "Disabled" in html and "every host" in html
    assert ('href="/health-policies/"' in html) and "Health policies</a>" in html  # navigation
    assert ("Add a policy" in html) is (who == "sam_client")
    detail = client.get(f"/health-policies/{HealthPolicy.objects.first().pk}/")
    assert detail.status_code == 200


def test_staff_add_a_policy_and_it_is_audited(sam_client, lab):
    response = sam_client.post("/health-policies/", POLICY, headers=HTMX)

    assert response.status_code == 200, response.content.decode()
    added = HealthPolicy.objects.get()
    assert (added.name, added.labels, added.every_hours, added.every_jobs) == (
        "eve daily",
        ["board:eve"],
        24,
        None,
    )
    assert added.enabled is False  # the box was not ticked
    assert "Added health policy eve daily" in response.content.decode()
    event = HostEvent.objects.get(subject="health policy eve daily")
    assert event.kind == EventKind.CREATED and event.actor == "sam"
    assert "board:eve" in event.message and "every_hours 24" in event.message


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ({"every_hours": "0"}, "every_hours", "from 1 to 100000"),
        ({"every_jobs": "many"}, "every_jobs", "Enter a whole number"),
        ({"labels": "board:eve!"}, "labels", "Labels &#x27;board:eve!&#x27;: Use letters"),
        ({"name": ""}, "name", "1 to 100 characters"),
        ({"name": "-dash first"}, "name", "Start with a letter or digit"),
    ],
)
def test_a_bad_policy_shows_the_error_next_to_its_field(sam_client, lab, change, field, words):
    events = HostEvent.objects.count()

    response = sam_client.post("/health-policies/", {**POLICY, **change}, headers=HTMX)

    html = response.content.decode()
    assert response.status_code == 400
    assert f'id="id_{field}-error"' in html and words in html
    assert f'value="{POLICY["labels"]}"' in html or field == "labels"  # what was typed is kept
    assert not HealthPolicy.objects.exists() and HostEvent.objects.count() == events


def test_a_name_in_use_is_a_conflict_on_the_name(sam_client, lab):
    policy()

    response = sam_client.post("/health-policies/", POLICY, headers=HTMX)

    assert response.status_code == 409
    assert 'id="id_name-error"' in response.content.decode()
    assert HealthPolicy.objects.count() == 1


def test_without_javascript_a_bad_policy_is_the_page_with_the_error(sam_client, lab):
    response = sam_client.post("/health-policies/", {**POLICY, "every_hours": "0"})

    assert response.status_code == 400
    html = response.content.decode()
    assert "<!doctype html>" in html and 'id="id_every_hours-error"' in html


def test_staff_change_a_policy_on_its_page_and_the_event_says_old_and_new(sam_client, lab):
    eve = policy()
    url = f"/health-policies/{eve.pk}/"

    response = sam_client.post(
        url, {**POLICY, "every_hours": "12", "every_jobs": "50", "enabled": "on"}, headers=HTMX
    )

    assert response.status_code == 200 and response["HX-Redirect"] == "/health-policies/"
    eve = refreshed(eve)
    assert (eve.every_hours, eve.every_jobs) == (12, 50)
    event = HostEvent.objects.get(kind=EventKind.UPDATED, subject="health policy eve daily")
    assert "every_hours 24 → 12" in event.message and "every_jobs never → 50" in event.message


def test_a_bad_change_keeps_the_policy_as_it_was(sam_client, lab):
    eve = policy()

    response = sam_client.post(
        f"/health-policies/{eve.pk}/", {**POLICY, "every_hours": "-3"}, headers=HTMX
    )

    assert response.status_code == 400
    assert 'id="id_every_hours-error"' in response.content.decode()
    assert refreshed(eve).every_hours == 24
    assert not HostEvent.objects.filter(kind=EventKind.UPDATED).exists()


def test_staff_disable_enable_and_delete_a_policy_from_its_row(sam_client, lab):
    eve = policy()

    disabled = sam_client.post(f"/health-policies/{eve.pk}/disable/", headers=HTMX)
    assert disabled.status_code == 200 and refreshed(eve).enabled is False
    assert "Disabled health policy eve daily" in disabled.content.decode()
    sam_client.post(f"/health-policies/{eve.pk}/enable/", headers=HTMX)
    assert refreshed(eve).enabled is True
    deleted = sam_client.post(f"/health-policies/{eve.pk}/delete/", headers=HTMX)

    assert deleted.status_code == 200 and not HealthPolicy.objects.exists()
    kinds = list(
        HostEvent.objects.filter(subject="health policy eve daily")
        .order_by("id")
        .values_list("kind", flat=True)
    )
    assert kinds == ["created", "updated", "updated", "deleted"]


@pytest.mark.parametrize(
    ("path", "data"),
    [
        ("/health-policies/", POLICY),
        ("/health-policies/{pk}/", {**POLICY, "every_hours": "1"}),
        ("/health-policies/{pk}/disable/", {}),
        ("/health-policies/{pk}/delete/", {}),
    ],
)
def test_a_tester_may_not_change_policies(alice_client, lab, path, data):
    eve = policy(name="kept")
    before = HostEvent.objects.count()

    response = alice_client.post(path.format(pk=eve.pk), data, headers=HTMX)

    assert response.status_code == 403
    assert list(HealthPolicy.objects.values_list("name", "every_hours", "enabled")) == [
        ("kept", 24, True)
    ]
    assert HostEvent.objects.count() == before


def test_the_admin_adds_and_deletes_policies_through_the_audited_services(lab, django_user_model):
    root = f.signed_in(django_user_model.objects.create_superuser("root", password="root-pass"))
    root.post(
        "/admin/hosts/healthpolicy/add/",
        {"name": "admin made", "labels": "board:eve", "every_hours": "6", "every_jobs": ""},
    )
    made = HealthPolicy.objects.get(name="admin made")
    root.post(f"/admin/hosts/healthpolicy/{made.pk}/delete/", {"post": "yes"})

    events = HostEvent.objects.filter(subject="health policy admin made").order_by("id")
    assert [(e.kind, e.actor) for e in events] == [("created", "root"), ("deleted", "root")]
    assert not HealthPolicy.objects.exists()


def test_the_policies_page_costs_the_same_queries_for_two_policies_as_for_ten(alice_client, lab):
    for n in range(2):
        policy(name=f"p{n}", labels=["board:eve"])
    alice_client.get("/health-policies/")  # the session and the like, loaded once
    with CaptureQueriesContext(connection) as two:
        alice_client.get("/health-policies/")
    for n in range(2, 10):
        policy(name=f"p{n}", labels=[f"pool:{n}"])

    with CaptureQueriesContext(connection) as ten:
        html = alice_client.get("/health-policies/").content.decode()

    assert html.count('<tr id="policy-') == 10
    assert len(ten.captured_queries) == len(two.captured_queries)
