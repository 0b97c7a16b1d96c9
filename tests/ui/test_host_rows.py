"""The host table's rows: made once per page, made in Python, and escaped as templates escape."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.template import Context, Template
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy

from hosts import services as host_services
from hosts.models import Host
from jobs import services
from jobs.host_rows import RowPage, host_row
from jobs.models import Job, Lease, Suite
from jobs.views_hosts import host_list_queryset, host_queryset, host_rows
from schedsite.ui.markup import markup
from tests import factories as f

pytestmark = pytest.mark.django_db

# The label cell as a template would render it, one {% url %} per label: each its page.
LABELS_BEFORE = Template(
    "{% for label in names %}"
    '<a class="chip" href="{% url \'stats:label_detail\' label %}" '
    'title="{{ label }}: its hosts, queue and history">{{ label }}</a>{% endfor %}'
)


@pytest.fixture
def lab(sam):  # noqa: ANN001, ANN201
    """Hosts with every kind of row: labels that need quoting, none, a job, a reservation."""
    rack = f.worker("rack-1.lab")
    f.host("dut1.lab", ["board:eve", "pool:cq", "k=v+w", "a/b", "z.9"], worker=rack)
    f.host("dut2", ["board:eve"], worker=rack)
    f.host("dut3-no-labels", [])
    f.host("dut4", ["board:zork"], worker=rack)
    host_services.host_lock(host=Host.objects.get(hostname="dut4"), by=sam, reason="flaky")
    f.suite("s1", [["board:eve", "pool:cq"]], owner=sam)
    f.job("solo", ["board:eve"], owner=sam)
    services.scheduler_tick()
    services.lease_reserve(
        host=Host.objects.get(hostname="dut3-no-labels"),
        holder=sam,
        duration=timedelta(hours=1),
        reason="flashing",
    )


def test_each_row_has_the_labels_links_and_lease_the_template_looked_up(lab):
    rows = host_rows(list(host_list_queryset()))
    reference = {host.pk: host for host in host_queryset()}
    assert len(rows) == 4
    kinds = set()
    for host in rows:
        before = reference[host.pk]
        assert host.label_names == sorted(label.name for label in before.labels.all())
        assert host.row_labels == LABELS_BEFORE.render(Context({"names": before.label_names}))
        assert host.row_url == reverse("hosts:host_detail", args=[before.hostname])
        worker = before.worker
        assert host.row_worker_url == (
            reverse("hosts:worker_detail", args=[worker.name]) if worker else ""
        )
        lease = before.active_leases[0] if before.active_leases else None
        assert host.row_lease == lease
        suite_id = lease.job.suite_id if lease and lease.job_id else None
        assert host.row_suite_url == (
            reverse("jobs:suite_detail", args=[suite_id]) if suite_id else ""
        )
        kinds.add("job" if lease and lease.job_id else "reservation" if lease else "free")
    assert kinds == {"job", "reservation", "free"}, "the lab lost a kind of row"


def test_the_api_lists_the_labels_the_host_page_shows(lab, sam_client):
    listed = sam_client.get("/api/hosts/").json()["results"]
    for row in listed:
        one = sam_client.get(f"/api/hosts/{row['hostname']}/").json()
        assert row["labels"] == one["labels"]
        assert row["url"] == one["url"]
        assert {k: v for k, v in row.items() if k in one} == {
            k: v for k, v in one.items() if k in row
        }


@pytest.mark.parametrize(
    "value",
    [
        "<script>alert('x')</script> & \"y\"",
        mark_safe("<b>already safe</b>"),
        gettext_lazy("Lazy <i>text</i>"),
        42,
        None,
    ],
)
def test_markup_escapes_each_value_as_format_html_does(value):
    assert markup("<p title='{}'>{}</p>", value, value) == format_html(
        "<p title='{}'>{}</p>", value, value
    )
    assert markup("<p>{v}</p>", v=value) == format_html("<p>{v}</p>", v=value)


def test_every_text_a_row_shows_is_escaped(sam, sam_client):
    # Names the forms refuse can still come from the database (an import, an admin edit).
    rack = f.worker("rack-1")
    f.host("dut1", ["board:eve"], worker=rack, build="<i>build</i>")
    f.host("dut2", ["board:eve"], worker=rack)
    f.host("dut3", ["board:eve"], worker=rack)
    f.host("dut4", ["board:eve"], worker=rack)
    f.suite("nightly", [["board:eve"]], owner=sam)
    services.scheduler_tick()
    leased = Lease.objects.get(released_at=None).host
    free = Host.objects.exclude(pk=leased.pk).order_by("hostname")
    services.lease_reserve(host=free[0], holder=sam, duration=timedelta(hours=1), reason="r")
    host_services.host_lock(host=free[1], by=sam, reason="<i>lock reason</i>")
    Job.objects.update(name="<i>job</i>")
    Suite.objects.update(name="<i>suite</i>")
    Lease.objects.filter(job=None).update(reason="<i>reservation</i>")
    get_user_model().objects.filter(pk=sam.pk).update(username="<i>sam</i>")

    page = sam_client.get("/hosts/").content.decode()
    for text in ("build", "lock reason", "job", "suite", "reservation", "sam"):
        assert f"&lt;i&gt;{text}&lt;/i&gt;" in page, text
    assert "<i>" not in page

    # A refused lock shows its error and the reason typed again, in the row's form.
    host = host_rows([host_list_queryset().get(pk=free[2].pk)])[0]
    page = RowPage(now=timezone.now(), csrf_input=mark_safe(""), staff=True)
    row = host_row(host, page, error="<i>refused</i>", reason='"><i>typed')
    assert 'value="&quot;&gt;&lt;i&gt;typed"' in row
    assert "&lt;i&gt;refused&lt;/i&gt;" in row
    assert "<i>" not in row
