"""Template tags for the queue page: its rows, made in Python (jobs.rows)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template
from django.utils.safestring import SafeString

from jobs import rows

register = template.Library()


@register.simple_tag(takes_context=True)
def queue_row(context: template.Context, row: Mapping[str, Any]) -> SafeString:
    return rows.queue_row(row, context.get("now"))


@register.filter
def hosts_needed(roles: list[dict]) -> str:
    """A multi-host job's host count: "3 hosts", or "3–5 hosts" with elastic ones."""
    return rows.hosts_text(roles) if roles else "1 host"
