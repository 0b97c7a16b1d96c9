"""Hostile text in any filter of any list (API and UI), and hostile JSON: a 4xx, never a 5xx."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from django.http import QueryDict
from django.urls import URLPattern, URLResolver, get_resolver
from django_filters.rest_framework import FilterSet

from hosts.filtersets import HostFilterSet
from hosts.models import Host
from jobs.models import Job
from schedsite.filters import StrictBooleanFilter
from tests import factories as f
from tests.api.conftest import token_client

pytestmark = pytest.mark.django_db

# OWASP-style strings: format directives of every flavour, NUL (PostgreSQL refuses it in text),
# a value far longer than any column, and text well outside ASCII.
HOSTILE = {
    "percent": "%",
    "printf": "%s%d%(x)s%%",
    "braces": "{}{0}{x!r}",
    "nul": "a\x00b",
    "ten-kb": "x" * 10240,
    "unicode": "☃ Ünïcødé 𝔘 \u202eevil ٣",
    "number-ish": "1e308",
}
PAGINATION = ("page", "page_size")


def _patterns(resolver: URLResolver, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for entry in resolver.url_patterns:
        route = prefix + str(entry.pattern)
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, route)
        else:
            yield route, entry


def _api_lists() -> dict[str, type[FilterSet]]:
    """Every API route that answers a list through a FilterSet, from the URLconf."""
    lists = {}
    for route, entry in _patterns(get_resolver()):
        view = getattr(entry.callback, "cls", None)
        filterset = getattr(view, "filterset_class", None)
        actions = getattr(entry.callback, "actions", None) or {"get": "get"}
        if filterset is None or "get" not in actions or entry.pattern.regex.groups:
            continue
        path = "/" + route.replace("^", "").replace("$", "").replace("\\", "")
        lists[path] = filterset
    return lists


def _ui_pages() -> list[str]:
    """Every UI route with no parameters: each list page is among them."""
    return sorted(
        "/" + route
        for route, entry in _patterns(get_resolver())
        if not route.startswith(("api/", "admin/", "accounts/", "^"))
        and not entry.pattern.regex.groups
        and "<" not in route
    )


API_LISTS = _api_lists()
FILTER_NAMES = sorted(
    {name for fs in API_LISTS.values() for name in fs.base_filters}.union(PAGINATION)
)


def test_every_list_and_filter_is_found():
    # If the URLconf walk breaks, the fuzzing below would quietly test nothing.
    assert {"/api/hosts/", "/api/workers/", "/api/suites/", "/api/jobs/", "/api/leases/"} <= set(
        API_LISTS
    )
    assert "/api/queue/" in API_LISTS
    assert {"/hosts/", "/workers/", "/queue/", "/suites/", "/leases/"} <= set(_ui_pages())
    assert {"locked", "leased", "online", "active", "standalone", "aborted"} <= set(FILTER_NAMES)


def _no_server_error(response, url: str, caplog: pytest.LogCaptureFixture) -> None:  # noqa: ANN001
    assert response.status_code < 500, (url, response.status_code)
    tracebacks = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not tracebacks, (url, tracebacks[0].getMessage())


@pytest.mark.parametrize("path", sorted(API_LISTS))
def test_hostile_text_in_any_api_filter_is_a_4xx_never_a_5xx(path, lab, alice, caplog):
    client = token_client(alice)
    filterset = API_LISTS[path]
    for name in [*filterset.base_filters, *PAGINATION]:
        for value in HOSTILE.values():
            response = client.get(path, {name: value})
            _no_server_error(response, f"{path}?{name}={value[:20]!r}", caplog)
            if isinstance(filterset.base_filters.get(name), StrictBooleanFilter):
                # Not true, not false: a 400 that names the filter.
                assert response.status_code == 400, (path, name, value[:20])
                assert name in response.json(), response.json()


@pytest.mark.parametrize("path", _ui_pages())
def test_hostile_text_in_any_filter_of_a_ui_page_is_never_a_5xx(path, lab, alice, client, caplog):
    client.force_login(alice)
    # The UI lists share the API's FilterSets; every filter name goes to every page, so a page
    # that adopts a new filter is covered without a change here.
    for name in FILTER_NAMES:
        for value in HOSTILE.values():
            response = client.get(path, {name: value})
            _no_server_error(response, f"{path}?{name}={value[:20]!r}", caplog)


@pytest.mark.parametrize(
    "url", ["/api/suites/?active=%25", "/api/hosts/?locked=%25s", "/api/jobs/?standalone=%7B%7D"]
)
def test_a_format_directive_in_a_true_false_filter_is_a_400_naming_it(url, alice):
    response = token_client(alice).get(url)
    assert response.status_code == 400
    name = url.split("?")[1].split("=")[0]
    assert "is not true or false" in response.json()[name][0]


def test_a_nul_in_a_repeated_filter_is_a_400_naming_it(alice):
    response = token_client(alice).get("/api/hosts/", {"label": "board:\x00eve"})
    assert response.status_code == 400
    assert "label" in response.json()


# --- JSON bodies ----------------------------------------------------------------------------


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [40, 1_000, 100_000])
def test_a_deeply_nested_json_body_is_a_400_without_a_traceback(depth, anon_client, caplog):
    body = "[" * depth + "]" * depth
    response = anon_client.post("/api/token/", data=body, content_type="application/json")
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_every_json_endpoint_refuses_a_deeply_nested_body(alice, caplog):
    response = token_client(alice).post(
        "/api/suites/", data=_nested(5_000), content_type="application/json"
    )
    assert response.status_code == 400
    assert "nested too deeply" in response.json()["detail"]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_a_suite_nested_as_deep_as_the_api_needs_is_accepted(alice):
    f.host("h1", ["board:x"])
    spec = {"name": "S", "jobs": [{"name": "t", "labels": ["board:x"]}]}
    response = token_client(alice).post("/api/suites/", data=spec, format="json")
    assert response.status_code == 201, response.json()


@pytest.mark.parametrize("reason", [5, 1.5, ["flaky"], {"why": "flaky"}, None])
def test_a_json_value_of_the_wrong_type_is_a_400_and_changes_nothing(reason, lab, sam):
    response = token_client(sam).post(
        f"/api/hosts/{lab.free.hostname}/lock/", {"reason": reason}, format="json"
    )
    assert response.status_code == 400 and "reason" in response.json()
    lab.free.refresh_from_db()
    assert not lab.free.locked


@pytest.mark.parametrize("paused", [0, 1, "true", "yes"])
def test_a_json_boolean_is_true_or_false_only(paused, sam):
    response = token_client(sam).post(
        "/api/workers/", {"name": "w9", "paused": paused}, format="json"
    )
    assert response.status_code == 400 and "paused" in response.json()


def test_form_data_still_takes_words_and_digits(sam, lab):
    client = token_client(sam)
    response = client.post("/api/workers/", {"name": "w9", "paused": "true"}, format="multipart")
    assert response.status_code == 201 and response.json()["paused"] is True
    response = client.post(
        "/api/leases/",
        {"host": lab.free.hostname, "duration": "60", "reason": "debug"},
        format="multipart",
    )
    assert response.status_code == 201, response.json()


# --- many values ----------------------------------------------------------------------------


def test_hundreds_of_labels_in_one_filter_make_one_subquery_not_a_join_each():
    query = QueryDict(mutable=True)
    query.setlist("label", [f"board:{i}" for i in range(200)])
    # Not run, only compiled: a join per label kept PostgreSQL planning for minutes.
    sql = str(HostFilterSet(query, queryset=Host.objects.all()).qs.query)
    assert sql.count("JOIN") < 5


def test_a_label_filter_still_means_every_label(lab, alice):
    client = token_client(alice)

    def hostnames(labels: list[str]) -> set[str]:
        response = client.get("/api/hosts/", {"label": labels})
        return {h["hostname"] for h in response.json()["results"]}

    assert hostnames(["board:x"]) == {lab.h1.hostname, lab.h2.hostname}
    assert hostnames(["board:x", "board:x"]) == {lab.h1.hostname, lab.h2.hostname}
    assert hostnames(["board:x", "board:y"]) == set()
    assert hostnames(["board:x", "no-such-label"]) == set()


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "-2.8e234", "9223372036854775808"])
def test_an_id_filter_takes_whole_numbers_from_one_up(value, alice):
    # On SQLite -2.8e234 overflowed the driver: a 400 without the filter's name.
    response = token_client(alice).get("/api/jobs/", {"suite": value})
    assert response.status_code == 400 and "suite" in response.json()


def test_text_longer_than_the_schema_allows_is_a_400_even_when_trimming_would_fit(alice_client):
    # maxLength counts the text as sent: 201 characters whose first is a form feed are refused,
    # as the schema promises, not trimmed to 200 and stored.
    name = "\f" + "x" * 200
    response = alice_client.post(
        "/api/jobs/", {"name": name, "allow_unmatched": True}, format="json"
    )
    assert response.status_code == 400
    assert "no more than 200 characters" in response.json()["name"][0]
    assert not Job.objects.exists()
