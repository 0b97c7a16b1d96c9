"""OpenAPI generation: document the error answers every operation can really give."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework.permissions import IsAuthenticated
from rest_framework.relations import RelatedField

from schedsite.api_exceptions import ErrorSerializer

BAD_REQUEST = OpenApiResponse(
    OpenApiTypes.OBJECT,
    description="Bad input: an object mapping each offending field (or `detail`) to messages.",
)
ERRORS = {
    "401": OpenApiResponse(ErrorSerializer, description="No or invalid credentials."),
    "403": OpenApiResponse(ErrorSerializer, description="Your role may not do this."),
    "404": OpenApiResponse(ErrorSerializer, description="No such object (or page)."),
    "409": OpenApiResponse(
        ErrorSerializer, description="The object's state does not allow this; nothing changed."
    ),
    "414": OpenApiResponse(
        description="The URL is longer than the front web server accepts (its own answer)."
    ),
    "415": OpenApiResponse(
        ErrorSerializer, description="Unsupported body: send JSON (or form data)."
    ),
    "429": OpenApiResponse(
        ErrorSerializer,
        description="Too many requests: retry after the `Retry-After` header's seconds. "
        "Nothing was done.",
    ),
}


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's AutoSchema, plus the 4xx answers of docs/api.md#conventions.

    Summaries and request bodies come from a viewset's action tables (ActionTablesMixin).
    """

    def get_summary(self) -> str | None:
        summaries = getattr(self.view, "action_summaries", {})
        return summaries.get(getattr(self.view, "action", None)) or super().get_summary()

    def get_request_serializer(self) -> object:
        inputs = getattr(self.view, "action_inputs", {})
        action = getattr(self.view, "action", None)
        return inputs[action] if action in inputs else super().get_request_serializer()

    def get_override_parameters(self) -> list:
        # A name in the path (a hostname, a worker name) is described once, on its viewset.
        parameter = getattr(self.view, "lookup_parameter", None)
        if parameter is not None and f"{{{parameter.name}}}" in self.path:
            return [*super().get_override_parameters(), parameter]
        return super().get_override_parameters()

    def map_parsers(self) -> list[str]:
        # Request bodies are documented as JSON only. Form data still works for quick curl calls
        # (docs/api.md), but its values are all strings, which a schema cannot describe.
        return ["application/json"]

    def _map_serializer(
        self, serializer: object, direction: str, bypass_extensions: bool = False
    ) -> dict:
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        # A rule between fields (a suite takes jobs or a fan-out) that no field's schema holds:
        # the serializer states it as JSON Schema in Meta.openapi_request_rules.
        rules = getattr(getattr(serializer, "Meta", None), "openapi_request_rules", None)
        if rules and direction == "request":
            schema = {**schema, **rules}
        if getattr(serializer, "refuses_unknown_fields", False) and direction == "request":
            schema = {**schema, "additionalProperties": False}  # a misspelt field is a 400
        return schema

    def _map_serializer_field(
        self, field: object, direction: str, bypass_extensions: bool = False
    ) -> dict:
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, RelatedField) and field.allow_null and direction == "request":
            # DRF reads "" for a relation as null ("no worker"), so "" is a valid value.
            schema.pop("minLength", None)
        return schema

    def _get_response_bodies(self, direction: str = "response") -> dict:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        codes: list[str] = []
        permissions = self.view.get_permissions()
        authenticated = any(isinstance(p, IsAuthenticated) for p in permissions)
        unsafe = self.method in ("POST", "PUT", "PATCH", "DELETE")
        if unsafe or self._is_list_view():
            codes.append("400")
        # A view open to all (POST /api/token/) still checks credentials sent along with the
        # request: an invalid token is a 401 there too.
        if authenticated or self.view.authentication_classes:
            codes.append("401")
        if authenticated and (unsafe or len(permissions) > 1):
            # Unsafe requests can also fail the CSRF check of session authentication.
            codes.append("403")
        if "{" in self.path:
            codes.append("404")
        elif self._is_list_view():
            codes.append("404")  # a page number past the last page
        if unsafe:
            codes.append("409")  # a state conflict, a duplicate name, a host already leased
        if self.method in ("POST", "PUT", "PATCH"):
            codes.append("415")
        # Throttles answer any request (docs/security.md), and the web server in front refuses
        # an over-long URL before Django sees it.
        codes += ["414", "429"]
        for code in codes:
            if code in responses:
                continue
            response = BAD_REQUEST if code == "400" else ERRORS[code]
            responses[code] = self._get_response_for_code(response, code, direction=direction)
        return dict(sorted(responses.items()))
