"""One table of who may do what (schedsite.roles.PERMISSIONS), walked against the API and pages.

docs/security.md#roles: the API's permissions and the pages' refusals both read the table, so
an action changed there changes on both, and neither keeps a list of its own.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator

import pytest
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse
from rest_framework.permissions import IsAuthenticated

from schedsite import roles
from schedsite.api_permissions import GATES
from tests import factories as f
from tests.factories import signed_in

DUMMY = "999999"  # an id or a name no object has: a class-level refusal comes before the lookup
STAFF_REFUSAL = re.compile(r"Only lab staff can ([^.<]+)\.")


def _routes(patterns: list, namespace: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _routes(entry.url_patterns, inner)
        elif entry.name:
            yield f"{namespace}{entry.name}", entry


def _arguments(pattern: URLPattern) -> list[str]:
    converters = getattr(pattern.pattern, "converters", None)
    if converters:
        return list(converters)
    return list(pattern.pattern.regex.groupindex)


def site_routes() -> list[tuple[str, URLPattern]]:
    """Every named route of the site, however the URL conf files are arranged."""
    return list(_routes(get_resolver().url_patterns))


# The table's resource for each of the API router's basenames (the route name's first part).
RESOURCES = {"suitetemplate": "template", "schedulertick": "scheduler"}
# Viewsets that check their owners themselves, so the refusal names the action (suite.abort).
SELF_CHECKED = {"suite"}


def api_actions() -> list[tuple[type, str, str, str, str]]:
    """(viewset, action, HTTP method, route name, resource) for every action the API routes."""
    found = []
    for name, pattern in site_routes():
        view = pattern.callback
        cls, actions = getattr(view, "cls", None), getattr(view, "actions", None)
        if cls is None or not actions:
            continue
        basename = name.rpartition(":")[2].split("-")[0]
        for method, action in actions.items():
            found.append((cls, action, method, name, RESOURCES.get(basename, basename)))
    return found


def ui_views() -> list[tuple[str, URLPattern]]:
    """The pages' routes: every named route that is not the API's, the admin's or the login."""
    return [
        (name, pattern)
        for name, pattern in site_routes()
        if not hasattr(pattern.callback, "cls")
        and name.split(":")[0] in {"hosts", "jobs", "notifications"}
    ]


def gates(cls: type, action: str) -> list[type]:
    view = cls()
    view.action = action
    return [type(p) for p in view.get_permissions()]


def test_the_api_gates_each_action_as_the_table_says() -> None:
    checked = 0
    for cls, action, _, _, resource in api_actions():
        assert "action_permissions" not in vars(cls), f"{cls.__name__} keeps its own map"
        rule = roles.PERMISSIONS.get(f"{resource}.{action}")
        if resource in SELF_CHECKED:
            rule = None
        expected = [IsAuthenticated, *(GATES[rule.who] if rule else ())]
        assert gates(cls, action) == expected, (cls.__name__, action, rule)
        checked += 1
    assert checked > 40


def _ui_sources() -> str:
    modules = {inspect.getmodule(pattern.callback) for _, pattern in ui_views()}
    return "\n".join(inspect.getsource(module) for module in modules if module)


def test_every_action_of_the_table_is_read_by_the_api_or_a_page() -> None:
    api = {f"{resource}.{action}" for _, action, _, _, resource in api_actions()}
    ui = _ui_sources()
    # Read outside a view's table lookup: by the lease's rule (Lease.managed_by).
    indirect = {"reservation.manage"}
    unread = [
        key
        for key in roles.PERMISSIONS
        if key not in api and f'"{key}"' not in ui and key not in indirect
    ]
    assert unread == []


@pytest.mark.django_db
def test_a_tester_is_refused_every_staff_action_of_the_api(bob) -> None:  # noqa: ANN001
    client = signed_in(bob)
    refused = set()
    routes = dict(site_routes())
    for _, action, method, name, resource in api_actions():
        rule = roles.PERMISSIONS.get(f"{resource}.{action}")
        if rule is None or rule.who is not roles.Who.STAFF:
            continue
        url = reverse(name, kwargs=dict.fromkeys(_arguments(routes[name]), DUMMY))
        answer = getattr(client, method)(url, {}, content_type="application/json")
        assert answer.status_code == 403, (name, method, answer.status_code)
        if method != "head":  # a HEAD answer has no body to read
            assert answer.json() == {"detail": "Only lab staff may do this."}
        refused.add(f"{resource}.{action}")
    assert len(refused) >= 15


@pytest.mark.django_db
def test_a_page_refuses_each_staff_action_in_the_tables_words(bob) -> None:  # noqa: ANN001
    # A host and a worker by the placeholder name: the previews look theirs up before refusing.
    f.host(DUMMY, worker=f.worker(DUMMY))
    client = signed_in(bob)
    said = set()
    for name, pattern in ui_views():
        try:
            url = reverse(name, kwargs=dict.fromkeys(_arguments(pattern), DUMMY))
        except NoReverseMatch:  # an argument of a few fixed values (hosts/export.csv)
            continue
        answer = client.post(url, {})
        if answer.status_code == 405:
            answer = client.get(url)
        if answer.status_code == 403:
            said.update(STAFF_REFUSAL.findall(answer.content.decode()))
    ui = _ui_sources()
    expected = {
        rule.doing
        for key, rule in roles.PERMISSIONS.items()
        if rule.who is roles.Who.STAFF and f'"{key}"' in ui
    }
    assert said == expected
