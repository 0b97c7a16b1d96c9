"""Web UI routes for the queue, suites, jobs and leases (docs/ui.md#pages)."""

from __future__ import annotations

from django.urls import path

from jobs import views, views_resubmit

app_name = "jobs"
urlpatterns = [
    path("queue/", views.queue, name="queue"),
    path("suites/", views.suite_list, name="suite_list"),
    path("suites/new/", views.suite_create, name="suite_create"),
    path("suites/new/job-row/", views.suite_job_row, name="suite_job_row"),
    path("suites/<int:pk>/", views.suite_detail, name="suite_detail"),
    path("suites/<int:pk>/abort/", views.suite_abort, name="suite_abort"),
    path("suites/<int:pk>/rerun/", views_resubmit.suite_rerun, name="suite_rerun"),
    path("jobs/<int:pk>/", views.job_detail, name="job_detail"),
    path("jobs/<int:pk>/output.txt", views.job_output, name="job_output"),
    path("leases/", views.lease_list, name="lease_list"),
    path("leases/<int:pk>/release/", views.lease_release, name="lease_release"),
]
