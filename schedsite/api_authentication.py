"""Token authentication that reads the user's groups along with the token: one query, not two."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, Group
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import OuterRef, QuerySet
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


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token lookup, with the group names the roles need read in the same query.

    Every runner-protocol call asks whether its caller is staff or a runner; runners call
    hundreds of times a second in a big lab (docs/performance.md#the-runner-protocol).
    """

    def authenticate_credentials(self, key: str) -> tuple[AbstractBaseUser, Token]:
        if connection.vendor == "postgresql":
            token = TOKEN_WITH_GROUPS.first(key)
        else:
            token = Token.objects.select_related("user").filter(key=key).first()
        if token is None:
            raise exceptions.AuthenticationFailed(_("Invalid token."))
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed(_("User inactive or deleted."))
        if hasattr(token, "group_names"):
            roles.remember_groups(token.user, token.group_names)
        return token.user, token
