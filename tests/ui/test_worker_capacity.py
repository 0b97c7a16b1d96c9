"""A worker's max jobs on its form, and the jobs it runs of its capacity on its pages."""

from __future__ import annotations

import pytest

from hosts.choices import EventKind
from hosts.models import HostEvent, Worker
from jobs import services
from tests import factories as f

pytestmark = pytest.mark.django_db


def test_staff_set_and_clear_a_workers_max_jobs_on_its_form(sam_client, lab):
    page = sam_client.get("/workers/w1/rename/").content.decode()
    assert "Max jobs" in page and "the smaller wins" in page

    response = sam_client.post("/workers/w1/rename/", {"name": "w1", "max_jobs": "6"}, follow=True)
    assert response.redirect_chain[-1][0] == "/workers/w1/"
    assert "Saved worker w1." in response.content.decode()
    assert Worker.objects.get(name="w1").max_jobs == 6

    sam_client.post("/workers/w1/rename/", {"name": "w1", "max_jobs": ""})
    assert Worker.objects.get(name="w1").max_jobs is None
    events = HostEvent.objects.filter(worker=lab.w1, kind=EventKind.CAPACITY).order_by("id")
    assert list(events.values_list("actor", "message")) == [
        ("sam", "max jobs unlimited → 6"),
        ("sam", "max jobs 6 → unlimited"),
    ]


def test_the_form_shows_the_max_jobs_it_opened_on(sam_client, lab):
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=3)
    assert 'value="3"' in sam_client.get("/workers/w1/rename/").content.decode()


@pytest.mark.parametrize(("value", "status"), [("0", 400), ("-3", 400), ("lots", 400)])
def test_a_max_jobs_below_one_is_refused_next_to_the_field(sam_client, lab, value, status):
    response = sam_client.post("/workers/w1/rename/", {"name": "w1", "max_jobs": value})
    assert response.status_code == status
    assert 'id="id_max_jobs-error"' in response.content.decode()
    assert Worker.objects.get(name="w1").max_jobs is None
    assert not HostEvent.objects.filter(kind=EventKind.CAPACITY).exists()


def test_staff_add_a_worker_with_max_jobs(sam_client, lab):
    response = sam_client.post("/workers/new/", {"name": "rack9", "max_jobs": "2"})
    assert response["Location"] == "/workers/rack9/"
    assert Worker.objects.get(name="rack9").max_jobs == 2


def test_the_worker_pages_show_the_jobs_running_of_its_capacity(sam_client, alice_client, lab):
    f.job("J1", ["board:eve"])
    services.scheduler_tick()  # J1 runs on h1 or h2, both w1's
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=8, runner_concurrency=5)

    detail = alice_client.get("/workers/w1/").content.decode()
    assert "1 of 5 jobs" in detail
    assert "max jobs 8 · runner concurrency 5" in detail
    listed = alice_client.get("/workers/").content.decode()
    assert "1 of 5 jobs" in listed and "0 jobs (unlimited)" in listed  # w2 sets no limit
    assert "0 jobs (unlimited)" in alice_client.get("/workers/w2/").content.decode()


def test_a_reservation_is_not_a_running_job(sam_client, lab, alices):
    Worker.objects.filter(pk=lab.w1.pk).update(max_jobs=2)
    assert "0 of 2 jobs" in sam_client.get("/workers/w1/").content.decode()
