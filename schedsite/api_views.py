"""Pieces every API viewset shares, and the views that belong to no app: /api/me/, /api/token/."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from django.http import Http404, HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.decorators import action
from rest_framework.permissions import BasePermission, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from schedsite import roles
from schedsite.throttles import LoginThrottle


def valid(serializer_class: type[Serializer], request: Request) -> dict:
    """Validate the request body with an input serializer; a bad body is a 400."""
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


class ActionTablesMixin:
    """A viewset that states per action, in tables, what its endpoints differ in.

    `action_summaries` name each endpoint in the OpenAPI schema (schedsite.api_schema reads
    them) and `action_inputs` the serializer that checks its body (None: it takes none).
    `changes` map an action on one object to the service it calls; each one the viewset has
    no method for becomes a POST action that runs through the viewset's `change(service)`.
    """

    action_summaries: ClassVar[Mapping[str, str]] = {}
    action_inputs: ClassVar[Mapping[str, type[Serializer] | None]] = {}
    changes: ClassVar[Mapping[str, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, service in cls.changes.items():
            if not hasattr(cls, name):
                setattr(cls, name, _change_action(name, service))

    def action_input(self) -> dict:
        """The request body, checked by this action's input serializer ({} if it takes none)."""
        serializer_class = self.action_inputs.get(self.action)  # type: ignore[attr-defined]
        return valid(serializer_class, self.request) if serializer_class else {}  # type: ignore[attr-defined]

    def change(self, service: Callable[..., Any]) -> Response:
        raise NotImplementedError  # each viewset with `changes` says how one runs


def _change_action(name: str, service: Callable[..., Any]) -> Callable[..., Response]:
    def change(self: ActionTablesMixin, request: Request, *args: Any, **kwargs: Any) -> Response:
        return self.change(service)

    # DRF routes an action, and dispatches to it, by the function's name.
    change.__name__ = change.__qualname__ = name
    return action(detail=True, methods=["post"])(change)


class NameLookupMixin:
    """Objects addressed by a name in the URL, dots allowed (hostnames, worker names)."""

    lookup_value_regex = r"[^/]+"

    def get_object(self) -> Any:
        value = self.kwargs.get(self.lookup_field, "")  # type: ignore[attr-defined]
        if "\x00" in value:  # PostgreSQL cannot even compare such a string: no such object
            raise Http404
        return super().get_object()  # type: ignore[misc]


class MeSerializer(serializers.Serializer):
    username = serializers.CharField()
    staff = serializers.BooleanField(help_text="Lab staff: manage workers, hosts, leases.")
    runner = serializers.BooleanField(help_text="May call the runner protocol.")
    workers = serializers.ListField(
        child=serializers.CharField(), help_text="Workers this account is the runner of."
    )


class MeView(APIView):
    """Who the credentials belong to, and what their role allows."""

    permission_classes = [IsAuthenticated]

    @extend_schema(summary="Who am I, and what may I do", responses=MeSerializer)
    def get(self, request: Request) -> Response:
        user = request.user
        workers = list(user.runner_workers.values_list("name", flat=True))  # type: ignore[union-attr]
        data = {
            "username": user.get_username(),
            "staff": roles.is_staff(user),
            "runner": roles.is_runner(user),
            "workers": workers,
        }
        return Response(MeSerializer(data).data)


class TokenView(ObtainAuthToken):
    """POST: exchange a username and password for the API token; DELETE: revoke your own."""

    def get_permissions(self) -> list[BasePermission]:
        # Getting a token needs only the password; revoking one needs to be someone.
        if self.request.method == "DELETE":
            return [IsAuthenticated()]
        return super().get_permissions()

    # DRF's ObtainAuthToken names its own parsers; use the API's (a too-deep JSON body is a 400).
    parser_classes = APIView.parser_classes

    # DRF's ObtainAuthToken turns throttles off; this endpoint needs them most.
    throttle_classes = APIView.throttle_classes

    def get_throttles(self) -> list[BaseThrottle]:
        # A password check: limited per address like the login forms (docs/security.md).
        return [*super().get_throttles(), LoginThrottle()]

    def get_serializer_context(self) -> dict[str, Any]:
        # django-axes marks a locked-out login on the request it is given; hand it Django's
        # request, which its middleware sees, not DRF's wrapper around it.
        return {**super().get_serializer_context(), "request": self.request._request}

    @extend_schema(summary="Revoke your API token", request=None, responses={204: None})
    def delete(self, request: Request) -> Response:
        """Delete the caller's token: from now on it gets 401 (POST here makes a new one)."""
        # TokenAuthentication looks the key up on every request, so deleting the row is the
        # whole revocation; nothing caches it.
        Token.objects.filter(user=request.user).delete()
        return Response(status=204)


@csrf_exempt  # it changes nothing; a CSRF page would be HTML where scripts expect JSON
def api_not_found(request: HttpRequest, *args: object, **kwargs: object) -> JsonResponse:
    """A JSON 404 for any /api/ path no route matches (say, a malformed id)."""
    return JsonResponse({"detail": "Not found."}, status=404)
