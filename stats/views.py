"""The reliability pages: hosts and tests over a range, sorted by any column (docs/ui.md).

The figures are stats.selectors', the same the API gives; the CSV link is the API's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from hosts.choices import HostStatus
from schedsite.errors import InvalidInput
from schedsite.ui import html
from schedsite.ui.htmx import (
    error_response,
    page_or_fragment,
    paginate,
    ui_login_required,
    wants_fragment,
)
from stats import selectors
from stats.ranges import RANGES, time_range

ROWS_PER_PAGE = 50
RANGE_WORDS = {"1h": "hour", "24h": "24 hours", "7d": "7 days", "30d": "30 days"}


@dataclass(frozen=True)
class Column:
    """A column head: its sort link and whether the table is sorted by it, and which way."""

    key: str
    label: str
    title: str
    url: str
    sort: str  # "ascending", "descending" or "" (aria-sort)
    numeric: bool


@dataclass(frozen=True)
class ListPage:
    """What one reliability page shows: its heads, rows, columns and API address."""

    name: str  # "hosts" or "tests"
    default_range: str
    default_ordering: str
    columns: tuple[tuple[str, str, str], ...]  # (key, label, tooltip); the first is the name
    rows: Callable[..., list]
    api: str  # the API's url name


HOSTS = ListPage(
    name="hosts",
    default_range="30d",
    default_ordering="-breaks",
    columns=(
        ("hostname", "Host", ""),
        ("status", "Status now", ""),
        ("breaks", "Breaks", "Times it went to needs_repair from service"),
        ("repairs", "Repairs", "Repair jobs that ran to a result"),
        ("failed_repairs", "Failed repairs", "Repair jobs that failed"),
        ("mtbf_hours", "MTBF", "Mean time between failures: hours in service per break"),
        ("hours_out_of_service", "Out of service", "In needs_repair, repairing or repair_failed"),
        ("jobs", "Jobs", "Test jobs that passed or failed on it"),
        ("pass_rate", "Pass rate", "Of its jobs, those that passed"),
    ),
    rows=selectors.hosts_reliability,
    api="api:stats_hosts",
)
TESTS = ListPage(
    name="tests",
    default_range="7d",
    default_ordering="pass_rate",
    columns=(
        ("name", "Test", ""),
        ("runs", "Runs", "Runs that passed or failed"),
        ("passed", "Passed", ""),
        ("failed", "Failed", ""),
        ("pass_rate", "Pass rate", ""),
        ("flaky", "Flaky", "It both passed and failed on one build"),
        ("last_run", "Last run", ""),
    ),
    rows=selectors.tests_reliability,
    api="api:stats_tests",
)


def _url(path: str, query: QueryDict, **changes: str) -> str:
    q = query.copy()
    q.pop("page", None)
    for key, value in changes.items():
        q[key] = value
    return f"{path}?{q.urlencode()}"


def columns(page: ListPage, path: str, query: QueryDict, ordering: str) -> list[Column]:
    """The heads, each a link sorting by it: most first for a count, a second click reverses."""
    current = ordering.removeprefix("-")
    heads = []
    for index, (key, label, title) in enumerate(page.columns):
        text = index == 0 or key == "status"
        if key == current:
            sort = "descending" if ordering.startswith("-") else "ascending"
            toggled = key if ordering.startswith("-") else f"-{key}"
        else:
            sort = ""
            toggled = key if text else f"-{key}"
        heads.append(
            Column(key, label, title, _url(path, query, ordering=toggled), sort, numeric=not text)
        )
    return heads


def _status(row: object) -> SafeString | None:
    """A host row's status now as the hosts list shows it; None for a test row."""
    status = getattr(row, "status", None)
    if status is None:
        return None
    return html.badge("host", status, HostStatus(status).label)


def reliability_page(request: HttpRequest, page: ListPage, path: str) -> HttpResponse:
    query = request.GET.copy()
    try:
        window = time_range(query.get("range"), now=timezone.now(), default=page.default_range)
        ordering = (query.get("ordering") or page.default_ordering).strip()
        rows = selectors.ordered(
            page.rows(window),
            ordering,
            columns=tuple(key for key, _label, _title in page.columns),
            default=page.default_ordering,
        )
    except InvalidInput as exc:
        return error_response(request, exc.message[:1].upper() + exc.message[1:] + ".", 400)
    query["range"], query["ordering"] = window.name, ordering
    page_obj = paginate(rows, request.GET.get("page"), ROWS_PER_PAGE)
    context: dict[str, Any] = {
        "page": page.name,
        "window": window,
        "range_words": RANGE_WORDS[window.name],
        "ranges": [(name, RANGE_WORDS[name]) for name in RANGES],
        "columns": columns(page, path, query, ordering),
        "page_obj": page_obj,
        "rows": [(row, _status(row)) for row in page_obj.object_list],
        "query": query,
        "live_url": _url(path, query, page=str(page_obj.number)),
        "csv_url": _url(reverse(page.api), query, format="csv"),
        "api_url": _url(reverse(page.api), query),
        "now": window.end,
        "fragment": wants_fragment(request),  # the tabs follow the range out of band
    }
    return page_or_fragment(
        request,
        f"stats/{page.name}_reliability.html",
        f"stats/partials/{page.name}_reliability_table.html",
        context,
    )


@ui_login_required
@require_GET
def host_reliability(request: HttpRequest) -> HttpResponse:
    """Each host's breaks, repairs, outage and jobs over a range, worst first."""
    return reliability_page(request, HOSTS, reverse("stats:host_reliability"))


@ui_login_required
@require_GET
def test_reliability(request: HttpRequest) -> HttpResponse:
    """Each test's runs, pass rate, flakiness and the hosts it failed on over a range."""
    return reliability_page(request, TESTS, reverse("stats:test_reliability"))
