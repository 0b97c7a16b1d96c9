"""A runner's token is remembered by the web process for a few seconds, and revoking it still
works: in the process that revokes it at once, in the others when the time runs out.

docs/security.md#api-tokens; schedsite.api_authentication.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token

from schedsite import api_authentication
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db

LEASES = "/api/workers/w1/leases/"


def token_reads(client) -> tuple[int, int]:  # noqa: ANN001
    """The call's status and how many token reads it made."""
    with CaptureQueriesContext(connection) as captured:
        status = client.get(LEASES).status_code
    return status, sum('"authtoken_token"' in q["sql"] for q in captured.captured_queries)


# Remembered only where the token's group names come with it (PostgreSQL).
@pytest.mark.postgres
def test_a_runners_second_call_does_not_read_its_token(runner_client, lab):
    assert token_reads(runner_client) == (200, 1)
    assert token_reads(runner_client) == (200, 0)


def test_a_revoked_runner_token_is_refused_at_once(runner_client, runner_user, lab):
    assert token_reads(runner_client) == (200, 1)
    Token.objects.filter(user=runner_user).delete()  # what "revoke my token" does
    assert runner_client.get(LEASES).status_code == 401


def test_a_runner_taken_out_of_runners_loses_the_protocol_at_once(runner_client, runner_user, lab):
    assert runner_client.get(LEASES).status_code == 200
    runner_user.groups.remove(Group.objects.get(name="runners"))
    assert runner_client.get(LEASES).status_code == 403


def test_a_deactivated_runner_is_refused_at_once(runner_client, runner_user, lab):
    assert runner_client.get(LEASES).status_code == 200
    runner_user.is_active = False
    runner_user.save()
    assert runner_client.get(LEASES).status_code == 401


# Remembered only where the token's group names come with it (PostgreSQL).
@pytest.mark.postgres
def test_another_process_revoking_it_takes_effect_when_the_time_runs_out(
    runner_client, runner_user, lab, monkeypatch
):
    # Another web process deletes the token: no signal reaches this one; its memory does.
    assert token_reads(runner_client) == (200, 1)
    Token.objects.filter(user=runner_user).update(key="0" * 40)  # no signal, as elsewhere
    assert runner_client.get(LEASES).status_code == 200  # still remembered here
    later = api_authentication.time.monotonic() + 11
    monkeypatch.setattr(api_authentication.time, "monotonic", lambda: later)
    assert runner_client.get(LEASES).status_code == 401


def test_with_no_lifetime_every_call_reads_its_token(runner_client, lab, settings):
    settings.RUNNER_TOKEN_CACHE_SECONDS = 0
    assert token_reads(runner_client) == (200, 1)
    assert token_reads(runner_client) == (200, 1)


def test_staff_tokens_are_read_on_every_call(django_user_model, lab):
    staff = django_user_model.objects.create_user("sam2", is_staff=True)
    staff.groups.add(Group.objects.get_or_create(name="runners")[0])
    client = token_client(staff)
    assert token_reads(client) == (200, 1)
    assert token_reads(client) == (200, 1)


def test_each_call_gets_its_own_user(runner_client, runner_user, lab, monkeypatch):
    seen = []
    original = api_authentication.TokenAuthentication.authenticate_credentials

    def spy(self, key):  # noqa: ANN001, ANN202
        user, token = original(self, key)
        seen.append(user)
        return user, token

    monkeypatch.setattr(api_authentication.TokenAuthentication, "authenticate_credentials", spy)
    runner_client.get(LEASES)
    runner_client.get(LEASES)
    assert seen[0] is not seen[1] and seen[0].pk == seen[1].pk == runner_user.pk
