"""The OpenAPI schema is valid; fuzzing every operation finds no 5xx and no off-schema answer."""

from __future__ import annotations

import zlib

import pytest
import schemathesis
from django.core import signals
from django.core.management import call_command
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis import checks

from jobs.models import SchedulerTick
from schedsite.wsgi import application
from tests.api.conftest import Lab, token_client

pytestmark = pytest.mark.django_db


def test_the_schema_generates_without_warnings_and_validates(tmp_path):
    # --fail-on-warn: every serializer field has a type, so the schema says what really comes.
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
    assert "/api/queue/" in (tmp_path / "s.yml").read_text()


def test_the_schema_documents_every_route_and_its_errors(anon_client):
    paths = anon_client.get("/api/schema/?format=json").json()["paths"]
    lock = paths["/api/hosts/{hostname}/lock/"]["post"]
    assert set(lock["responses"]) == {"200", "400", "401", "403", "404", "409", "415"}
    assert lock["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "HostLockInputRequest"
    )
    suite_create = paths["/api/suites/"]["post"]["responses"]
    assert suite_create["201"]["content"]["application/json"]["schema"]["$ref"].endswith("Suite")
    for route in ("/api/workers/{name}/heartbeat/", "/api/jobs/{id}/complete/", "/api/queue/"):
        assert route in paths


# --- fuzzing --------------------------------------------------------------------------------

schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)

CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.status_code_conformance,
    checks.content_type_conformance,
]


def _steer(case: schemathesis.Case, lab: Lab) -> None:
    """Point most generated path parameters at real objects, so actions meet real state."""
    params = case.path_parameters or {}
    path = case.operation.path
    real = {
        "/api/hosts/": [h.hostname for h in (lab.h1, lab.h2, lab.h3, lab.free, lab.locked)],
        "/api/workers/": ["w1", "w2", "w3"],
        "/api/jobs/": [j.pk for j in (lab.running, lab.leased, lab.other, lab.queued)],
        "/api/suites/": [lab.suite.pk],
        "/api/leases/": [lab.reservation.pk, *lab.h1.leases.values_list("pk", flat=True)],
        "/api/scheduler/": list(SchedulerTick.objects.values_list("pk", flat=True)),
    }
    for prefix, choices in real.items():
        if not path.startswith(prefix) or not choices:
            continue
        for key, value in params.items():
            seed = zlib.crc32(repr(value).encode())
            if seed % 4:  # three in four hit a real object; the rest stay as generated
                params[key] = choices[seed % len(choices)]


@pytest.fixture
def keep_the_test_connection():  # noqa: ANN201
    """Calls go through the real WSGI handler, whose request signals would close the test's
    connection (and its transaction); Django's test client unhooks them the same way."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_fuzzing_finds_no_server_error_and_no_answer_off_the_schema(
    case, lab, sam, keep_the_test_connection
):
    _steer(case, lab)
    client = token_client(sam)
    headers = {"Authorization": client._credentials["HTTP_AUTHORIZATION"]}
    case.call_and_validate(headers=headers, checks=CHECKS)
