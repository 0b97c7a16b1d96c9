"""HTML made in Python for the list pages' rows, escaped as format_html escapes it."""

from __future__ import annotations

from html import escape

from django.utils.safestring import SafeString, mark_safe


def _escaped(value: object) -> str:
    """What conditional_escape gives, without the lazy-string wrappers around Django's escape."""
    return value.__html__() if hasattr(value, "__html__") else escape(str(value))


def markup(template: str, /, *args: object, **kwargs: object) -> SafeString:
    """format_html, every value escaped unless it is safe HTML, at less than half its cost.

    format_html's share of a page of rows was most of its time: Django's escape checks each
    argument for a lazy string before escaping it, ten to twenty values a row.
    """
    values = {name: _escaped(value) for name, value in kwargs.items()}
    return mark_safe(template.format(*map(_escaped, args), **values))  # noqa: S308
