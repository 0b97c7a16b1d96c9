"""Web UI routes for the queue, suites, jobs and leases (docs/ui.md#pages)."""

from __future__ import annotations

from django.urls import path

from jobs import views, views_leases, views_resubmit, views_templates

app_name = "jobs"
urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("suites/", views.suite_list, name="suite_list"),
    path("suites/new/", views.suite_create, name="suite_create"),
    path("suites/new/job-row/", views.suite_job_row, name="suite_job_row"),
    path("suites/<int:pk>/", views.suite_detail, name="suite_detail"),
    path("suites/<int:pk>/abort/", views.suite_abort, name="suite_abort"),
    path("suites/<int:pk>/rerun/", views_resubmit.suite_rerun, name="suite_rerun"),
    path(
        "suites/<int:pk>/save-template/",
        views_templates.suite_save_template,
        name="suite_save_template",
    ),
    path("templates/", views_templates.template_list, name="template_list"),
    path("templates/<int:pk>/", views_templates.template_detail, name="template_detail"),
    path(
        "templates/<int:pk>/dispatch/",
        views_templates.template_dispatch,
        name="template_dispatch",
    ),
    path("templates/<int:pk>/delete/", views_templates.template_delete, name="template_delete"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/output.txt", views.job_output, name="job_output"),
    path("leases/", views_leases.lease_list, name="lease_list"),
    path("leases/<int:pk>/release/", views_leases.lease_release, name="lease_release"),
    path("leases/<int:pk>/extend/", views_leases.reservation_extend, name="reservation_extend"),
    path("leases/<int:pk>/end/", views_leases.reservation_end, name="reservation_end"),
]
