"""The authorization matrix (docs/api.md#roles): every role × every API action, exact status."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.db import transaction

from jobs import suite_templates
from jobs.models import Lease, SchedulerTick, SuiteTemplate
from tests.api.conftest import Lab, active_lease, token_client

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "tester", "other_tester", "runner", "other_runner", "staff")


@dataclass(frozen=True)
class Action:
    name: str
    method: str
    url: str | Callable[[Lab], str]  # a function where it names one of the lab's objects
    expected: tuple[int, int, int, int, int, int]  # one status per role, in ROLES order
    body: dict | Callable[[Lab], dict] | None = None

    def request(self, lab: Lab) -> tuple[str, dict | None]:
        """The URL and the body to send, for this lab."""
        url = self.url(lab) if callable(self.url) else self.url
        return url, self.body(lab) if callable(self.body) else self.body


READ = (401, 200, 200, 200, 200, 200)
STAFF_ONLY = (401, 403, 403, 403, 403, None)  # None: the action's success status
RUNNER_OF_W1 = (401, 403, 403, 200, 403, 200)
ANY_USER_CREATES = (401, 201, 201, 201, 201, 201)
OWNER_OR_STAFF = (401, 200, 403, 403, 403, 200)


def staff(ok: int) -> tuple[int, ...]:
    return tuple(ok if code is None else code for code in STAFF_ONLY)


def owned(ok: int) -> tuple[int, ...]:
    return tuple(ok if code == 200 else code for code in OWNER_OR_STAFF)


def alices_template(lab: Lab, action: str = "") -> str:
    """Alice's template, made inside the role's savepoint (it goes with the rollback)."""
    template = SuiteTemplate.objects.filter(owner=lab.suite.owner).first()
    if template is None:
        template = suite_templates.template_create(by=lab.suite.owner, name="bvt", body=NEW_SUITE)
    return f"/api/suite-templates/{template.pk}/{action}"


def suite_url(action: str = "") -> Callable[[Lab], str]:
    """The lab suite's API address, optionally followed by an action."""
    return lambda lab: f"/api/suites/{lab.suite.pk}/{action}"


def job_url(job: str, action: str = "") -> Callable[[Lab], str]:
    """The API address of the lab's ``job`` (``queued`` or ``running``), optionally an action."""
    return lambda lab: f"/api/jobs/{getattr(lab, job).pk}/{action}"


def one_tick(lab: Lab) -> str:
    return f"/api/scheduler/{SchedulerTick.objects.latest('id').pk}/"


# The bodies of the creates: a valid one, so each role's answer is about the role alone.
NEW_HOST = {"hostname": "new.lab", "labels": ["board:x"], "worker": "w1"}
NEW_SUITE = {"name": "bvt", "jobs": [{"name": "t1", "labels": ["board:x"]}]}
NEW_JOB = {"name": "solo", "labels": ["board:x"]}
RESERVATION = {"host": "free.lab", "duration": 3600, "reason": "manual debugging"}

ACTIONS = [
    Action("api root", "get", "/api/", READ),
    Action("me", "get", "/api/me/", READ),
    Action("schema", "get", "/api/schema/", (200,) * 6),
    Action("docs", "get", "/api/docs/", (200,) * 6),
    # workers
    Action("worker list", "get", "/api/workers/", READ),
    Action("worker detail", "get", "/api/workers/w1/", READ),
    Action("worker create", "post", "/api/workers/", staff(201), {"name": "w9"}),
    Action("worker update", "patch", "/api/workers/w2/", staff(200), {"name": "w2-renamed"}),
    # w3 was paused: a worker with history is retired and shown, not deleted.
    Action("worker delete", "delete", "/api/workers/w3/", staff(200)),
    Action("worker pause", "post", "/api/workers/w1/pause/", staff(200), {"reason": "rack move"}),
    Action("worker resume", "post", "/api/workers/w3/resume/", staff(200)),
    Action("worker heartbeat", "post", "/api/workers/w1/heartbeat/", RUNNER_OF_W1),
    Action("worker leases", "get", "/api/workers/w1/leases/", RUNNER_OF_W1),
    # hosts
    Action("host list", "get", "/api/hosts/", READ),
    Action("host detail", "get", "/api/hosts/h1.lab/", READ),
    Action("host events", "get", "/api/hosts/h1.lab/events/", READ),
    Action("host create", "post", "/api/hosts/", staff(201), NEW_HOST),
    Action("host update", "patch", "/api/hosts/free.lab/", staff(200), {"labels": ["board:q"]}),
    Action("host delete", "delete", "/api/hosts/free.lab/", staff(204)),
    Action("host lock", "post", "/api/hosts/free.lab/lock/", staff(200), {"reason": "debugging"}),
    Action("host unlock", "post", "/api/hosts/locked.lab/unlock/", staff(200)),
    Action("host repair", "post", "/api/hosts/free.lab/repair/", staff(200)),
    Action("host verify", "post", "/api/hosts/free.lab/verify/", staff(200)),
    Action(
        "host release", "post", lambda lab: f"/api/hosts/{lab.h2.hostname}/release/", staff(200)
    ),
    # suites
    Action("suite list", "get", "/api/suites/", READ),
    Action("suite detail", "get", suite_url(), READ),
    Action("suite create", "post", "/api/suites/", ANY_USER_CREATES, NEW_SUITE),
    Action("suite abort", "post", suite_url("abort/"), OWNER_OR_STAFF),
    Action(
        "suite clone",
        "post",
        suite_url("clone/"),
        (401, 201, 403, 403, 403, 201),
    ),
    # The owner and staff may re-run it, once it has finished: its jobs are running.
    Action(
        "suite rerun",
        "post",
        suite_url("rerun/"),
        (401, 409, 403, 403, 403, 409),
    ),
    # suite templates
    Action("template list", "get", "/api/suite-templates/", READ),
    Action("template detail", "get", alices_template, READ),
    Action("template runs", "get", lambda lab: alices_template(lab, "runs/"), READ),
    Action(
        "template create",
        "post",
        "/api/suite-templates/",
        ANY_USER_CREATES,
        {"name": "mine", "body": NEW_SUITE},
    ),
    Action(
        "template from suite",
        "post",
        "/api/suite-templates/",
        owned(201),
        lambda lab: {"from_suite": lab.suite.pk},
    ),
    Action("template update", "patch", alices_template, OWNER_OR_STAFF, {"cron": "0 2 * * *"}),
    Action("template delete", "delete", alices_template, owned(204)),
    Action(
        "template dispatch",
        "post",
        lambda lab: alices_template(lab, "dispatch/"),
        owned(201),
        {"build": "R1"},
    ),
    # jobs
    Action("job list", "get", "/api/jobs/", READ),
    Action("job detail", "get", job_url("queued"), READ),
    Action("job attempts", "get", job_url("running", "attempts/"), READ),
    Action("job create", "post", "/api/jobs/", ANY_USER_CREATES, NEW_JOB),
    Action(
        "job start",
        "post",
        lambda lab: f"/api/jobs/{lab.leased.pk}/start/",
        RUNNER_OF_W1,
        lambda lab: {"lease": active_lease(lab.leased).pk},
    ),
    Action(
        "job complete",
        "post",
        job_url("running", "complete/"),
        RUNNER_OF_W1,
        lambda lab: {"lease": active_lease(lab.running).pk, "result": "passed", "message": "ok"},
    ),
    Action(
        "job abort (queued)",
        "post",
        job_url("queued", "abort/"),
        OWNER_OR_STAFF,
    ),
    Action(
        "job priority (queued)",
        "patch",
        job_url("queued"),
        OWNER_OR_STAFF,
        {"priority": 50},
    ),
    # The runner holding a job may give it up (shutting down); so may its owner and staff.
    Action(
        "job abort (running on w1)",
        "post",
        job_url("running", "abort/"),
        (401, 200, 403, 200, 403, 200),
    ),
    # leases
    Action("lease list", "get", "/api/leases/", READ),
    Action("lease detail", "get", lambda lab: f"/api/leases/{lab.reservation.pk}/", READ),
    Action("lease reserve", "post", "/api/leases/", staff(201), RESERVATION),
    Action(
        "lease heartbeat",
        "post",
        lambda lab: f"/api/leases/{active_lease(lab.running).pk}/heartbeat/",
        RUNNER_OF_W1,
    ),
    Action(
        "lease release",
        "post",
        lambda lab: f"/api/leases/{active_lease(lab.leased).pk}/release/",
        RUNNER_OF_W1,  # its runner hands back a job it has not started; staff release any
        {"requeue": True},
    ),
    Action(
        "lease extend",
        "post",
        lambda lab: f"/api/leases/{lab.reservation.pk}/extend/",
        staff(200),
        {"duration": 7200},
    ),
    Action(
        "lease end",
        "post",
        lambda lab: f"/api/leases/{lab.reservation.pk}/end/",
        staff(200),
    ),
    # the queue and the scheduler
    Action("queue", "get", "/api/queue/", READ),
    Action("tick list", "get", "/api/scheduler/", READ),
    Action("tick detail", "get", one_tick, READ),
    Action("tick now", "post", "/api/scheduler/tick/", staff(200)),
    Action("plan a suite", "post", "/api/scheduler/plan/", READ, {"suite": NEW_SUITE}),
    Action(
        "plan a suite change",
        "post",
        "/api/scheduler/plan/",
        owned(200),
        lambda lab: {"suite_changes": [{"suite": lab.suite.pk, "priority": 50}]},
    ),
    Action("plan a pause", "post", "/api/scheduler/plan/", staff(200), {"pause_workers": ["w1"]}),
    Action("plan a lock", "post", "/api/scheduler/plan/", staff(200), {"lock_hosts": ["free.lab"]}),
    Action("settings", "get", "/api/scheduler/settings/", READ),
    Action("settings history", "get", "/api/scheduler/settings/history/", READ),
    Action(
        "settings change",
        "patch",
        "/api/scheduler/settings/",
        staff(200),
        {"ordering": "size", "version": 0, "reason": "matrix"},
    ),
]


@pytest.fixture
def users(alice, bob, runner_user, runner_2, sam) -> dict:  # noqa: ANN001
    return {
        "anonymous": None,
        "tester": alice,
        "other_tester": bob,
        "runner": runner_user,
        "other_runner": runner_2,
        "staff": sam,
    }


def active_leases() -> set[tuple]:
    return set(Lease.objects.filter(released_at=None).values_list("id", "expires_at"))


@pytest.mark.parametrize("action", ACTIONS, ids=[a.name for a in ACTIONS])
def test_each_role_gets_exactly_the_documented_status(lab, users, action):
    got: dict[str, int] = {}
    for role in ROLES:
        # Every role meets the same lab: its request runs in a savepoint rolled back after it.
        with transaction.atomic():
            client = token_client(users[role])
            url, body = action.request(lab)
            before = active_leases()
            response = getattr(client, action.method)(url, body, format="json")
            got[role] = response.status_code
            if response.status_code == 401:
                assert response["WWW-Authenticate"] == "Token"
            if response.status_code in (401, 403):
                assert active_leases() == before, f"a refused {role} changed the leases"
            transaction.set_rollback(True)

    assert got == dict(zip(ROLES, action.expected, strict=True))
