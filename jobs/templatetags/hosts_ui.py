"""Template tags for the hosts and workers tables: host rows, lock and pause cells (host_rows)."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.safestring import SafeString

from jobs import host_rows as rows

register = template.Library()


def _row_page(context: template.Context) -> rows.RowPage:
    """The table's shared values, read from the context once per render, not once per row."""
    page = context.render_context.get(rows.RowPage)
    if page is None:
        page = context.render_context[rows.RowPage] = rows.RowPage.of(context)
    return page


@register.simple_tag(takes_context=True)
def host_row(context: template.Context, host: Any, note: Any = None) -> SafeString:
    """A host's table row; a refused lock's error and reason come from the context."""
    return rows.host_row(
        host,
        _row_page(context),
        note=note,
        error=context.get("lock_error"),
        reason=context.get("lock_reason"),
    )


@register.simple_tag(takes_context=True)
def hold_cell(context: template.Context, **kwargs: Any) -> SafeString:
    return rows.hold_cell(now=context.get("now"), **kwargs)


@register.simple_tag(takes_context=True)
def hold_actions(context: template.Context, **kwargs: Any) -> SafeString:
    return rows.hold_actions(note=context.get("note"), csrf=rows.csrf_input(context), **kwargs)


@register.simple_tag
def hold_impact_slot(*, url: str, kind: str) -> SafeString:
    """The what-if slot of a host's or worker's own page (its table rows have their own)."""
    return rows.hold_impact_slot(url=url, kind=kind)
