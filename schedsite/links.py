"""A route's URL for every row of a page from one reverse(), as reverse() gives it for each row.

Reversing a route costs about as much as rendering the rest of a table cell; a list page links
each of its 50 rows to several routes (docs/performance.md#the-list-pages).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse
from django.utils.http import RFC3986_SUBDELIMS

# Every route these helpers serve accepts it (digits match ints, names and DRF's lookups), and
# it cannot occur in a route's own text.
PLACEHOLDER = "9081726354"
# Values a route formats in unchanged: no character that quote(), iri_to_uri() or a
# route's pattern would treat differently. Anything else goes through reverse() itself.
IDS = re.compile(r"[0-9]+")
NAMES = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # jobs/host_urls.py NameConverter's
LABELS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/=+-]*")  # hosts.validators.label_validator's
# A label's page (stats:label_detail): every label chip of the UI links there.
LABEL_PAGE = "stats:label_detail"
LABEL_TITLE = "{}: its hosts, queue and history"
_SAFE = RFC3986_SUBDELIMS + "/~:@"  # what Django's reverse() leaves unquoted


def split_url(url: str) -> tuple[str, str]:
    """The text before and after PLACEHOLDER in a URL reversed with it."""
    head, found, tail = url.partition(PLACEHOLDER)
    if not found or PLACEHOLDER in tail:
        raise ImproperlyConfigured(f"cannot place one value in {url!r}")
    return head, tail


def format_value(value: object, accepts: re.Pattern[str]) -> str | None:
    """The value as reverse() puts it in a path, or None if only reverse() may say."""
    text = str(value)
    if not accepts.fullmatch(text):
        return None
    return quote(text, safe=_SAFE)


def route_url(view_name: str, accepts: re.Pattern[str] = IDS) -> Callable[[object], str]:
    """reverse(view_name, args=[value]) for any value: reversed once, then formatted.

    A value outside `accepts` goes through reverse() itself, so it gets the same URL or the
    same NoReverseMatch as before.
    """
    head, tail = split_url(reverse(view_name, args=[PLACEHOLDER]))

    def url(value: object) -> str:
        text = format_value(value, accepts)
        if text is None:
            return reverse(view_name, args=[value])
        return head + text + tail

    return url
