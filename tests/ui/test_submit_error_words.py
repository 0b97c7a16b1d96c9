"""The submit form's refusals name each field once and speak of its own checkbox."""

from __future__ import annotations

import pytest

from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db

FORM = {"name": "bvt", "priority": "40", "min_duts": "0", "mode": "jobs", "max_retries": "0"}


def _submit(client, **fields: object) -> str:  # noqa: ANN001
    return client.post("/suites/new/", {**FORM, **fields}, headers=HTMX).content.decode()


def test_a_label_no_host_carries_is_said_once_with_the_forms_checkbox(alice_client, lab):
    html = _submit(alice_client, job_name=["t1"], job_labels=["board:nope"])
    assert "labels: Labels:" not in html and "Labels: No host" not in html
    assert "Job 1, labels: No host in the lab carries label board:nope" in html
    assert "tick &quot;Wait for such hosts&quot; to submit it anyway" in html
    assert "allow unmatched" not in html


def test_a_malformed_label_names_the_label_not_the_field(alice_client, lab):
    html = _submit(alice_client, job_name=["t1"], job_labels=["bad!"])
    assert "Job 1, labels: Label &#x27;bad!&#x27;: Use letters" in html
    assert "labels: labels" not in html


def test_a_fanout_label_error_does_not_name_the_field_twice(alice_client, lab):
    html = _submit(alice_client, mode="fanout", fanout_labels="bad!", fanout_name="t")
    assert "Fanout labels: Label &#x27;bad!&#x27;" in html
    assert "fanout_labels" not in html.split("<form")[0] + html.split("</form>")[-1]


def test_the_api_names_its_own_field(lab, alice):
    client = f.signed_in(alice)
    body = {"name": "bvt", "jobs": [{"name": "t1", "labels": ["board:nope"]}]}
    response = client.post("/api/suites/", body, content_type="application/json")
    assert response.status_code == 400
    assert "allow unmatched jobs to submit it anyway" in str(response.json())
