"""create_runner: a worker's runner account and token, in one command."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from rest_framework.authtoken.models import Token

from hosts.models import Worker
from schedsite import roles
from tests import factories as f
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db


def create_runner(*args: str) -> str:
    out = io.StringIO()
    call_command("create_runner", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_create_runner_makes_the_account_links_it_and_prints_only_the_token():
    f.worker("w1")
    token = create_runner("w1")

    user = Token.objects.get(key=token).user
    assert user.username == "runner-w1" and roles.is_runner(user)
    assert not user.has_usable_password()
    assert Worker.objects.get(name="w1").runner == user
    client = token_client(user)
    assert client.post("/api/workers/w1/heartbeat/").status_code == 200


def test_create_runner_is_idempotent_and_creates_a_missing_worker():
    first = create_runner("rack-9", "--username", "rack9-bot")
    assert create_runner("rack-9", "--username", "rack9-bot") == first
    assert Worker.objects.get(name="rack-9").runner.username == "rack9-bot"


def test_create_runner_rejects_a_bad_worker_name():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="name"):
        create_runner("bad name")
