"""Template tags for the web UI: badges, ages, priorities and bars (geometry in schedsite.ui)."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from django import template
from django.urls import get_script_prefix, get_urlconf, reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from jobs import badges, rows
from jobs.models import Lease, decode_labels
from jobs.querysets import unfinished_jobs
from schedsite import roles
from schedsite.ui import html
from schedsite.ui.durations import human_duration

register = template.Library()

# Shared with the rows made in Python (schedsite/ui/html.py, jobs/badges.py); here as tags for
# the templates.
badge = register.simple_tag(html.badge)
icon = register.simple_tag(html.icon)
ago = register.simple_tag(html.ago)
until = register.simple_tag(html.until)


SECTIONS = {
    "dashboard": "dashboard",
    "profile": "profile",
    "hosts:host_list": "hosts",
    "hosts:host_detail": "hosts",
    "hosts:host_create": "hosts",
    "hosts:host_edit": "hosts",
    "hosts:host_import": "hosts",
    "hosts:worker_list": "workers",
    "hosts:worker_detail": "workers",
    "hosts:worker_create": "workers",
    "hosts:worker_rename": "workers",
    "hosts:policy_list": "policies",
    "hosts:policy_detail": "policies",
    "hosts:pool_list": "pools",
    "hosts:pool_detail": "pools",
    "hosts:pool_edit": "pools",
    "jobs:queue": "queue",
    "jobs:suite_list": "suites",
    "jobs:suite_detail": "suites",
    "jobs:job_detail": "suites",
    "jobs:suite_create": "submit",
    "jobs:lease_list": "leases",
    "jobs:template_list": "templates",
    "jobs:template_detail": "templates",
    "notifications:delivery_list": "deliveries",
    "stats:host_reliability": "reliability",
    "stats:test_reliability": "reliability",
}


@register.simple_tag(takes_context=True)
def nav_link(context: template.Context, url_name: str, label: str) -> SafeString:
    """A navigation link marked aria-current when the page belongs to its section."""
    request = context.get("request")
    match = getattr(request, "resolver_match", None)
    current = SECTIONS.get(match.view_name) if match else None
    url = _nav_url(url_name, get_script_prefix(), get_urlconf())
    if current is not None and current == SECTIONS.get(url_name):
        return format_html('<a href="{}" aria-current="page">{}</a>', url, label)
    return format_html('<a href="{}">{}</a>', url, label)


@register.simple_tag
def page_url(url_name: str) -> str:
    """{% url %} of a route that takes no argument, reversed once per process (`_nav_url`): a
    dashboard request reversed the same dozen such routes each time."""
    return _nav_url(url_name, get_script_prefix(), get_urlconf())


@lru_cache(maxsize=256)
def _nav_url(url_name: str, prefix: str, urlconf: str | None) -> str:
    """The section's URL, reversed once per process for each script prefix and URLconf: every
    page draws the same dozen navigation links."""
    return reverse(url_name, urlconf=urlconf)


wait_tone = register.filter(badges.wait_tone)
wait_title = register.filter(badges.wait_title)


@register.filter
def lab_staff(user: object) -> bool:
    """Whether the user is lab staff (schedsite.roles), for showing staff-only controls."""
    return roles.is_staff(user)  # type: ignore[arg-type]


@register.filter
def managed_by(lease: Lease, user: object) -> bool:
    """Whether the user may extend or end this reservation (Lease.managed_by)."""
    return lease.managed_by(user)  # type: ignore[arg-type]


priority_name = register.filter(badges.priority_name)
priority = register.simple_tag(badges.priority)


@register.filter
def duration(seconds: float | None) -> str:
    return "—" if seconds is None else human_duration(seconds)


@register.filter
def timedelta_text(value: object) -> str:
    total = getattr(value, "total_seconds", None)
    return human_duration(total()) if total else "—"


completion_segments = register.filter("completion_segments", rows.completion_segments)
# A suite's progress, made in Python (jobs/rows.py): the dashboard's eight suites' cells
# cost about 9 ms as templates (docs/performance.md#the-dashboard-and-the-job-page-session-17).
suite_bars = register.simple_tag(rows.suite_bars)
suite_cells = register.simple_tag(rows.suite_cells)


@register.filter
def unfinished_count(counts: Mapping[str, int] | None) -> int:
    return unfinished_jobs(counts or {})


@register.filter
def label_list(key: str) -> list[str]:
    """The labels of a stored label key (',a,b,')."""
    return decode_labels(key or "")


@register.filter
def get_item(mapping: Mapping | None, key: object) -> object:
    return (mapping or {}).get(key)


@register.filter
def label_chip(name: str) -> SafeString:
    """A label as a chip linking to its page (jobs.rows.label_chip: one reverse per label)."""
    return rows.label_chip(str(name))
