"""/api/suite-templates/: save, change and delete suite templates, and dispatch them."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from jobs import selectors, suite_templates, template_selectors
from jobs.api import serializers as s
from jobs.api import template_serializers as ts
from jobs.api.views import TOO_MANY, idempotent_create
from jobs.models import Suite, SuiteTemplate
from schedsite import roles
from schedsite.api_permissions import RolePermissionsMixin
from schedsite.api_views import ActionTablesMixin


class SuiteTemplateViewSet(
    RolePermissionsMixin,
    ActionTablesMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Saved suites to dispatch with a build, by hand or on a cron (docs/api.md#suite-templates)."""

    serializer_class = ts.SuiteTemplateSerializer
    permission_resource = "template"
    action_summaries = {
        "list": "List suite templates with their schedule, next run and last run",
        "retrieve": "One suite template",
        "create": "Save a suite body, or an existing suite (from_suite), as a template",
        "partial_update": "Change a template's name, body, cron or enabled (its owner, or staff)",
        "destroy": "Delete a template and its schedule (its owner, or staff)",
        "dispatch_template": "Submit a new suite from the template, with a build (owner or staff)",
        "runs": "The template's runs, newest first: created, skipped (and why) or error",
    }
    action_inputs = {
        "create": ts.SuiteTemplateInputSerializer,
        "partial_update": ts.SuiteTemplateUpdateInputSerializer,
        "dispatch_template": ts.DispatchInputSerializer,
    }

    def get_queryset(self) -> QuerySet[SuiteTemplate]:
        return template_selectors.templates_list()

    def _render(self, template: SuiteTemplate, code: int = status.HTTP_200_OK) -> Response:
        fresh = template_selectors.attach_last_runs([self.get_queryset().get(pk=template.pk)])
        return Response(self.get_serializer(fresh[0]).data, status=code)

    def list(self, request: Request) -> Response:
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        templates = template_selectors.attach_last_runs(page)
        return self.get_paginated_response(self.get_serializer(templates, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return self._render(self.get_object())

    def create(self, request: Request) -> Response:
        data = self.action_input()
        fields = {k: data[k] for k in ("cron", "enabled") if k in data}
        if "from_suite" in data:
            suite = data["from_suite"]
            if not roles.may(request.user, "suite.save_as_template", owner_id=suite.owner_id):
                raise PermissionDenied("You may only save your own suites as templates.")
            template = suite_templates.template_from_suite(
                by=request.user, suite=suite, name=data.get("name", ""), **fields
            )
        else:
            template = suite_templates.template_create(
                by=request.user, name=data["name"], body=data["body"], **fields
            )
        return self._render(template, status.HTTP_201_CREATED)

    def partial_update(self, request: Request, pk: str) -> Response:
        template = suite_templates.template_update(
            template=self.get_object(), by=request.user, **self.action_input()
        )
        return self._render(template)

    def destroy(self, request: Request, pk: str) -> Response:
        suite_templates.template_delete(template=self.get_object(), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    # Not named `dispatch`: that is the name of the method every Django view answers through.
    @idempotent_create({201: s.SuiteSerializer, 429: TOO_MANY})
    @action(detail=True, methods=["post"], url_path="dispatch", url_name="dispatch")
    def dispatch_template(self, request: Request, pk: str) -> Response:
        template = self.get_object()
        params = self.action_input()
        suite = suite_templates.template_dispatch(template=template, by=request.user, params=params)
        # The same answer as POST /api/suites/: the new suite with its counts.
        suite = Suite.objects.select_related("owner").get(pk=suite.pk)
        context = {
            **self.get_serializer_context(),
            "job_counts": selectors.suite_job_counts([suite.pk]),
            "hosts_held": selectors.suite_hosts_held([suite.pk]),
        }
        return Response(s.SuiteSerializer(suite, context=context).data, status.HTTP_201_CREATED)

    @extend_schema(responses=ts.TemplateRunSerializer(many=True), filters=False)
    @action(detail=True, methods=["get"], filter_backends=[])
    def runs(self, request: Request, pk: str) -> Response:
        template = self.get_object()
        page = self.paginate_queryset(template_selectors.template_runs(template))
        runs = template_selectors.annotate_suite_status(page)
        return self.get_paginated_response(ts.TemplateRunSerializer(runs, many=True).data)
