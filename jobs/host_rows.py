"""The hosts table's rows and the lock and pause cells, as HTML made in Python.

Through the template engine a page of 50 host rows cost more than the rest of the page and
its queries together: four includes and about 90 nodes a row, each a context lookup and an
escape (docs/performance.md#the-list-pages). Here every value is escaped as format_html
escapes it, unless it is already safe HTML (schedsite.ui.markup).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from django.template import Context
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import capfirst

from hosts.choices import HostStatus
from hosts.models import Host
from jobs.choices import JobStatus
from jobs.models import Lease
from schedsite.ui import html
from schedsite.ui.markup import markup

# The same few icons and badges in every row, made once.
icon = cache(html.icon)
badge = cache(html.badge)
HOST_STATUSES = dict(HostStatus.choices)
JOB_STATUSES = dict(JobStatus.choices)
NONE = mark_safe('<span class="muted">—</span>')
CSRF_INPUT = '<input type="hidden" name="csrfmiddlewaretoken" value="{}">'


def csrf_input(context: Context) -> SafeString:
    """What {% csrf_token %} renders in this context."""
    token = context.get("csrf_token")
    if not token or token == "NOTPROVIDED":
        return mark_safe("")
    return markup(CSRF_INPUT, token)


@dataclass(frozen=True)
class RowPage:
    """What every row of one table shares: who looks, when, and the page's form token."""

    now: datetime
    csrf_input: SafeString
    staff: bool = False
    selected: Container[str] = field(default_factory=frozenset)  # hosts ticked for the batch

    @classmethod
    def of(cls, context: Context) -> RowPage:
        return cls(
            now=context.get("now"),
            csrf_input=csrf_input(context),
            staff=bool(context.get("staff")),
            selected=context.get("selected") or frozenset(),
        )


# --- the lock and pause cells, of host and worker rows ----------------------------------------

HELD_CELL = (
    '<td data-label="{Kind}"> <span class="badge tone-{tone}">{icon} {state}</span>'
    ' <div class="sub">{reason}</div> <div class="sub">{by}, {at}</div> </td>'
)


def hold_cell(
    *, held: bool, kind: str, state: str, tone: str, reason: str, by: Any, at: Any, now: Any
) -> SafeString:
    """A host's lock or a worker's pause in a table row: the kind ("lock") is also its icon."""
    if not held:
        return markup('<td data-label="{}"> {} </td>', capfirst(kind), NONE)
    return markup(
        HELD_CELL,
        Kind=capfirst(kind),
        tone=tone,
        icon=icon(kind),
        state=state,
        reason=reason,
        by=(by.get_username() if by else "") or "?",
        at=html.ago(at, now),
    )


IMPACT_SLOT = (
    '<p class="hint" id="{id}" role="status" hx-get="{url}{kind}/impact/"'
    ' hx-trigger="focusin from:closest form once" hx-target="this" hx-swap="innerHTML"'
    ' hx-sync="this:drop"></p>'
)


def hold_impact_slot(*, url: str, kind: str, pk: Any = None) -> SafeString:
    """What the lock or pause would change (the what-if planner), loaded once staff start on
    the form."""
    slot = f"{kind}-impact-{pk}" if pk else f"detail-{kind}-impact"
    return markup(IMPACT_SLOT, id=slot, url=url, kind=kind)


RELEASE_FORM = (
    '<form method="post" action="{url}{action}/" hx-post="{url}{action}/"'
    ' hx-sync="closest .live-region:replace" hx-target="closest tr" hx-swap="outerHTML">'
    ' {csrf} <button class="btn btn-sm" type="submit" aria-label="{release} {name}">'
    "{icon} {release}</button> </form>"
)
HOLD_FORM = (
    '<details{open}> <summary class="btn btn-sm" aria-label="{Kind} {name}…">{icon} {Kind}…'
    '</summary> <form class="inline-form" method="post" action="{url}{kind}/"'
    ' hx-post="{url}{kind}/" hx-sync="closest .live-region:replace" hx-target="closest tr"'
    ' hx-swap="outerHTML"> {csrf} <label for="{kind}-reason-{pk}">Why {kind} {name}?</label>'
    ' <input id="{kind}-reason-{pk}" name="reason" maxlength="500" aria-required="true"'
    ' placeholder="{placeholder}" value="{reason}"{invalid}> {error} {impact}'
    ' <div class="row"><button class="btn btn-primary btn-sm" type="submit">{Kind}</button>'
    "</div> </form> </details>"
)
INVALID = ' aria-invalid="true" aria-describedby="{kind}-error-{pk}"'
ERROR = '<p id="{kind}-error-{pk}" class="field-error">{icon} {error}</p>'
NOTE = '<p class="note {tone}" role="status">{icon} {message}</p>'


def hold_actions(
    *,
    held: bool,
    kind: str,
    release: str,
    release_icon: str,
    url: str,
    name: str,
    pk: Any,
    placeholder: str,
    error: str | None,
    reason: str | None,
    note: tuple[bool, str] | None,
    csrf: SafeString,
) -> SafeString:
    """Lock or unlock a host, pause or resume a worker, from its table row (url: its page).

    `error` and `reason`: a refused lock or pause and the reason typed, shown in its form;
    `note`: what an action just did, as (whether it went well, the message).
    """
    if held:
        form = markup(
            RELEASE_FORM,
            url=url,
            action=release.lower(),
            csrf=csrf,
            release=release,
            name=name,
            icon=icon(release_icon),
        )
    else:
        form = markup(
            HOLD_FORM,
            open=mark_safe(" open") if error else "",
            Kind=capfirst(kind),
            kind=kind,
            name=name,
            icon=icon(kind),
            url=url,
            csrf=csrf,
            pk=pk,
            placeholder=placeholder,
            reason=reason or "",
            invalid=markup(INVALID, kind=kind, pk=pk) if error else "",
            error=markup(ERROR, kind=kind, pk=pk, icon=icon("alert"), error=capfirst(error))
            if error
            else "",
            impact=hold_impact_slot(url=url, kind=kind, pk=pk),
        )
    shown = ""
    if note and not error:
        ok, message = note
        shown = markup(
            NOTE,
            tone="ok" if ok else "err",
            icon=icon("check" if ok else "alert"),
            message=capfirst(message),
        )
    return markup('<td class="actions" data-label="Actions"> {} {} </td>', form, shown)


# --- host rows ------------------------------------------------------------------------------

HOST_ROW = (
    '<tr id="host-{pk}" class="{locked}{flash}"> {select} <th scope="row">'
    ' <a href="{url}">{hostname}</a> {build} </th>'
    ' <td data-label="Status">{status}</td>'
    ' <td data-label="Labels">{labels}</td>'
    ' <td class="nowrap" data-label="Worker"> {worker} </td>'
    ' <td data-label="Lease"> {lease} </td>'
    " {hold} {actions} </tr>"
)
SELECT = (
    '<td class="col-select"><input type="checkbox" form="bulk-form" name="hosts" value="{0}"'
    ' aria-label="Select {0}"{1}></td>'
)
RETIRED = mark_safe(
    '<td class="actions" data-label="Actions"><span class="muted">retired</span></td>'
)


def host_row(
    host: Host,
    page: RowPage,
    *,
    note: tuple[bool, str] | None = None,
    error: str | None = None,
    reason: str | None = None,
) -> SafeString:
    """One host's row, from what jobs.views_hosts.host_rows set on it.

    `note`: what an action just did to it; `error` and `reason`: a refused lock and the reason
    typed, shown again in its form.
    """
    select = actions = ""
    if page.staff:
        checked = mark_safe(" checked") if host.hostname in page.selected else ""
        select = markup(SELECT, host.hostname, checked)
        if host.status == HostStatus.RETIRED and not host.locked:
            actions = RETIRED
        else:
            actions = hold_actions(
                held=host.locked,
                kind="lock",
                release="Unlock",
                release_icon="unlock",
                url=host.row_url,
                name=host.hostname,
                pk=host.pk,
                placeholder="e.g. flaky USB hub, debugging",
                error=error,
                reason=reason,
                note=note,
                csrf=page.csrf_input,
            )
    return markup(
        HOST_ROW,
        pk=host.pk,
        locked="is-locked" if host.locked else "",
        flash=" is-flash" if note else "",
        select=select,
        url=host.row_url,
        hostname=host.hostname,
        build=_build_line(host, page.now),
        status=_status_cell(host),
        labels=host.row_labels or NONE,
        worker=_worker_cell(host, page.now),
        lease=_lease_cell(host, host.row_lease, page.now),
        hold=hold_cell(
            held=host.locked,
            kind="lock",
            state="Locked",
            tone="purple",
            reason=host.lock_reason,
            by=host.locked_by,
            at=host.locked_at,
            now=page.now,
        ),
        actions=actions,
    )


def _build_line(host: Host, now: datetime) -> SafeString | str:
    """Its build under its name, and when a runner last provisioned it (docs/ui.md#pages)."""
    if not host.current_build:
        return ""
    if host.provisioned_at is None:
        return markup('<div class="sub">{}</div>', host.current_build)
    return markup(
        '<div class="sub">{} · provisioned {}</div>',
        host.current_build,
        html.ago(host.provisioned_at, now),
    )


def _worker_cell(host: Host, now: datetime) -> SafeString:
    worker = host.worker
    if worker is None:
        return mark_safe('<span class="muted">none</span>')
    state = ""
    if worker.paused:
        state = badge("worker", "paused")
    elif not worker.is_online(now):
        state = badge("worker", "offline")
    return markup('<a href="{}">{}</a> {}', host.row_worker_url, worker.name, state)


# A ready host that holds a lease is not free: its status says ready (its health), and the
# row says it is busy beside it, so nobody reads "Ready" as "free".
BUSY = (
    ' <span class="badge tone-indigo" title="It holds a lease: a job runs on it, or someone'
    ' reserved it">{}</span>'
)


def _status_cell(host: Host) -> SafeString:
    status = badge("host", host.status, HOST_STATUSES.get(host.status, host.status))
    lease = getattr(host, "row_lease", None)
    if lease is None:
        return status
    return markup("{}{}", status, markup(BUSY, "busy: a job" if lease.job_id else "busy: reserved"))


HELD_FOR = (
    '<span class="badge tone-teal" title="The scheduler keeps it free for a job that needs'
    ' several hosts at once, until the rest of them free up">held</span>'
    ' <a href="{}">held for job {}</a>'
)


def _lease_cell(host: Host, lease: Lease | None, now: datetime) -> SafeString:
    if lease is None:
        held_for = getattr(host, "row_held_for", None)
        return markup(HELD_FOR, host.row_held_url, held_for) if held_for else NONE
    job = lease.job
    if job is not None:
        status = badge("job", job.status, JOB_STATUSES.get(job.status, job.status))
        role = markup(" · role {}", lease.role) if lease.role else ""
        # The job links to its own page; its suite, under it, to the suite's.
        if job.suite_id:
            return markup(
                '{} <a href="{}">{}</a><div class="sub"><a href="{}">{}</a>{}</div>',
                status,
                host.row_job_url,
                job.name,
                host.row_suite_url,
                job.suite.name,
                role,
            )
        return markup(
            '{} <a href="{}">{}</a><div class="sub">standalone job{}</div>',
            status,
            host.row_job_url,
            job.name,
            role,
        )
    holder = (lease.holder.get_username() if lease.holder else "") or "?"
    return markup(
        '{} <span class="sub">by {}, ends {}</span> {}',
        badge("lease", "active", "Reserved"),
        holder,
        html.until(lease.expires_at, now),
        markup('<div class="sub">{}</div>', lease.reason) if lease.reason else "",
    )
