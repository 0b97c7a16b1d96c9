"""GET /api/stats/hosts/ and /api/stats/tests/: reliability over a range, as JSON or CSV."""

from __future__ import annotations

import csv
import io
from typing import Any

from django.core.paginator import Paginator
from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from hosts.inventory_files import FORMULA_START
from schedsite.api_pagination import PageNumberPagination
from stats import history, selectors
from stats.ranges import RANGES, TimeRange, time_range


def _cell(value: object) -> object:
    # A test name is free text: a spreadsheet must not run one as a formula (CSV injection).
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return "" if value is None else value


class CSVRenderer(BaseRenderer):
    """A list of flat rows as CSV, its header the first row's keys (?format=csv)."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict | None = None,
    ) -> bytes:
        out = io.StringIO()
        rows = data if isinstance(data, list) else []
        columns = (renderer_context or {}).get("columns") or (list(rows[0]) if rows else [])
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([_cell(row.get(column)) for column in columns])
        return out.getvalue().encode("utf-8")


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def fields_of_host(row: selectors.HostReliability) -> dict[str, Any]:
    """A host's reliability as the API gives it."""
    return {
        "hostname": row.hostname,
        "status": row.status,
        "breaks": row.breaks,
        "repairs": row.repairs,
        "failed_repairs": row.failed_repairs,
        "mtbf_hours": _round(row.mtbf_hours, 2),
        "hours_out_of_service": round(row.hours_out_of_service, 2),
        "jobs": row.jobs,
        "passed": row.passed,
        "pass_rate": _round(row.pass_rate, 4),
    }


def fields_of_test(row: selectors.TestReliability) -> dict[str, Any]:
    """A test name's reliability as the API gives it."""
    return {
        "name": row.name,
        "runs": row.runs,
        "passed": row.passed,
        "failed": row.failed,
        "pass_rate": round(row.pass_rate, 4),
        "flaky": row.flaky,
        "flaky_builds": row.flaky_builds,
        "failed_on": [{"host": host, "failures": n} for host, n in row.failed_on],
        "last_run": row.last_run.isoformat(),
    }


def _csv_fields_of_test(row: selectors.TestReliability) -> dict[str, Any]:
    entry = fields_of_test(row)
    entry["flaky_builds"] = " ".join(row.flaky_builds)
    entry["failed_on"] = " ".join(f"{host}:{n}" for host, n in row.failed_on)
    return entry


PAGE_HELP = (
    f"Rows per page (JSON), default {PageNumberPagination.page_size}; above "
    f"{PageNumberPagination.max_page_size} the page holds {PageNumberPagination.max_page_size}."
)
RANGE_PARAMETER = OpenApiParameter(
    "range", str, enum=list(RANGES), description="The time the figures cover, ending now."
)
ORDERING_HELP = "A column to sort by; a leading - sorts descending. Rows without a value go last."
FORMAT_PARAMETER = OpenApiParameter(
    "format", str, enum=["json", "csv"], description="csv: every row as CSV, unpaginated."
)


class ReliabilityView(APIView):
    """A reliability list over ?range=, sorted by ?ordering=, paginated JSON or whole CSV."""

    renderer_classes = [JSONRenderer, CSVRenderer]
    default_range = "7d"
    columns: tuple[str, ...] = ()
    default_ordering = ""
    csv_name = ""

    def rows(self, window: TimeRange) -> list:
        raise NotImplementedError

    def entry(self, row: Any, *, csv: bool) -> dict[str, Any]:
        raise NotImplementedError

    def get(self, request: Request) -> Response:
        window = time_range(
            request.query_params.get("range"), now=timezone.now(), default=self.default_range
        )
        rows = selectors.ordered(
            self.rows(window),
            request.query_params.get("ordering"),
            columns=self.columns,
            default=self.default_ordering,
        )
        paginator = self.settings.DEFAULT_PAGINATION_CLASS()
        # A malformed page or page size is a 400 whatever the format, though CSV has no pages.
        paginator.get_page_size(request)
        paginator.get_page_number(request, Paginator([], 1))
        if request.accepted_renderer.format == "csv":
            filename = f"{self.csv_name}-{window.name}.csv"
            return Response(
                [self.entry(row, csv=True) for row in rows],
                headers={"Content-Disposition": f'attachment; filename="{filename}"'},
            )
        page = paginator.paginate_queryset(rows, request, view=self)
        response = paginator.get_paginated_response([self.entry(row, csv=False) for row in page])
        response.data["range"] = window.name
        response.data["from"] = window.start.isoformat()
        response.data["to"] = window.end.isoformat()
        return response

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple:
        try:
            return super().perform_content_negotiation(request, force)
        except Http404:
            # DRF answers an unknown ?format= with a 404, as if the list were not there.
            raise ValidationError({"format": ["format must be json or csv"]}) from None

    def finalize_response(
        self, request: Request, response: Response, *args: Any, **kwargs: Any
    ) -> Response:
        # An error (a bad range) is a JSON body a script can read, even when CSV was asked for.
        renderer = getattr(request, "accepted_renderer", None)
        if response.exception and renderer is not None and renderer.format == "csv":
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)


def _list_schema(
    name: str, fields: dict[str, serializers.Field], summary: str, columns: tuple[str, ...]
) -> Any:
    """The list's documentation: a page of rows with the range as JSON, or every row as CSV."""
    page = inline_serializer(
        f"{name}Page",
        {
            "count": serializers.IntegerField(),
            "count_estimated": serializers.BooleanField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": inline_serializer(name, fields, many=True),
            "range": serializers.ChoiceField(choices=list(RANGES)),
            "from": serializers.DateTimeField(),
            "to": serializers.DateTimeField(),
        },
    )
    return extend_schema(
        summary=summary,
        parameters=[
            RANGE_PARAMETER,
            OpenApiParameter(
                "ordering",
                str,
                enum=[*columns, *(f"-{column}" for column in columns)],
                description=ORDERING_HELP,
            ),
            OpenApiParameter("page", {"type": "integer", "minimum": 1}),
            OpenApiParameter("page_size", {"type": "integer", "minimum": 1}, description=PAGE_HELP),
            FORMAT_PARAMETER,
        ],
        responses={
            (200, "application/json"): page,
            (200, "text/csv"): OpenApiTypes.STR,
            400: OpenApiTypes.OBJECT,
            404: OpenApiTypes.OBJECT,  # a page past the end
        },
    )


class HostStatsView(ReliabilityView):
    """Per host: breaks, repairs, failed repairs, MTBF, hours out of service, jobs, pass rate."""

    default_range = "30d"
    columns = selectors.HOST_ORDERINGS
    default_ordering = "-breaks"
    csv_name = "host-reliability"

    def rows(self, window: TimeRange) -> list:
        return selectors.hosts_reliability(window)

    def entry(self, row: Any, *, csv: bool) -> dict[str, Any]:
        return fields_of_host(row)

    @_list_schema(
        "HostReliability",
        {
            "hostname": serializers.CharField(),
            "status": serializers.CharField(),
            "breaks": serializers.IntegerField(),
            "repairs": serializers.IntegerField(),
            "failed_repairs": serializers.IntegerField(),
            "mtbf_hours": serializers.FloatField(allow_null=True),
            "hours_out_of_service": serializers.FloatField(),
            "jobs": serializers.IntegerField(),
            "passed": serializers.IntegerField(),
            "pass_rate": serializers.FloatField(allow_null=True),
        },
        "Each host's breaks, repairs, outage and jobs over a range",
        selectors.HOST_ORDERINGS,
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class TestStatsView(ReliabilityView):
    """Per test name: runs, pass rate, flaky (passed and failed on one build), hosts failed on."""

    __test__ = False

    default_range = "7d"
    columns = selectors.TEST_ORDERINGS
    default_ordering = "pass_rate"
    csv_name = "test-reliability"

    def rows(self, window: TimeRange) -> list:
        return selectors.tests_reliability(window)

    def entry(self, row: Any, *, csv: bool) -> dict[str, Any]:
        return _csv_fields_of_test(row) if csv else fields_of_test(row)

    @_list_schema(
        "TestReliability",
        {
            "name": serializers.CharField(),
            "runs": serializers.IntegerField(),
            "passed": serializers.IntegerField(),
            "failed": serializers.IntegerField(),
            "pass_rate": serializers.FloatField(),
            "flaky": serializers.BooleanField(),
            "flaky_builds": serializers.ListField(child=serializers.CharField()),
            "failed_on": serializers.ListField(child=serializers.DictField()),
            "last_run": serializers.DateTimeField(),
        },
        "Each test's runs, pass rate, flakiness and the hosts it failed on over a range",
        selectors.TEST_ORDERINGS,
    )
    def get(self, request: Request) -> Response:
        return super().get(request)


class LabStatsView(APIView):
    """The lab's state over a range, per minute (1h, 24h) or per hour (7d, 30d)."""

    @extend_schema(
        summary="The lab's (or one pool's or board's) history over a range",
        parameters=[
            RANGE_PARAMETER,
            OpenApiParameter(
                "label",
                # What stats.history.history_label accepts: a label (hosts.validators) that is
                # a pool's or a board's, or nothing.
                {"type": "string", "pattern": r"^((pool|board):[A-Za-z0-9._:/=+-]*)?$"},
                description='A pool: or board: label; none (or "") for the whole lab.',
            ),
        ],
        responses={
            200: inline_serializer(
                "LabHistory",
                {
                    "range": serializers.ChoiceField(choices=list(RANGES)),
                    "label": serializers.CharField(),
                    "resolution": serializers.ChoiceField(choices=["minute", "hour"]),
                    "from": serializers.DateTimeField(),
                    "to": serializers.DateTimeField(),
                    "series": serializers.ListField(child=serializers.DictField()),
                },
            ),
            400: OpenApiTypes.OBJECT,
        },
    )
    def get(self, request: Request) -> Response:
        window = time_range(request.query_params.get("range"), now=timezone.now(), default="24h")
        label = history.history_label(request.query_params.get("label"))
        return Response(
            {
                "range": window.name,
                "label": label,
                "resolution": history.resolution(window),
                "from": window.start.isoformat(),
                "to": window.end.isoformat(),
                "series": history.lab_series(window=window, label=label),
            }
        )
