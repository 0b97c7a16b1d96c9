"""Pagination for every API list: ?page=N&page_size=M, with a malformed number a 400."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


def _whole_number(raw: str) -> int:
    """raw as an int, or 0 when it is not a whole number (the callers refuse anything < 1)."""
    try:
        return int(raw)
    except ValueError:
        return 0


class PageNumberPagination(pagination.PageNumberPagination):
    """Page-number pagination; page_size may be raised to 500 per request."""

    page_size_query_param = "page_size"
    max_page_size = 500

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
