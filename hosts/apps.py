"""App configuration for the lab inventory."""

from __future__ import annotations

from django.apps import AppConfig


class HostsConfig(AppConfig):
    name = "hosts"
    verbose_name = "Lab inventory"
