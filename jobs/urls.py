"""Web UI routes for the queue, suites, jobs and leases (docs/ui.md#pages)."""

from __future__ import annotations

from django.urls import path

from jobs import (
    views,
    views_leases,
    views_reservations,
    views_resubmit,
    views_settings,
    views_templates,
)

app_name = "jobs"

# Each page is named after its view: `jobs:suite_detail` is views.suite_detail.
PAGES = [
    ("queue/", views.queue),
    ("suites/", views.suite_list),
    ("suites/new/", views.suite_create),
    ("suites/new/job-row/", views.suite_job_row),
    ("suites/new/role-row/", views.suite_role_row),
    ("suites/<int:pk>/", views.suite_detail),
    ("suites/<int:pk>/abort/", views.suite_abort),
    ("suites/<int:pk>/rerun/", views_resubmit.suite_rerun),
    ("suites/<int:pk>/save-template/", views_templates.suite_save_template),
    ("templates/", views_templates.template_list),
    ("templates/<int:pk>/", views_templates.template_detail),
    ("templates/<int:pk>/dispatch/", views_templates.template_dispatch),
    ("templates/<int:pk>/delete/", views_templates.template_delete),
    ("jobs/<int:pk>/", views.job_detail),
    ("jobs/<int:pk>/output.txt", views.job_output),
    ("jobs/<int:pk>/abort/", views.job_abort),
    ("jobs/<int:pk>/priority/", views.job_priority),
    ("leases/", views_leases.lease_list),
    ("leases/<int:pk>/release/", views_leases.lease_release),
    ("leases/<int:pk>/extend/", views_leases.reservation_extend),
    ("leases/<int:pk>/end/", views_leases.reservation_end),
    ("reservations/", views_reservations.reservation_create),
    ("reservations/<int:pk>/end/", views_reservations.reservation_cancel),
    ("scheduler/settings/", views_settings.scheduler_settings),
]
urlpatterns = [path(route, view, name=view.__name__) for route, view in PAGES]
