"""The UI authorization matrix (docs/security.md#roles): every role × every page and action."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from types import SimpleNamespace
from urllib.parse import urlsplit

import pytest
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, resolve, reverse

from jobs import host_inventory as inventory
from tests.factories import signed_in
from tests.security.conftest import HTMX, snapshot
from web import ui_urls

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "tester", "other_tester", "runner", "staff")
LOGIN = "login"  # sent to the login form: a 302 for a plain request, HX-Redirect for htmx

# Statuses of an htmx action (how the UI sends them), one per role in ROLES order. A plain
# form post (no JavaScript) gets the same, except that a success redirects back (302).
STAFF_ONLY = (LOGIN, 403, 403, 403, 200)
OWNER_OR_STAFF = (LOGIN, 200, 403, 403, 200)  # alice owns the lab's suite
ANY_USER = (LOGIN, 200, 200, 200, 200)


@dataclass(frozen=True)
class Action:
    """One UI POST route, a request that succeeds for whoever may do it, and who may."""

    route: str
    expected: tuple[str | int, ...]
    # The form, or a function of the lab giving it (when it must carry what the lab holds).
    data: dict[str, object] | Callable[[SimpleNamespace], dict[str, object]] = field(
        default_factory=dict
    )
    # What an allowed request answers in both modes, when not the usual 200 (htmx) / 302 (form):
    # the inventory forms redirect to what they saved either way; an import preview is a page.
    success: int | None = None
    changes: bool = True  # whether an allowed request writes (an import preview does not)
    # The address's one argument, if it takes one: a name as it stands (a host, a worker), or
    # the pk of the lab's object called `of`.
    name: str | None = None
    of: str | None = None

    def url(self, lab: SimpleNamespace) -> str:
        """The action's address in this lab."""
        if self.of:
            return reverse(self.route, args=[getattr(lab, self.of).pk])
        return reverse(self.route, args=[self.name] if self.name else [])


ACTIONS = [
    Action(
        "hosts:host_list",  # bulk lock or unlock of the ticked hosts
        STAFF_ONLY,
        {"action": "lock", "hosts": ["free.lab"], "reason": "matrix"},
    ),
    Action("hosts:host_lock", STAFF_ONLY, {"reason": "matrix"}, name="free.lab"),
    Action("hosts:host_unlock", STAFF_ONLY, name="locked.lab"),
    Action("hosts:worker_pause", STAFF_ONLY, {"reason": "matrix"}, name="w1"),
    Action("hosts:worker_resume", STAFF_ONLY, name="w2"),
    Action(
        "jobs:lease_list",  # reserve a host
        STAFF_ONLY,
        {"host": "free.lab", "minutes": "60", "reason": "matrix"},
    ),
    Action(
        "jobs:lease_release", STAFF_ONLY, {"requeue": "1", "reason": "matrix"}, of="reservation"
    ),
    # The lab's reservation is Sam's: only he (staff) may extend or end it; its holder's own
    # rights are tests/ui/test_reservations_ui.py.
    Action("jobs:reservation_extend", STAFF_ONLY, {"minutes": "60"}, of="reservation"),
    Action("jobs:reservation_end", STAFF_ONLY, {"reason": "matrix"}, of="reservation"),
    # A tester's own reservation (docs/ui.md#reservations): anyone signed in reserves; only
    # the tester who waits, or staff, take the lab's waiting one out of the line.
    Action(
        "jobs:reservation_create",
        ANY_USER,
        {"host": "free.lab", "minutes": "60", "reason": "matrix", "wait": "0"},
    ),
    Action("jobs:reservation_cancel", OWNER_OR_STAFF, of="waiting_reservation"),
    Action("jobs:suite_abort", OWNER_OR_STAFF, of="suite"),
    Action("jobs:suite_rerun", OWNER_OR_STAFF, of="failed_suite"),
    Action("jobs:job_abort", OWNER_OR_STAFF, of="job"),
    Action("jobs:job_priority", OWNER_OR_STAFF, {"priority": "50"}, of="job"),
    Action(
        "jobs:suite_create",
        ANY_USER,
        {
            "name": "bvt",
            "priority": "40",
            "min_duts": "0",
            "mode": "jobs",
            "max_retries": "0",
            "job_name": ["t1"],
            "job_labels": ["board:x"],
        },
    ),
    Action("hosts:host_verify", STAFF_ONLY, name="free.lab"),
    Action("hosts:host_repair", STAFF_ONLY, name="free.lab"),
    Action("hosts:host_retire", STAFF_ONLY, name="locked.lab"),  # has history: not deleted
    Action(
        "hosts:policy_list",  # add a health policy
        STAFF_ONLY,
        {"name": "matrix", "labels": "board:z", "every_hours": "6", "enabled": "on"},
    ),
    Action(
        "hosts:policy_detail",
        STAFF_ONLY,
        {"name": "x daily", "labels": "board:none", "every_hours": "12"},
        of="policy",
    ),
    Action("hosts:policy_enable", STAFF_ONLY, of="disabled_policy"),
    Action("hosts:policy_disable", STAFF_ONLY, of="policy"),
    Action("hosts:policy_delete", STAFF_ONLY, of="policy"),
    # Pool targets (docs/ui.md#pool-targets): staff only, reads included.
    Action(
        "hosts:pool_create",
        STAFF_ONLY,
        {"pool": "pool:matrix", "spare": "pool:matrix-spare", "min_ready": "2", "same": "board"},
    ),
    Action(
        "hosts:pool_edit",
        STAFF_ONLY,
        {"pool": "pool:none", "spare": "pool:none-spare", "min_ready": "3", "same": "board"},
        of="pool_target",
    ),
    Action("hosts:pool_delete", STAFF_ONLY, of="pool_target"),
    Action(
        "jobs:scheduler_settings",
        STAFF_ONLY,
        {
            "ordering": "size",
            "aging_minutes": "10",
            "aging_cap": "20",
            "host_choice": "spread",
            "default_duration": "600",
            "version": "0",
            "reason": "matrix",
        },
    ),  # fmt: skip
    Action("jobs:suite_save_template", OWNER_OR_STAFF, {"name": "matrix"}, of="suite"),
    Action(
        "jobs:template_detail",  # change its name, cron and state
        OWNER_OR_STAFF,
        {"name": "bvt nightly", "cron": "0 2 * * *", "enabled": "on"},
        of="template",
    ),
    Action("jobs:template_dispatch", OWNER_OR_STAFF, {"build": "R1"}, of="template"),
    Action("jobs:template_delete", OWNER_OR_STAFF, of="template"),
    # The inventory (docs/ui.md#inventory): staff only.
    Action(
        "hosts:host_create",
        STAFF_ONLY,
        {"hostname": "new.lab", "worker": "w1", "labels": "board:x"},
        success=302,
    ),
    Action(
        "hosts:host_edit",
        STAFF_ONLY,
        lambda lab: {
            "worker": "w1",
            "labels": "board:x pool:matrix",
            "version": inventory.inventory_version(lab.free),
        },
        success=302,
        name="free.lab",
    ),
    Action(
        "hosts:host_import",  # the preview: nothing is saved until its signed rows come back
        STAFF_ONLY,
        {"text": "hostname,worker,labels\nnew.lab,w1,board:x\n", "format": "csv"},
        success=200,
        changes=False,
    ),
    Action("hosts:worker_create", STAFF_ONLY, {"name": "w9"}, success=302),
    Action("hosts:worker_rename", STAFF_ONLY, {"name": "w2b"}, success=302, name="w2"),
    # Notification settings (docs/notifications.md): everyone their own.
    Action(
        "notifications:subscription_save",
        ANY_USER,
        {"email": "on", "email_address": "me@example.com", "events": ["suite_finished"]},
    ),
    Action("notifications:secret_regenerate", ANY_USER),
    Action("profile", ANY_USER),  # create or regenerate a token
    Action("token_revoke", ANY_USER),
]

PAGES: dict[str, Callable[[SimpleNamespace], str]] = {
    "dashboard": lambda lab: "/",
    "profile": lambda lab: "/accounts/profile/",
    "hosts:host_list": lambda lab: "/hosts/",
    "hosts:host_detail": lambda lab: "/hosts/reserved.lab/",
    "hosts:host_events": lambda lab: "/hosts/reserved.lab/events/",
    "hosts:worker_list": lambda lab: "/workers/",
    "hosts:worker_detail": lambda lab: "/workers/w1/",
    "hosts:policy_list": lambda lab: "/health-policies/",
    "hosts:policy_detail": lambda lab: f"/health-policies/{lab.policy.pk}/",
    "hosts:label_suggest": lambda lab: "/suggest/labels/?label=board",
    "hosts:host_suggest": lambda lab: "/suggest/hosts/?host=free",
    "jobs:queue": lambda lab: "/queue/",
    "jobs:suite_list": lambda lab: "/suites/",
    "jobs:suite_create": lambda lab: "/suites/new/",
    "jobs:suite_job_row": lambda lab: "/suites/new/job-row/",
    "jobs:suite_role_row": lambda lab: "/suites/new/role-row/?job=0a1b2c3d",
    "jobs:suite_detail": lambda lab: f"/suites/{lab.suite.pk}/",
    "jobs:job_detail": lambda lab: f"/jobs/{lab.suite.jobs.first().pk}/",
    "jobs:job_output": lambda lab: f"/jobs/{lab.suite.jobs.first().pk}/output.txt",
    "jobs:lease_list": lambda lab: "/leases/",
    "jobs:template_list": lambda lab: "/templates/",
    "jobs:template_detail": lambda lab: f"/templates/{lab.template.pk}/",
    "jobs:scheduler_settings": lambda lab: "/scheduler/settings/",
    "hosts:host_export": lambda lab: "/hosts/export.csv",
    "stats:host_reliability": lambda lab: "/reliability/hosts/?range=7d",
    "stats:test_reliability": lambda lab: "/reliability/tests/?range=24h",
    "stats:lab_history": lambda lab: "/history/?range=7d&label=board:x",
    "stats:label_detail": lambda lab: "/labels/board:x/?range=30d",
}

# Pages only lab staff open; everyone else is refused.
STAFF_PAGES: dict[str, Callable[[SimpleNamespace], str]] = {
    "notifications:delivery_list": lambda lab: "/notifications/deliveries/",
    "hosts:lock_impact": lambda lab: "/hosts/free.lab/lock/impact/",
    "hosts:pause_impact": lambda lab: "/workers/w1/pause/impact/",
    "hosts:pool_list": lambda lab: "/pool-targets/",
    "hosts:pool_detail": lambda lab: f"/pool-targets/{lab.pool_target.pk}/",
}


def form_of(action: Action, lab: SimpleNamespace) -> dict[str, object]:
    """The form an action posts in this lab."""
    return action.data(lab) if callable(action.data) else action.data


def ui_routes() -> dict[str, URLPattern]:
    """Every named route of the UI URLconf, namespaced as reverse() wants it."""
    routes: dict[str, URLPattern] = {}

    def walk(patterns: list, namespace: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, f"{namespace}{p.namespace}:" if p.namespace else namespace)
            elif p.name:
                routes[namespace + p.name] = p

    walk(ui_urls.urlpatterns, "")
    return routes


def sample_url(route: str, pattern: URLPattern) -> str:
    """The route's address with made-up arguments (the objects need not exist)."""
    samples = {
        "hostname": "no-such.lab",
        "name": "no-such-worker",
        "pk": 999999,
        "fmt": "csv",
        "label": "board:no-such",
    }
    names = set(pattern.pattern.converters) | set(pattern.pattern.regex.groupindex)
    return reverse(route, kwargs={k: samples[k] for k in names})


def outcome(response, mode: str) -> str | int:  # noqa: ANN001
    """The status, or LOGIN when the request was sent to the login form."""
    if mode == "htmx" and response.get("HX-Redirect", "").startswith("/accounts/login/?next="):
        return LOGIN
    if response.status_code == 302 and response["Location"].startswith("/accounts/login/?next="):
        return LOGIN
    return response.status_code


@pytest.fixture
def run_as(lab, users):  # noqa: ANN001, ANN201
    """Send one request as a role against a fresh copy of the lab; return what it did."""

    def run(role: str, send: Callable[[Client], object]) -> tuple[object, bool]:
        # Every role meets the same lab: the request runs in a savepoint rolled back after it.
        with transaction.atomic():
            client = signed_in(users[role])
            before = snapshot()
            response = send(client)
            changed = snapshot() != before
            transaction.set_rollback(True)
        return response, changed

    return run


def test_the_matrix_covers_every_post_route_of_the_ui(run_as):
    # A route "takes POST" unless it answers 405 to staff; a new one must join ACTIONS.
    takes_post = set()
    for route, pattern in ui_routes().items():
        url = sample_url(route, pattern)
        response, _ = run_as("staff", lambda c, url=url: c.post(url, {}, headers=HTMX))
        if response.status_code != 405:
            takes_post.add(route)
    assert takes_post == {a.route for a in ACTIONS}


def test_every_ui_route_is_a_page_or_an_action_of_the_matrix():
    assert set(ui_routes()) == set(PAGES) | set(STAFF_PAGES) | {a.route for a in ACTIONS}


@pytest.mark.parametrize("mode", ["htmx", "form"])
@pytest.mark.parametrize("action", ACTIONS, ids=[a.route for a in ACTIONS])
def test_each_role_gets_exactly_the_documented_status_and_a_refusal_changes_nothing(
    lab, run_as, action, mode
):
    headers = HTMX if mode == "htmx" else {}
    got: dict[str, str | int] = {}
    for role in ROLES:
        data = form_of(action, lab)
        response, changed = run_as(
            role, lambda c, data=data: c.post(action.url(lab), data, headers=headers)
        )
        got[role] = outcome(response, mode)
        if got[role] in (LOGIN, 403):
            assert not changed, f"a refused {role} changed the database"
        elif action.changes:
            assert changed, f"{role} was allowed but nothing changed: the matrix proves nothing"
        else:
            assert not changed, f"{role}'s {action.route} should not have written anything"
    success = action.success or (200 if mode == "htmx" else 302)
    assert got == {
        role: success if code == 200 else code
        for role, code in zip(ROLES, action.expected, strict=True)
    }


# Every page with who may open it: each signed-in role, or staff only.
PAGE_ROLES = {
    **{route: ANY_USER for route in PAGES},
    **{route: STAFF_ONLY for route in STAFF_PAGES},
}


@pytest.mark.parametrize("route", list(PAGE_ROLES))
def test_every_page_needs_a_login_and_opens_for_exactly_the_documented_roles(lab, run_as, route):
    url = {**PAGES, **STAFF_PAGES}[route](lab)
    got = {}
    for role in ROLES:
        response, changed = run_as(role, lambda c: c.get(url))
        assert not changed, f"GET {route} as {role} changed the database"
        got[role] = outcome(response, "page")
    assert got == dict(zip(ROLES, PAGE_ROLES[route], strict=True))


class PostTargets(HTMLParser):
    """The addresses a page's forms and htmx attributes send unsafe requests to."""

    def __init__(self) -> None:
        super().__init__()
        self.targets: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form" and (a.get("method") or "").lower() == "post" and a.get("action"):
            self.targets.add(urlsplit(a["action"]).path)
        for verb in ("hx-post", "hx-put", "hx-patch", "hx-delete"):
            if a.get(verb):
                self.targets.add(urlsplit(a[verb]).path)


@pytest.mark.parametrize("role", ["tester", "other_tester", "runner"])
def test_no_page_offers_a_control_the_matrix_refuses_to_that_role(lab, run_as, role):
    column = ROLES.index(role)
    refused = [a for a in ACTIONS if a.expected[column] == 403]
    staff_only = {a.route for a in refused if a.expected == STAFF_ONLY}
    object_refused = {a.url(lab) for a in refused if a.expected != STAFF_ONLY}
    for route, url in PAGES.items():
        response, _ = run_as(role, lambda c, url=url: c.get(url(lab)))
        parser = PostTargets()
        parser.feed(response.content.decode())
        for target in parser.targets:
            offered = resolve(target).view_name
            assert offered not in staff_only and target not in object_refused, (route, target)
