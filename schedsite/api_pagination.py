"""Pagination for every API list: ?page=N&page_size=M, with a malformed page number a 400."""

from __future__ import annotations

from django.core.paginator import Paginator
from rest_framework import pagination
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request


class PageNumberPagination(pagination.PageNumberPagination):
    """Page-number pagination; page_size may be raised to 500 per request."""

    page_size_query_param = "page_size"
    max_page_size = 500

    def get_page_number(self, request: Request, paginator: Paginator) -> int | str:
        raw = request.query_params.get(self.page_query_param) or "1"
        if raw in self.last_page_strings:
            return paginator.num_pages
        # DRF answers a malformed page with 404; a typo in a script deserves a 400 that says so.
        # A well-formed page past the end stays a 404 ("no such page").
        try:
            number = int(raw)
        except ValueError:
            number = 0
        if number < 1:
            raise ValidationError({"page": ["A page number is a whole number ≥ 1, or 'last'."]})
        return number
