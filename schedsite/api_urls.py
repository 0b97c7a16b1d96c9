"""REST API routes (SPEC §6)."""

from __future__ import annotations

urlpatterns: list = []
