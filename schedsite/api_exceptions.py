"""The REST API's exception handler: service and database errors become 4xx, never a 500."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import ObjectDoesNotExist, RequestDataTooBig, TooManyFieldsSent
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DataError, IntegrityError, OperationalError
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from schedsite.errors import Conflict, Forbidden, LimitExceeded, ServiceError, Unavailable
from schedsite.transactions import RETRY_AFTER, is_transient

log = logging.getLogger("schedsite.api")


class PayloadTooLarge(exceptions.APIException):
    """The request body is bigger than DATA_UPLOAD_MAX_MEMORY_SIZE (HTTP 413)."""

    status_code = 413
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


class ConflictError(exceptions.APIException):
    """The object is not in a state that allows the request (HTTP 409)."""

    status_code = 409
    default_detail = "The request conflicts with the current state of the object."
    default_code = "conflict"


def service_error_response(exc: ServiceError) -> Response:
    """Render a service error: 400 with the field named, 403, 409, 429 or 503 with a detail."""
    if isinstance(exc, LimitExceeded | Unavailable):
        return Response(
            {"detail": exc.message},
            status=exc.status_code,
            headers={"Retry-After": str(exc.retry_after)},
        )
    if isinstance(exc, Conflict):
        return Response({"detail": exc.message}, status=409)
    if isinstance(exc, Forbidden):
        return Response({"detail": exc.message}, status=403)
    if exc.field:
        return Response({exc.field: [exc.message]}, status=exc.status_code)
    return Response({"detail": exc.message}, status=exc.status_code)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """Map every error a client can provoke to a 4xx response (docs/api.md#conventions)."""
    if isinstance(exc, OperationalError) and is_transient(exc):
        # A deadlock or serialization failure outside a retried service: nothing was changed,
        # and the same request may well succeed in a moment.
        log.warning("transient database error answered with 503: %s", exc)
        exc = Unavailable("The database was busy with a conflicting change; try again.",
                          retry_after=RETRY_AFTER)  # fmt: skip
    if isinstance(exc, ServiceError):
        set_rollback()
        return service_error_response(exc)
    if isinstance(exc, DjangoValidationError):
        # A model or field validator ran outside a serializer; report it like a serializer would.
        if hasattr(exc, "error_dict"):
            exc = exceptions.ValidationError(exc.message_dict)
        else:
            exc = exceptions.ValidationError({"detail": exc.messages})
    elif isinstance(exc, RequestDataTooBig):
        # Django raises it while reading request.data; left alone it became an HTML 400 page.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        exc = PayloadTooLarge(f"The request body is larger than the limit of {limit} bytes.")
    elif isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        exc = exceptions.ValidationError({"detail": [f"Too many form fields (at most {limit})."]})
    elif isinstance(exc, IntegrityError):
        # A database constraint caught a race the services' checks could not (two requests at
        # once): the request changed nothing, and the client can retry against the new state.
        log.info("integrity error answered with 409: %s", exc)
        exc = ConflictError("The request conflicts with a concurrent change; nothing was changed.")
    elif isinstance(exc, DataError | OverflowError):
        # Values the database cannot take: NUL characters, numbers out of range (PostgreSQL
        # raises DataError; SQLite's driver an OverflowError for ?suite=1e308).
        exc = exceptions.ValidationError({"detail": ["A value is out of range or malformed."]})
    elif isinstance(exc, ObjectDoesNotExist):
        # The object vanished between the lookup and the change (deleted concurrently).
        exc = exceptions.NotFound("The object no longer exists.")
    return drf_exception_handler(exc, context)


class ErrorSerializer(serializers.Serializer):
    """An error answer: 401, 403, 404, 409 (and 400 without a field)."""

    detail = serializers.CharField()
