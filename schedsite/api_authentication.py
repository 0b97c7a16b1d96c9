"""Token authentication that reads the user's groups along with the token: one query, not two;
and a runner's token answered from the web process's memory for a few seconds."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef, QuerySet
from django.db.models.signals import m2m_changed, post_delete, post_save
from django.utils.translation import gettext_lazy as _
from rest_framework import authentication, exceptions
from rest_framework.authtoken.models import Token

from schedsite import roles
from schedsite.prepared import PreparedQuery


def _token_with_groups(key: str) -> QuerySet[Token]:
    names = Group.objects.filter(user=OuterRef("user_id")).values("name")
    tokens = Token.objects.select_related("user").annotate(group_names=ArraySubquery(names))
    return tokens.filter(key=key)


# Compiled once per process: building this SQL cost more CPU than running it.
TOKEN_WITH_GROUPS = PreparedQuery(_token_with_groups, str)

# Runner tokens read in the last RUNNER_TOKEN_CACHE_SECONDS: key -> (read at, token, groups).
# Bounded: a process holds at most this many (a lab's runners are a few hundred).
RUNNER_TOKENS_MOST = 5000
_runner_tokens: dict[str, tuple[float, Token, list[str]]] = {}
_lock = threading.Lock()


def forget_tokens(**_kwargs: Any) -> None:
    """Drop every remembered token: a token, an account or its groups changed in this process.

    Other web processes forget theirs within RUNNER_TOKEN_CACHE_SECONDS."""
    with _lock:
        _runner_tokens.clear()


def _cacheable(token: Token, groups: list[str]) -> bool:
    """Only a plain runner account's token is remembered: staff and testers are read each time."""
    user = token.user
    return (
        roles.RUNNER_GROUP in groups
        and roles.STAFF_GROUP not in groups
        and not user.is_staff
        and not user.is_superuser
    )


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token lookup, with the group names the roles need read in the same query.

    Every runner-protocol call asks whether its caller is staff or a runner; runners call
    hundreds of times a second in a big lab (docs/performance.md#the-runner-protocol). A
    runner's token is remembered by the process for RUNNER_TOKEN_CACHE_SECONDS (0: never);
    deleting a token, or saving an account or its groups, forgets every remembered one in
    the process that does it at once, and in the others when the time runs out
    (docs/security.md#api-tokens).
    """

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        lifetime = settings.RUNNER_TOKEN_CACHE_SECONDS
        if lifetime > 0:
            kept = _runner_tokens.get(key)
            if kept is not None and time.monotonic() - kept[0] < lifetime:
                # Each request its own instances: a request may annotate its user.
                token = copy.copy(kept[1])
                token.user = user = copy.copy(kept[1].user)
                roles.remember_groups(user, kept[2])
                return user, token
        token, groups = self._read(key)
        if lifetime > 0 and groups is not None and _cacheable(token, groups):
            with _lock:
                if len(_runner_tokens) >= RUNNER_TOKENS_MOST:
                    _runner_tokens.clear()
                _runner_tokens[key] = (time.monotonic(), copy.copy(token), groups)
                _runner_tokens[key][1].user = copy.copy(token.user)
        return token.user, token

    def _read(self, key: str) -> tuple[Token, list[str] | None]:
        if connection.vendor == "postgresql":
            token = TOKEN_WITH_GROUPS.first(key)
        else:
            token = Token.objects.select_related("user").filter(key=key).first()
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        groups = getattr(token, "group_names", None)
        if groups is not None:
            groups = list(groups)
            roles.remember_groups(token.user, groups)
        return token, groups


_User = get_user_model()
post_delete.connect(forget_tokens, sender=Token, dispatch_uid="schedsite.forget_tokens.d")
post_save.connect(forget_tokens, sender=Token, dispatch_uid="schedsite.forget_tokens.t")
post_save.connect(forget_tokens, sender=_User, dispatch_uid="schedsite.forget_tokens.u")
post_delete.connect(forget_tokens, sender=_User, dispatch_uid="schedsite.forget_tokens.ud")
m2m_changed.connect(
    forget_tokens, sender=_User.groups.through, dispatch_uid="schedsite.forget_tokens.g"
)
