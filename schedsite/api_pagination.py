"""Pagination for every API list: ?page=N&page_size=M, with a malformed number a 400."""

from __future__ import annotations

from typing import Any

from django.core.paginator import EmptyPage, Page, Paginator
from django.db.models import QuerySet
from django.utils.functional import cached_property
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from schedsite.counting import EXACT_COUNT_LIMIT, RowCount, bounded_count


def _whole_number(raw: str) -> int:
    """raw as an int, or 0 when it is not a whole number (the callers refuse anything < 1)."""
    try:
        return int(raw)
    except ValueError:
        return 0


class EstimatedPage(Page):
    """A page that knows from its own rows whether another follows (the count may be guessed)."""

    more: bool = False

    def has_next(self) -> bool:
        return self.more

    def next_page_number(self) -> int:
        return self.number + 1


class CountingPaginator(Paginator):
    """A Paginator whose count is exact up to EXACT_COUNT_LIMIT rows and estimated above.

    Counting 100,000 jobs costs more than reading a page of them (docs/api.md#conventions).
    With an estimate, a page reads one row more than it shows to tell whether a next page
    exists, and a page number past the estimate is not refused until it turns out empty.
    """

    @cached_property
    def row_count(self) -> RowCount:
        items = self.object_list
        if isinstance(items, QuerySet):
            return bounded_count(items)
        counted = getattr(items, "row_count", None)  # a lazy sequence that counts itself
        return counted if isinstance(counted, RowCount) else RowCount(len(items))

    @cached_property
    def count(self) -> int:
        return self.row_count.n

    def page(self, number: int | str) -> Page:
        if (
            isinstance(self.object_list, QuerySet)
            and _whole_number(str(number)) == 1
            and not self.orphans
            and self.allow_empty_first_page
            and "row_count" not in self.__dict__
        ):
            return self._first_page()
        if not self.row_count.estimated:
            return super().page(number)
        number = _whole_number(str(number))
        if number < 1:  # the estimate's last page is no limit: only the lower bound is known
            raise EmptyPage("That page number is less than 1")
        bottom = (number - 1) * self.per_page
        rows = list(self.object_list[bottom : bottom + self.per_page + 1])
        if not rows and number > 1:
            raise EmptyPage("That page contains no results")
        page = EstimatedPage(rows[: self.per_page], number, self)
        page.more = len(rows) > self.per_page
        return page

    def _first_page(self) -> Page:
        """The first page, read with one row more than it shows: without that row the page is
        the whole list and its length the exact count, with no COUNT statement (a runner's
        lease list, most lists of a small lab). With it, counted as any page is."""
        rows = list(self.object_list[: self.per_page + 1])
        if len(rows) <= self.per_page:
            self.__dict__["row_count"] = RowCount(len(rows))  # the cached_property's value
            return self._get_page(rows, 1, self)
        if self.row_count.estimated:
            page = EstimatedPage(rows[: self.per_page], 1, self)
            page.more = True
            return page
        return self._get_page(rows[: self.per_page], 1, self)


class PageNumberPagination(pagination.PageNumberPagination):
    """Page-number pagination; page_size may be raised to 500 per request.

    `count` is exact up to EXACT_COUNT_LIMIT rows; above, PostgreSQL's estimate, and
    `count_estimated` says so.
    """

    django_paginator_class = CountingPaginator
    page_size_query_param = "page_size"
    max_page_size = 500

    def get_paginated_response(self, data: list) -> Response:
        response = super().get_paginated_response(data)
        response.data["count_estimated"] = self.page.paginator.row_count.estimated
        return response

    def get_paginated_response_schema(self, schema: dict) -> dict:
        wrapped = super().get_paginated_response_schema(schema)
        wrapped["properties"]["count"]["description"] = (
            f"How many results in all: exact up to {EXACT_COUNT_LIMIT:,}, "
            "an estimate above (see count_estimated)."
        )
        wrapped["properties"]["count_estimated"] = {
            "type": "boolean",
            "description": "True when count is PostgreSQL's estimate, not an exact count.",
        }
        wrapped["required"] = [*wrapped["required"], "count_estimated"]
        return wrapped

    def get_page_number(self, request: Request, paginator: Paginator) -> int | str:
        raw = request.query_params.get(self.page_query_param, "1")
        if raw in self.last_page_strings:
            return paginator.num_pages
        # DRF answers a malformed page with 404; a typo in a script deserves a 400 that says so.
        # A well-formed page past the end stays a 404 ("no such page").
        number = _whole_number(raw)
        if number < 1:
            raise ValidationError({"page": ["A page number is a whole number ≥ 1, or 'last'."]})
        return number

    def get_page_size(self, request: Request) -> int:
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        # DRF quietly falls back to the default size; a typo deserves a 400 here too. Above
        # the maximum is not an error: the page is as large as allowed.
        size = _whole_number(raw)
        if size < 1:
            raise ValidationError({"page_size": ["A page size is a whole number ≥ 1."]})
        return min(size, self.max_page_size)

    def get_schema_operation_parameters(self, view: Any) -> list[dict]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            parameter["schema"]["minimum"] = 1
            if parameter["name"] == self.page_query_param:
                parameter["description"] = (
                    "A page number ≥ 1 (or `last`). Malformed is a 400; past the end, a 404."
                )
            else:
                parameter["description"] = (
                    f"Results per page, ≥ 1 (default {self.page_size}); above "
                    f"{self.max_page_size} the page holds {self.max_page_size}."
                )
        return parameters
