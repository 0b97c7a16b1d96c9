"""Web UI routes for hosts, workers and the label and host suggestions (docs/ui.md#pages)."""

from __future__ import annotations

from django.urls import URLPattern, path, re_path, register_converter

from hosts import views_policies, views_timeline
from jobs import views_host_impact as views_impact
from jobs import views_host_inventory as views_inventory
from jobs import views_hosts as views
from jobs import views_pools


class NameConverter:
    """Hostnames and worker names: letters, digits, '.', '-' and '_' (dots included)."""

    regex = r"[A-Za-z0-9][A-Za-z0-9._-]*"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(NameConverter, "name")


def hold(route: str, change: str) -> URLPattern:
    """A staff action's route (lock, verify…): one view, told which change; named after it."""
    return path(route, views.hold_change, {"change": change}, name=change)


app_name = "hosts"
urlpatterns = [
    path("hosts/", views.host_list, name="host_list"),
    # Before hosts/<name>/: these words are pages, not hostnames.
    path("hosts/new/", views_inventory.host_create, name="host_create"),
    path("hosts/import/", views_inventory.host_import, name="host_import"),
    re_path(r"^hosts/export\.(?P<fmt>csv|yaml)$", views_inventory.host_export, name="host_export"),
    path("hosts/<name:hostname>/", views.host_detail, name="host_detail"),
    path("hosts/<name:hostname>/edit/", views_inventory.host_edit, name="host_edit"),
    path("hosts/<name:hostname>/events/", views_timeline.host_events, name="host_events"),
    hold("hosts/<name:hostname>/lock/", "host_lock"),
    hold("hosts/<name:hostname>/unlock/", "host_unlock"),
    hold("hosts/<name:hostname>/verify/", "host_verify"),
    hold("hosts/<name:hostname>/repair/", "host_repair"),
    hold("hosts/<name:hostname>/retire/", "host_retire"),
    path("workers/", views.worker_list, name="worker_list"),
    path("workers/new/", views_inventory.worker_create, name="worker_create"),
    path("workers/<name:name>/", views.worker_detail, name="worker_detail"),
    path("workers/<name:name>/rename/", views_inventory.worker_rename, name="worker_rename"),
    hold("workers/<name:name>/pause/", "worker_pause"),
    hold("workers/<name:name>/resume/", "worker_resume"),
    # What a lock or a pause would change, before staff do it.
    path("hosts/<name:hostname>/lock/impact/", views_impact.lock_impact, name="lock_impact"),
    path("workers/<name:name>/pause/impact/", views_impact.pause_impact, name="pause_impact"),
    path("health-policies/", views_policies.policy_list, name="policy_list"),
    path("health-policies/<int:pk>/", views_policies.policy_detail, name="policy_detail"),
    *(
        path(
            f"health-policies/<int:pk>/{change}/",
            views_policies.policy_change,
            {"change": change},
            name=f"policy_{change}",
        )
        for change in ("enable", "disable", "delete")
    ),
    path("pool-targets/", views_pools.pool_list, name="pool_list"),
    path("pool-targets/new/", views_pools.pool_create, name="pool_create"),
    path("pool-targets/<int:pk>/", views_pools.pool_detail, name="pool_detail"),
    path("pool-targets/<int:pk>/edit/", views_pools.pool_edit, name="pool_edit"),
    path("pool-targets/<int:pk>/delete/", views_pools.pool_delete, name="pool_delete"),
    path("suggest/labels/", views.label_suggest, name="label_suggest"),
    path("suggest/hosts/", views.host_suggest, name="host_suggest"),
]
