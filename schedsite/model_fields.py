"""Model fields the apps declare alike."""

from __future__ import annotations

from django.conf import settings
from django.db import models


def account_link(related_name: str) -> models.ForeignKey:
    """An optional link to a user account that outlives it: emptied when the account is deleted.

    Deleting an account must not delete the suites, jobs, leases, holds and deliveries that
    name it: they are the lab's history.
    """
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
    )
