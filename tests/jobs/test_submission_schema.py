"""One submission schema: the same limits everywhere, and no field dropped without a word.

docs/security.md#submission-limits: one table (jobs.limits.SUBMISSION_LIMITS) bounds what the
API, the submit form, clone, the what-if plan, the services and lab files take.
docs/api.md#conventions: a field the schema does not know is a 400 naming it, at every level.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.core.exceptions import ValidationError as FormError
from django.utils import timezone
from rest_framework.exceptions import ValidationError as ApiError

from jobs import labfile, services
from jobs.api.plan_serializers import SuiteChangeInputSerializer
from jobs.api.submit_serializers import SuiteCloneInputSerializer
from jobs.forms import SuiteForm
from jobs.limits import SUBMISSION_LIMITS
from jobs.models import Job, Suite, SuiteTemplate
from jobs.resubmit import suite_clone
from jobs.services.submission import _check_suite, job_from_spec
from jobs.submission_schema import JobSpecInputSerializer, SuiteCreateInputSerializer
from schedsite.errors import InvalidInput
from tests import factories as f
from tests.api.conftest import alice_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def board_x(db) -> None:  # noqa: ANN001
    f.host("x1", ["board:x"])


# --- one table of limits ------------------------------------------------------------------


def _form(field: str, value: int) -> None:
    SuiteForm().fields[field].clean(str(value))


def _api(field: str, value: int) -> None:
    serializer = JobSpecInputSerializer if field == "max_retries" else SuiteCreateInputSerializer
    serializer().fields[field].run_validation(value)


def _clone(field: str, value: int) -> None:
    SuiteCloneInputSerializer().fields[field].run_validation(value)


def _plan(field: str, value: int) -> None:
    SuiteChangeInputSerializer().fields[field].run_validation(value)


def _service(field: str, value: int) -> None:
    if field == "max_retries":
        spec = services.JobSpec(name="t", labels=["board:x"], max_retries=value)
        job_from_spec(spec, suite=None, owner="alice", now=timezone.now())
    else:
        duts = {"min_duts": 0, "max_duts": None, field: value}
        _check_suite(name="s", priority=40, **duts)


def _lab_file(field: str, value: int) -> None:
    job = {"name": "t", "labels": ["board:x"]}
    suite = {"name": "s", "jobs": [job]}
    (job if field == "max_retries" else suite)[field] = value
    labfile.validate({"suites": [suite]})


TAKERS: dict[str, tuple[Callable[[str, int], None], tuple[str, ...]]] = {
    "submit form": (_form, ("min_duts", "max_duts", "max_retries")),
    "API": (_api, ("min_duts", "max_duts", "max_retries")),
    "clone": (_clone, ("min_duts", "max_duts")),
    "what-if plan": (_plan, ("min_duts", "max_duts")),
    "services": (_service, ("min_duts", "max_duts", "max_retries")),
    "lab file": (_lab_file, ("min_duts", "max_duts", "max_retries")),
}
CASES = [(taker, name) for taker, (_, names) in TAKERS.items() for name in names]


def _accepts(taker: str, field: str, value: int) -> bool:
    try:
        TAKERS[taker][0](field, value)
    except (FormError, ApiError, InvalidInput):
        return False
    return True


@pytest.mark.parametrize(("taker", "field"), CASES)
def test_every_submission_takes_the_tables_limits(taker: str, field: str) -> None:
    limit = SUBMISSION_LIMITS[field]
    answers = [_accepts(taker, field, v) for v in (limit.low - 1, limit.low, limit.high)]
    assert answers + [_accepts(taker, field, limit.high + 1)] == [False, True, True, False]


def test_the_api_and_the_form_take_100000_duts_and_100_retries() -> None:
    # docs/security.md#submission-limits: the API's values won (the form used to stop at
    # 10,000 DUTs and 10 retries).
    assert SUBMISSION_LIMITS["min_duts"].high == SUBMISSION_LIMITS["max_duts"].high == 100_000
    assert SUBMISSION_LIMITS["max_retries"].high == 100
    assert _accepts("submit form", "min_duts", 100_000)
    assert _accepts("submit form", "max_retries", 100)


# --- unknown fields -----------------------------------------------------------------------

UNKNOWN_JOB_FIELD = (
    "Unknown field: expected name, labels, host, priority, max_retries, timeout, "
    "estimated_duration, expires_after, preemptible, roles, together_by."
)


def test_a_misspelt_job_field_is_a_400_naming_it_and_nothing_is_submitted(alice_client) -> None:  # noqa: F811
    body = {"name": "s", "jobs": [{"name": "t", "labels": ["board:x"], "max_retry": 2}]}
    answer = alice_client.post("/api/suites/", body, format="json")
    assert answer.status_code == 400
    # DRF names a list's entry by its index (docs/api.md#conventions).
    assert answer.json() == {"jobs": {"0": {"max_retry": [UNKNOWN_JOB_FIELD]}}}
    assert not Suite.objects.exists() and not Job.objects.exists()


def test_unknown_fields_at_every_level_are_named_in_one_answer(alice_client) -> None:  # noqa: F811
    body = {
        "name": "s",
        "colour": "blue",
        "jobs": [{"name": "a", "labels": ["board:x"]}, {"name": "b", "labels": [], "prio": 3}],
    }
    answer = alice_client.post("/api/suites/", body, format="json").json()
    assert set(answer) == {"colour", "jobs"}
    assert answer["jobs"] == {"1": {"prio": [UNKNOWN_JOB_FIELD]}}
    fanout = {"name": "s", "fanout": {"labels": ["board:x"], "until_": None}}
    answer = alice_client.post("/api/suites/", fanout, format="json").json()
    assert list(answer["fanout"]) == ["until_"]


@pytest.mark.parametrize(
    ("path", "body", "named"),
    [
        ("/api/jobs/", {"name": "t", "labels": ["board:x"], "retries": 1}, "retries"),
        ("/api/scheduler/plan/", {"suite_changes": [], "pause_worker": ["w"]}, "pause_worker"),
        ("/api/suite-templates/", {"name": "n", "body": {}, "crontab": "@daily"}, "crontab"),
    ],
)
def test_the_job_plan_and_template_inputs_name_an_unknown_field(
    alice_client,  # noqa: F811
    path: str,
    body: dict,
    named: str,
) -> None:
    answer = alice_client.post(path, body, format="json")
    assert answer.status_code == 400 and named in answer.json()


def test_a_plans_suite_change_names_its_unknown_field(alice_client, alice) -> None:  # noqa: F811
    suite = f.suite("s", [["board:x"]], owner=alice)
    body = {"suite_changes": [{"suite": suite.pk, "min_dut": 2}]}
    answer = alice_client.post("/api/scheduler/plan/", body, format="json")
    assert answer.status_code == 400
    assert list(answer.json()["suite_changes"]["0"]) == ["min_dut"]


def test_a_template_body_with_an_unknown_field_is_refused_naming_it(alice_client) -> None:  # noqa: F811
    body = {"name": "s", "jobs": [{"name": "t", "labels": ["board:x"], "max_retry": 2}]}
    answer = alice_client.post(
        "/api/suite-templates/", {"name": "nightly", "body": body}, format="json"
    )
    assert answer.status_code == 400
    assert answer.json() == {"body": [f"body: jobs.0.max_retry: {UNKNOWN_JOB_FIELD}"]}
    assert not SuiteTemplate.objects.exists()


def test_a_lab_files_misspelt_field_is_named(db) -> None:  # noqa: ANN001
    lab = {"suites": [{"name": "s", "jobs": [{"name": "t", "labels": [], "max_retry": 2}]}]}
    with pytest.raises(labfile.LabFileError) as refused:
        labfile.validate(lab)
    assert refused.value.problems == [
        "suites[0] (s).jobs[0] (t).max_retry: unknown field (expected name, labels, host, "
        "priority, max_retries, timeout, running_on, roles, together_by)"
    ]


def test_a_rerun_names_an_unknown_field(alice_client, alice) -> None:  # noqa: F811
    suite = f.suite("s", [["board:x"]], owner=alice)
    answer = alice_client.post(f"/api/suites/{suite.pk}/rerun/", {"job": [1]}, format="json")
    assert answer.status_code == 400 and "job" in answer.json()


def test_a_rerun_and_a_clone_still_submit_their_own_body(alice) -> None:
    # Their bodies (jobs.suite_body) hold only fields the schema knows.
    original = f.suite("s", [["board:x"]], owner=alice, max_retries=2)
    clone = suite_clone(suite=original, owner=alice, changes={"build": "R2"})
    assert clone.cloned_from_id == original.pk
    assert list(clone.jobs.values_list("max_retries", flat=True)) == [2]


# --- a multi-host job's roles take the same table -------------------------------------------


def _role_api(count: int) -> None:
    serializer = JobSpecInputSerializer(
        data={"name": "t", "roles": [{"name": "dut", "count": count}]}
    )
    if not serializer.is_valid():
        raise InvalidInput(str(serializer.errors))


def _role_service(count: int) -> None:
    spec = services.JobSpec(name="t", roles=[{"name": "dut", "count": count}])
    job_from_spec(spec, suite=None, owner="alice", now=timezone.now())


def _role_lab_file(count: int) -> None:
    job = {"name": "t", "labels": [], "roles": [{"name": "dut", "count": count}]}
    labfile.validate({"suites": [{"name": "s", "jobs": [job]}]})


@pytest.mark.parametrize("take", [_role_api, _role_service, _role_lab_file])
def test_a_roles_count_takes_the_tables_limits(take: Callable[[int], None]) -> None:
    limit = SUBMISSION_LIMITS["role_count"]
    answers = []
    for count in (limit.low - 1, limit.low, limit.high, limit.high + 1):
        try:
            take(count)
        except (InvalidInput, labfile.LabFileError):
            answers.append(False)
        else:
            answers.append(True)
    assert answers == [False, True, True, False]
