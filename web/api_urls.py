"""REST API routes (docs/api.md#endpoints), the OpenAPI schema and its interactive docs."""

from __future__ import annotations

from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import AllowAny
from rest_framework.routers import DefaultRouter

from jobs.api.host_views import HealthPolicyViewSet, HostViewSet, WorkerViewSet
from jobs.api.pool_targets import PoolTargetViewSet
from jobs.api.reservation_views import ReservationViewSet
from jobs.api.template_views import SuiteTemplateViewSet
from jobs.api.views import JobViewSet, LeaseViewSet, QueueView, SchedulerViewSet, SuiteViewSet
from schedsite.api_views import MeView, TokenView, api_not_found
from stats.api import HostStatsView, LabStatsView, TestStatsView

app_name = "api"

# No format suffixes: a hostname such as h1.lab must not read as host "h1" in format "lab".
router = DefaultRouter(use_regex_path=True)
router.include_format_suffixes = False
router.register("workers", WorkerViewSet, basename="worker")
router.register("hosts", HostViewSet, basename="host")
router.register("health-policies", HealthPolicyViewSet, basename="healthpolicy")
router.register("pool-targets", PoolTargetViewSet, basename="pooltarget")
router.register("suites", SuiteViewSet, basename="suite")
router.register("suite-templates", SuiteTemplateViewSet, basename="suitetemplate")
router.register("jobs", JobViewSet, basename="job")
router.register("leases", LeaseViewSet, basename="lease")
router.register("reservations", ReservationViewSet, basename="reservation")
router.register("scheduler", SchedulerViewSet, basename="schedulertick")

urlpatterns = [
    path("queue/", QueueView.as_view(), name="queue"),
    path("me/", MeView.as_view(), name="me"),
    path("token/", TokenView.as_view(), name="token"),
    path("stats/hosts/", HostStatsView.as_view(), name="stats_hosts"),
    path("stats/tests/", TestStatsView.as_view(), name="stats_tests"),
    path("stats/lab/", LabStatsView.as_view(), name="stats_lab"),
    # Public documentation, the same for everyone: no credentials, and no throttle to count.
    path(
        "schema/",
        SpectacularAPIView.as_view(
            permission_classes=[AllowAny], authentication_classes=[], throttle_classes=[]
        ),
        name="schema",
    ),
    # The split view serves its start-up script as a file (?script=): no inline script (CSP).
    path(
        "docs/",
        SpectacularSwaggerSplitView.as_view(
            template_name="api/swagger_ui.html",
            url_name="api:schema",
            permission_classes=[AllowAny],
            authentication_classes=[],
            throttle_classes=[],
        ),
        name="docs",
    ),
    path("", include(router.urls)),
    # Scripts get JSON, not Django's HTML page, for a path no route matches. Only paths ending
    # in a slash: /api/hosts still redirects to /api/hosts/ (APPEND_SLASH).
    re_path(r"^.*/$", api_not_found),
]
