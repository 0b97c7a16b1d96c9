"""/api/pool-targets/: the pools the balancer keeps full, and what it would do now (staff).

docs/api.md#pool-targets; the rule is jobs.services.balancer's (docs/health.md#pool-targets).
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from hosts.models import PoolTarget
from hosts.validators import label_validator
from jobs.services import balancer
from schedsite.api_fields import StrictCharField, StrictIntegerField
from schedsite.api_permissions import RolePermissionsMixin
from schedsite.api_views import ActionTablesMixin


class PoolTargetSerializer(serializers.ModelSerializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:pooltarget-detail")
    same = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="Label prefixes a spare shares with the member it replaces, such as [board].",
    )

    class Meta:
        model = PoolTarget
        fields = ["url", "id", "pool", "spare", "min_ready", "same", "created_at", "updated_at"]
        read_only_fields = fields


class PoolTargetInputSerializer(serializers.Serializer):
    """A target's fields; the rules are jobs.services.balancer.pool_target_clean's."""

    pool = StrictCharField(max_length=100, validators=[label_validator], help_text="pool:cq")
    spare = StrictCharField(max_length=100, validators=[label_validator], help_text="pool:spare")
    min_ready = StrictIntegerField(min_value=0, max_value=balancer.MIN_READY_MOST)
    same = serializers.ListField(
        child=StrictCharField(
            max_length=balancer.PREFIX_MOST, validators=[balancer.label_prefix_validator]
        ),
        max_length=balancer.SAME_MOST,
        default=list,
        help_text="Label prefixes a spare must share with the member it replaces ([board]).",
    )


PreviewSerializer = inline_serializer(
    "PoolTargetPreview",
    {
        "pool": serializers.CharField(),
        "min_ready": serializers.IntegerField(),
        "in_service": serializers.IntegerField(),
        "swaps": serializers.ListField(
            child=inline_serializer(
                "PoolSwap",
                {
                    "out": serializers.CharField(help_text="The broken member moving to spare."),
                    "out_status": serializers.CharField(),
                    "in": serializers.CharField(help_text="The spare moving into the pool."),
                    "reason": serializers.CharField(),
                },
            )
        ),
        "waiting": serializers.ListField(child=serializers.CharField()),
        "warnings": serializers.ListField(child=serializers.CharField()),
    },
)


class PoolTargetViewSet(
    RolePermissionsMixin,
    ActionTablesMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet,
):
    """Pool targets (docs/health.md#pool-targets): staff only, reads included."""

    queryset = PoolTarget.objects.all()
    serializer_class = PoolTargetSerializer
    permission_resource = "pooltarget"
    # Any id routes here, so a malformed one is this API's JSON 403 or 404, not an HTML page.
    lookup_value_regex = r"[^/]+"
    action_summaries = {
        "list": "List pool targets (staff)",
        "retrieve": "One pool target (staff)",
        "create": "Add a pool target (staff)",
        "partial_update": "Change a pool target (staff)",
        "destroy": "Delete a pool target (staff)",
        "preview": "What the balancer would do now for a pool target (staff)",
    }
    action_inputs = {"create": PoolTargetInputSerializer}

    def _render(self, target: PoolTarget, code: int = status.HTTP_200_OK) -> Response:
        return Response(self.get_serializer(target).data, status=code)

    def create(self, request: Request) -> Response:
        target = balancer.pool_target_create(by=request.user, **self.action_input())
        return self._render(target, status.HTTP_201_CREATED)

    @extend_schema(request=PoolTargetInputSerializer(partial=True))
    def partial_update(self, request: Request, pk: str) -> Response:
        # Only the fields sent change: no defaults fill in the others.
        serializer = PoolTargetInputSerializer(data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        target = balancer.pool_target_update(
            target=self.get_object(), by=request.user, **serializer.validated_data
        )
        return self._render(target)

    def destroy(self, request: Request, pk: str) -> Response:
        balancer.pool_target_delete(target=self.get_object(), by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses=PreviewSerializer)
    @action(detail=True, methods=["get"])
    def preview(self, request: Request, pk: str) -> Response:
        """The swaps, the members waiting for their job and the warnings; nothing is done."""
        return Response(balancer.pool_plan(self.get_object()).as_dict())
