"""App configuration for the lab statistics."""

from __future__ import annotations

from django.apps import AppConfig


class StatsConfig(AppConfig):
    name = "stats"
    verbose_name = "Lab statistics"
