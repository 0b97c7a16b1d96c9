"""Idempotency-Key on the API's creating POSTs: a retried request gets the first answer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from jobs.models import IdempotencyKey
from jobs.services import IDEMPOTENCY_KEY_LIFETIME
from schedsite.api_exceptions import ErrorSerializer
from schedsite.errors import Conflict, InvalidInput

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_LENGTH = 255

PARAMETER = OpenApiParameter(
    HEADER,
    OpenApiTypes.STR,
    OpenApiParameter.HEADER,
    required=False,
    description=(
        "Any unique string of 1–255 visible ASCII characters (a UUID, say). Sending the same "
        "key and body again within 24 hours creates nothing and returns the first answer, "
        f"marked `{REPLAYED_HEADER}: true`. See docs/api.md."
    ),
)
CONFLICT = OpenApiResponse(
    ErrorSerializer,
    description=(
        "The object's state does not allow this, or the Idempotency-Key was already used with "
        "a different request; nothing changed."
    ),
)


def _key(request: Request) -> str | None:
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not 1 <= len(key) <= MAX_KEY_LENGTH or not all("!" <= ch <= "~" for ch in key):
        raise InvalidInput(
            f"{HEADER} must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (no spaces)"
        )
    return key


def _fingerprint(request: Request) -> str:
    data = request.data
    if hasattr(data, "lists"):  # form data: a QueryDict
        data = dict(data.lists())
    body = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    text = f"{request.method}\n{request.path}\n{body}"
    return hashlib.sha256(text.encode()).hexdigest()


def _replay(record: IdempotencyKey | None, key: str, fingerprint: str) -> Response:
    if record is None:  # purged between our insert and this read: a day-old key, or a race
        raise Conflict(f"{HEADER} {key} is being answered by another request; retry")
    if record.fingerprint != fingerprint:
        raise Conflict(
            f"{HEADER} {key} was already used with a different request (another body or "
            "endpoint); use a new key for a new request"
        )
    return Response(
        record.response_body, status=record.status_code, headers={REPLAYED_HEADER: "true"}
    )


View = Callable[..., Response]


def idempotent(create: View) -> View:
    """Honour an Idempotency-Key on a viewset's create.

    The rules are in docs/api.md#retrying-a-create-idempotency-key.
    """

    @wraps(create)
    def wrapper(self: Any, request: Request, *args: Any, **kwargs: Any) -> Response:
        key = _key(request)
        if key is None:
            return create(self, request, *args, **kwargs)
        fingerprint = _fingerprint(request)
        now = timezone.now()
        mine = IdempotencyKey.objects.filter(user=request.user, key=key)
        # The key's row and the created object commit together or not at all: a crash cannot
        # leave a suite whose key was lost (a retry would create it twice), nor the reverse.
        with transaction.atomic():
            mine.filter(created_at__lte=now - IDEMPOTENCY_KEY_LIFETIME).delete()
            try:
                with transaction.atomic():
                    record = IdempotencyKey.objects.create(
                        user=request.user, key=key, fingerprint=fingerprint, created_at=now
                    )
            except IntegrityError:
                # Answered before, or being answered now: PostgreSQL makes this insert wait
                # until that request's transaction ends, so we read its committed answer.
                return _replay(mine.first(), key, fingerprint)
            response = create(self, request, *args, **kwargs)
            if not 200 <= response.status_code < 300:
                # Remember only what was created: a refused request may be fixed and retried.
                transaction.set_rollback(True)
                return response
            record.status_code = response.status_code
            record.response_body = json.loads(JSONRenderer().render(response.data))
            record.save(update_fields=["status_code", "response_body"])
            return response

    return wrapper
