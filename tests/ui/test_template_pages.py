"""The suite templates pages: list, detail, dispatch, edit, delete and save from a suite."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django_q.models import Schedule

from jobs import suite_templates
from jobs.choices import SuiteOrigin
from jobs.models import Suite, SuiteTemplate
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

BODY = {"name": "bvt", "build": "R1", "jobs": [{"name": "login", "labels": ["board:eve"]}]}


@pytest.fixture
def bvt(lab, alice) -> SuiteTemplate:  # noqa: ANN001
    return suite_templates.template_create(
        by=alice, name="bvt nightly", body=BODY, cron="0 2 * * *"
    )


def test_the_list_shows_schedule_next_and_last_run_with_its_suite(bob_client, bvt, alice):
    suite_templates.template_run(template_id=bvt.pk, slot=datetime(2026, 11, 23, 2, 0, tzinfo=UTC))
    suite = Suite.objects.get()

    html = bob_client.get("/templates/").content.decode()

    assert "bvt nightly" in html and "0 2 * * *" in html and "At 02:00" in html
    assert f'href="/suites/{suite.pk}/"' in html and "created" in html and "queued" in html
    assert 'aria-current="page">Templates' in html


def test_others_read_a_template_but_get_no_forms_and_a_403_if_they_post(bob_client, bvt):
    html = bob_client.get(f"/templates/{bvt.pk}/").content.decode()
    assert "login" in html and "board:eve" in html
    assert "Dispatch" not in html and "Delete template" not in html

    assert bob_client.post(f"/templates/{bvt.pk}/dispatch/", {"build": "R2"}).status_code == 403
    assert bob_client.post(f"/templates/{bvt.pk}/delete/").status_code == 403
    assert bob_client.post(f"/templates/{bvt.pk}/", {"name": "x"}).status_code == 403
    assert not Suite.objects.exists() and SuiteTemplate.objects.get().name == "bvt nightly"


def test_the_owner_dispatches_with_a_build_and_lands_on_the_new_suite(alice_client, bvt):
    response = alice_client.post(
        f"/templates/{bvt.pk}/dispatch/", {"build": "R121-2", "priority": "10"}, headers=HTMX
    )

    suite = Suite.objects.get()
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/suites/{suite.pk}/"
    assert (suite.build, suite.priority, suite.template, suite.origin) == (
        "R121-2",
        10,
        bvt,
        SuiteOrigin.DISPATCHED,
    )


def test_a_dispatch_that_cannot_run_shows_why_in_the_form(alice_client, bvt, lab):
    lab.h1.labels.clear()
    lab.h2.labels.clear()

    response = alice_client.post(f"/templates/{bvt.pk}/dispatch/", {"build": "R2"}, headers=HTMX)

    assert response.status_code == 400
    assert "no host in the lab carries label board:eve" in response.content.decode()
    assert not Suite.objects.exists()


def test_staff_change_the_cron_and_a_bad_one_is_shown_in_place(sam_client, bvt):
    url = f"/templates/{bvt.pk}/"
    bad = sam_client.post(url, {"name": "bvt nightly", "cron": "99 * * * *", "enabled": "on"})
    assert bad.status_code == 400 and "is not a cron expression" in bad.content.decode()
    assert Schedule.objects.get(func="jobs.tasks.run_template").cron == "0 2 * * *"

    ok = sam_client.post(url, {"name": "bvt weekly", "cron": "0 3 * * 6", "enabled": "on"})
    assert ok.status_code == 302
    assert Schedule.objects.get(func="jobs.tasks.run_template").cron == "0 3 * * 6"
    assert SuiteTemplate.objects.get().name == "bvt weekly"


@pytest.mark.parametrize("cron", ["0 0 31 2 *", "0 0 30 2 *", "0 0 31 4 *"])
def test_a_cron_that_never_fires_is_shown_in_place_not_a_500(sam_client, bvt, cron):
    url = f"/templates/{bvt.pk}/"
    bad = sam_client.post(url, {"name": "bvt nightly", "cron": cron, "enabled": "on"})
    assert bad.status_code == 400 and "never fires" in bad.content.decode()
    assert Schedule.objects.get(func="jobs.tasks.run_template").cron == "0 2 * * *"


def test_the_owner_deletes_a_template_and_its_suites_stay(alice_client, bvt, alice):
    suite_templates.template_dispatch(template=bvt, by=alice, params={})

    response = alice_client.post(f"/templates/{bvt.pk}/delete/")

    assert response.status_code == 302 and response["Location"] == "/templates/"
    assert not SuiteTemplate.objects.exists()
    assert not Schedule.objects.filter(func="jobs.tasks.run_template").exists()
    assert Suite.objects.get().template is None


def test_a_suite_is_saved_as_a_template_from_its_page(alice_client, bob_client, alice, lab):
    suite = f.suite("smoke", [["board:eve"], ["board:kevin"]], owner=alice)
    assert "Save as template" in alice_client.get(f"/suites/{suite.pk}/").content.decode()
    assert "Save as template" not in bob_client.get(f"/suites/{suite.pk}/").content.decode()

    refused = bob_client.post(f"/suites/{suite.pk}/save-template/", {"name": "mine"})
    assert refused.status_code == 403
    response = alice_client.post(f"/suites/{suite.pk}/save-template/", {"name": "smoke daily"})

    template = SuiteTemplate.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/templates/{template.pk}/"
    assert template.name == "smoke daily" and template.owner == alice
    assert [j["labels"] for j in template.body["jobs"]] == [["board:eve"], ["board:kevin"]]


def test_the_list_page_makes_as_many_queries_for_2_templates_as_for_12(
    bob_client, alice, lab, django_assert_max_num_queries
):
    f.templates_run_once(2, owner=alice, body=BODY)
    with CaptureQueriesContext(connection) as few:
        assert bob_client.get("/templates/").status_code == 200
    f.templates_run_once(10, owner=alice, body=BODY)
    with django_assert_max_num_queries(len(few.captured_queries)):
        html = bob_client.get("/templates/").content.decode()
    assert html.count('<tr id="template-') == 12
