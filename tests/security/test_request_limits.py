"""Bounded requests: oversized bodies, suites and strings get a 4xx, never a 500.

The limits are in docs/security.md#request-limits.
"""

from __future__ import annotations

import json
import os

import pytest
from django.conf import settings as django_settings
from django.test import Client
from rest_framework.authtoken.models import Token

from jobs.models import Lease, Suite
from tests import factories as f
from tests.factories import signed_in
from tests.security.conftest import HTMX, snapshot

pytestmark = pytest.mark.django_db

LONG_NAME = "h" * 10_000
LONG_LABEL = "l" * 10_000
LONG_REASON = "r" * 100_000


@pytest.fixture
def api(sam) -> Client:  # noqa: ANN001
    """Sam's script: staff may try every write, so only the input decides the answer."""
    return Client(headers={"Authorization": f"Token {Token.objects.create(user=sam).key}"})


@pytest.fixture
def ui(sam) -> Client:  # noqa: ANN001
    return signed_in(sam)


def suite_form(n: int, **extra: object) -> dict[str, object]:
    return {
        "name": "big",
        "priority": "40",
        "min_duts": "0",
        "mode": "jobs",
        "max_retries": "0",
        "job_name": [f"t{i}" for i in range(n)],
        "job_labels": ["board:x"] * n,
        **extra,
    }


# --- body size ------------------------------------------------------------------------------


def test_the_body_limit_is_set_explicitly_from_the_environment():
    expected = int(os.environ.get("DATA_UPLOAD_MAX_MEMORY_SIZE") or 5 * 1024 * 1024)
    assert expected == django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def test_an_oversized_json_body_is_a_413_in_json_and_changes_nothing(api, lab):
    limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = json.dumps({"hostname": "new.lab", "labels": ["board:x"], "pad": "x" * limit})
    before = snapshot()
    response = api.post("/api/hosts/", body, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"The request body is larger than the limit of {limit} bytes."
    }
    assert snapshot() == before


def test_too_many_form_fields_in_an_api_request_is_a_400_in_json(api, lab):
    fields = "&".join(
        f"labels=l{i}" for i in range(django_settings.DATA_UPLOAD_MAX_NUMBER_FIELDS + 1)
    )
    before = snapshot()
    response = api.post(
        "/api/hosts/",
        "hostname=new.lab&" + fields,
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400
    assert "Too many form fields" in response.json()["detail"][0]
    assert snapshot() == before


def test_an_oversized_ui_form_is_a_400_not_a_500(ui, lab):
    body = "name=big&pad=" + "x" * django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    before = snapshot()
    response = ui.post("/suites/new/", body, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400
    assert snapshot() == before


# --- jobs per suite -------------------------------------------------------------------------


def test_an_api_fanout_beyond_the_job_limit_is_a_400_and_creates_nothing(alice, lab, settings):
    settings.MAX_JOBS_PER_SUITE = 2
    for name in ("a.lab", "b.lab", "c.lab"):
        f.host(name, ["bluetooth"])
    client = Client(headers={"Authorization": f"Token {Token.objects.create(user=alice).key}"})
    payload = {"name": "bt", "fanout": {"labels": ["bluetooth"], "name": "bt_Pair"}}
    response = client.post("/api/suites/", payload, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"jobs": ["a suite may have at most 2 jobs"]}
    assert not Suite.objects.filter(name="bt").exists()


def test_a_ui_suite_beyond_the_job_limit_is_a_400_that_says_why(alice, lab, settings):
    settings.MAX_JOBS_PER_SUITE = 3
    response = signed_in(alice).post("/suites/new/", suite_form(4), headers=HTMX)
    assert response.status_code == 400
    assert "A suite may have at most 3 jobs" in response.content.decode()
    assert not Suite.objects.filter(name="big").exists()


def test_a_ui_suite_with_more_rows_than_the_form_takes_is_a_400_not_a_truncated_suite(ui, lab):
    rows = 600
    data = suite_form(
        0,
        job_name=[f"t{i}" for i in range(rows)],
        job_labels=["board:x"] * rows,
        job_host=[""] * rows,
    )
    response = ui.post("/suites/new/", data, headers=HTMX)
    assert response.status_code == 400
    assert "The form takes at most 500 jobs" in response.content.decode()
    assert not Suite.objects.filter(name="big").exists()


# --- long strings ---------------------------------------------------------------------------

API_LONG = [
    ("post", "/api/hosts/", {"hostname": LONG_NAME, "labels": ["board:x"]}),
    ("post", "/api/hosts/", {"hostname": "new.lab", "labels": [LONG_LABEL]}),
    ("patch", "/api/hosts/free.lab/", {"labels": [LONG_LABEL]}),
    ("post", "/api/workers/", {"name": LONG_NAME}),
    ("post", "/api/hosts/free.lab/lock/", {"reason": LONG_REASON}),
    ("post", "/api/workers/w1/pause/", {"reason": LONG_REASON}),
    ("post", "/api/leases/", {"host": "free.lab", "duration": 3600, "reason": LONG_REASON}),
    ("post", "/api/leases/", {"host": LONG_NAME, "duration": 3600, "reason": "debug"}),
    ("post", "/api/leases/{lease}/release/", {"requeue": True, "reason": LONG_REASON}),
    ("post", "/api/suites/", {"name": LONG_NAME, "jobs": [{"name": "t", "labels": ["board:x"]}]}),
    ("post", "/api/suites/", {"name": "s", "jobs": [{"name": LONG_NAME, "labels": ["board:x"]}]}),
    ("post", "/api/suites/", {"name": "s", "jobs": [{"name": "t", "labels": [LONG_LABEL]}]}),
    ("post", "/api/suites/", {"name": "s", "jobs": [{"name": "t", "host": LONG_NAME}]}),
    ("post", "/api/suites/", {"name": "s", "fanout": {"labels": [LONG_LABEL], "name": "t"}}),
    ("post", "/api/jobs/", {"name": "t", "labels": [LONG_LABEL]}),
    ("post", "/api/jobs/{job}/abort/", {"reason": LONG_REASON}),
]


@pytest.mark.parametrize(("method", "path", "body"), API_LONG, ids=lambda v: str(v)[:40])
def test_a_very_long_string_in_the_api_is_a_400_and_changes_nothing(api, lab, method, path, body):
    before = snapshot()
    url = path.format(lease=lab.reservation.pk, job=lab.suite.jobs.first().pk)
    response = getattr(api, method)(url, body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert snapshot() == before


# Addresses holding a very long name or label, for each client: the API's and the pages'.
LONG_ADDRESSES = [
    ("api", f"/api/hosts/{LONG_NAME}/"),
    ("api", f"/api/workers/{LONG_NAME}/"),
    ("api", f"/api/hosts/?label={LONG_LABEL}"),
    ("api", f"/api/hosts/?q={LONG_NAME}&worker={LONG_NAME}"),
    ("api", f"/api/jobs/?label={LONG_LABEL}&owner={LONG_NAME}"),
    ("api", f"/api/leases/?host={LONG_NAME}"),
    ("ui", f"/hosts/{LONG_NAME}/"),
    ("ui", f"/workers/{LONG_NAME}/"),
    ("ui", f"/hosts/?label={LONG_LABEL}&q={LONG_NAME}"),
    ("ui", f"/queue/?label={LONG_LABEL}"),
    ("ui", f"/suites/?q={LONG_NAME}"),
    ("ui", f"/leases/?host={LONG_NAME}"),
    ("ui", f"/suggest/labels/?label={LONG_LABEL}"),
    ("ui", f"/suggest/hosts/?host={LONG_NAME}"),
]


@pytest.mark.parametrize(("client", "path"), LONG_ADDRESSES, ids=lambda v: v[:24])
def test_a_very_long_string_in_an_address_is_never_a_server_error(request, lab, client, path):
    assert request.getfixturevalue(client).get(path).status_code in (200, 400, 404)


UI_LONG = [
    ("/hosts/free.lab/lock/", {"reason": LONG_REASON}),
    ("/workers/w1/pause/", {"reason": LONG_REASON}),
    ("/hosts/", {"action": "lock", "hosts": ["free.lab"], "reason": LONG_REASON}),
    ("/leases/", {"host": "free.lab", "minutes": "60", "reason": LONG_REASON}),
    ("/leases/", {"host": LONG_NAME, "minutes": "60", "reason": "debug"}),
    ("/suites/new/", suite_form(1, name=LONG_NAME)),
    ("/suites/new/", suite_form(0, job_name=[LONG_NAME], job_labels=["board:x"])),
    ("/suites/new/", suite_form(0, job_name=["t"], job_labels=[LONG_LABEL])),
    ("/suites/new/", suite_form(1, job_host=[LONG_NAME])),
    ("/suites/new/", suite_form(0, mode="fanout", fanout_labels=LONG_LABEL, fanout_name="t")),
    ("/suites/new/", suite_form(0, mode="fanout", fanout_labels="board:x", fanout_name=LONG_NAME)),
]


@pytest.mark.parametrize(("path", "data"), UI_LONG, ids=lambda v: str(v)[:40])
def test_a_very_long_string_in_a_ui_form_is_a_400_and_changes_nothing(ui, lab, path, data):
    before = snapshot()
    response = ui.post(path, data, headers=HTMX)
    assert response.status_code == 400
    # The message says what is wrong (too long), not that the field is missing.
    assert "is required" not in response.content.decode()
    assert snapshot() == before


def test_a_ui_release_with_a_very_long_reason_is_a_400_and_releases_nothing(ui, lab):
    response = ui.post(
        f"/leases/{lab.reservation.pk}/release/", {"reason": LONG_REASON}, headers=HTMX
    )
    assert response.status_code == 400
    assert "at most 500" in response.content.decode()
    assert Lease.objects.get(pk=lab.reservation.pk).released_at is None


def test_a_ui_form_with_too_many_fields_is_a_400_page_that_says_why(ui, lab, settings):
    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 50
    suites = Suite.objects.count()
    response = ui.post("/suites/new/", {f"f{i}": "x" for i in range(51)})
    assert response.status_code == 400
    assert "too many fields" in response.content.decode()
    assert Suite.objects.count() == suites
