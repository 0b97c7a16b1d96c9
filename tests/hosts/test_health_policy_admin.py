"""Health policies in the admin: labels typed comma-separated, checked like a host's."""

from __future__ import annotations

import pytest

from hosts.models import HealthPolicy
from tests.factories import signed_in

pytestmark = pytest.mark.django_db

ADD = "/admin/hosts/healthpolicy/add/"


@pytest.fixture
def root(django_user_model):  # noqa: ANN001, ANN201
    return signed_in(django_user_model.objects.create_superuser("root", password="root-pass"))


def form(**fields: str) -> dict:
    base = {"name": "eve daily", "labels": "board:eve", "every_hours": "24", "every_jobs": ""}
    return {**base, "enabled": "on", **fields}


def test_labels_typed_with_commas_are_stored_as_a_selector_and_shown_back(root):
    response = root.post(ADD, form(labels=" pool:cq , board:eve,"))

    assert response.status_code == 302
    policy = HealthPolicy.objects.get()
    assert policy.labels == ["board:eve", "pool:cq"] and policy.every_jobs is None
    page = root.get(f"/admin/hosts/healthpolicy/{policy.pk}/change/").content.decode()
    assert 'value="board:eve, pool:cq"' in page


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"labels": "board:eve, no spaces"}, "&#x27;no spaces&#x27;"),
        ({"every_hours": "0"}, ""),
    ],
)
def test_a_bad_label_or_period_is_refused_on_the_form(root, fields, words):
    response = root.post(ADD, form(**fields))

    assert response.status_code == 200
    page = response.content.decode()
    assert "errorlist" in page and words in page
    assert not HealthPolicy.objects.exists()
