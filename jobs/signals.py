"""Hooks the apps above jobs connect in their `ready()`; jobs imports none of them."""

from __future__ import annotations
