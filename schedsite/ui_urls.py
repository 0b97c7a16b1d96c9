"""Web UI routes (SPEC §7)."""

from __future__ import annotations

urlpatterns: list = []
