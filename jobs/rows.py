"""The queue page's rows and the suites' progress cells, as HTML made in Python
(schedsite.ui.markup).

Through the template engine a page of 50 queued jobs cost 6-7 ms, a quarter of the page
(docs/performance.md#the-list-pages); made here, 2-3 ms. The dashboard's eight suites' cells
cost about 9 ms as templates (docs/performance.md#the-dashboard-and-the-job-page-session-17).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import cache
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from jobs import badges
from jobs.choices import TERMINAL_JOB_STATUSES, JobKind, JobStatus
from jobs.models import Job, Suite
from jobs.querysets import unfinished_jobs
from schedsite import links
from schedsite.ui import html
from schedsite.ui.charts import Segment, stacked_segments
from schedsite.ui.markup import markup

# The same few icons and priorities in every row, made once.
PIN = html.icon("pin")
priority = cache(badges.priority)
ANY_HOST = mark_safe('<span class="muted">any host</span>')

QUEUE_ROW = (
    '<tr id="queued-{pk}"> <td class="num" data-label="#">{position}</td> <th scope="row">'
    ' <a href="{url}">{name}</a>{kind} <div class="sub"> {origin}{attempt} </div> </th>'
    ' <td class="nowrap" data-label="Priority"> {priority} {aging} {quota} </td>'
    ' <td data-label="Needs"> {labels} {host} </td>'
    ' <td class="nowrap" data-label="Queued">{queued}</td>'
    ' <td data-label="Why it waits"> <div class="reason">'
    ' <span class="badge tone-{tone}">{title}</span>'
    ' <span class="reason-text">{message}</span> </div> </td>{actions} </tr>'
)
# A queued job's controls, for its owner and staff (jobs.views.job_priority, job_abort): they
# post with htmx and get the queue table back, its filters and page kept (`from`).
ACTIONS = (
    ' <td data-label="Actions"> <form class="row-form" method="post" action="{priority_url}"'
    ' hx-post="{priority_url}" hx-sync="closest .live-region:replace" hx-target="#queue-table"'
    ' hx-swap="outerHTML"> <input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">'
    ' <input type="hidden" name="from" value="queue">'
    ' <label class="visually-hidden" for="priority-{pk}">Priority of job {pk}</label>'
    ' <select id="priority-{pk}" name="priority">{options}</select>'
    ' <button class="btn btn-sm" type="submit">Set</button> </form>'
    ' <form class="row-form" method="post" action="{abort_url}" hx-post="{abort_url}"'
    ' hx-sync="closest .live-region:replace" hx-target="#queue-table" hx-swap="outerHTML"'
    ' hx-confirm="Abort job {name}? It leaves the queue and will not run.">'
    ' <input type="hidden" name="csrfmiddlewaretoken" value="{csrf}">'
    ' <input type="hidden" name="from" value="queue">'
    ' <button class="btn btn-sm btn-danger" type="submit">Abort</button> </form> </td>'
)
NO_ACTIONS = mark_safe('<td data-label="Actions"></td>')
MAINTENANCE = (
    ' <span class="badge tone-amber" title="A maintenance job the scheduler made for its host">'
    "{}</span>"
)
AGING = (
    '<div class="sub" title="Aging is on: a queued job gains a priority level for every {step}'
    ' minutes it waits, up to the cap">+{bonus} after {waited} min waiting: {priority}</div>'
)
PINNED = '<div class="sub">{} <a href="{}">{}</a></div>'
MULTI_HOST = '<div class="sub" title="{roles}"><strong>{hosts}</strong>{together}</div>'
HOLDING = (
    '<div><span class="badge tone-teal" title="The scheduler keeps these hosts free for it'
    ' until the rest of its hosts free up">holding {held} host{s}</span></div>'
)
QUOTA = mark_safe(
    '<div><span class="badge tone-teal" title="The suite holds fewer hosts than its minimum,'
    ' so its first jobs go before every priority">min-DUT quota</span></div>'
)


def queue_row(row: Mapping[str, Any], now: datetime | None) -> SafeString:
    """One queued job's row, from the row jobs.views.queue made for it."""
    job, reason, aging = row["job"], row["reason"], row["aging"]
    kind = origin = ""
    if job.kind != JobKind.TEST:
        kind = markup(MAINTENANCE, job.kind)
        origin = "maintenance · scheduler"
    elif job.suite_id:
        origin = markup('<a href="{}">{}</a> · {}', row["suite_url"], job.suite.name, _owner(job))
    else:
        origin = markup("standalone · {}", _owner(job))
    aged = ""
    if aging and aging.bonus:
        aged = markup(
            AGING,
            step=aging.step,
            bonus=aging.bonus,
            waited=aging.waited_minutes,
            priority=aging.priority,
        )
    # Each label links to its page: its hosts, queue and history.
    chips = [label_chip(name) for name in job.labels]
    host = ""
    if job.host_id:
        host = markup(PINNED, PIN, row["host_url"], job.host.hostname)
    if job.roles:
        together = f" · together by {job.together_by}" if job.together_by else ""
        host = markup(
            MULTI_HOST,
            roles=roles_text(job.roles),
            hosts=f"{hosts_text(job.roles)}: {roles_text(job.roles)}",
            together=together,
        )
    if held := row.get("holding"):
        host = markup("{}{}", host, markup(HOLDING, held=held, s="s" * (held != 1)))
    actions = ""
    if controls := row.get("controls"):
        actions = _actions(job, controls)
    elif row.get("actions_column"):
        actions = NO_ACTIONS
    return markup(
        QUEUE_ROW,
        actions=actions,
        pk=job.pk,
        position=row["position"],
        url=row["url"],
        name=job.name,
        kind=kind,
        origin=origin,
        attempt=f" · attempt {job.attempts + 1}" if job.attempts else "",
        priority=priority(job.priority),
        aging=aged,
        quota=QUOTA if row["quota"] else "",
        labels=mark_safe("".join(chips)) if chips else ANY_HOST,  # noqa: S308
        host=host,
        queued=html.ago(job.created_at, now),
        tone=badges.wait_tone(reason),
        title=badges.wait_title(reason),
        message=(reason or {}).get("message", ""),
    )


def _actions(job: Job, controls: Mapping[str, Any]) -> SafeString:
    levels = list(controls["levels"])
    if all(value != job.priority for value, _ in levels):
        levels = sorted([*levels, (job.priority, str(job.priority))], reverse=True)
    options = mark_safe(  # noqa: S308 -- every value is escaped by markup
        "".join(
            markup(
                '<option value="{}"{}>{}</option>',
                value,
                mark_safe(" selected") if value == job.priority else "",
                label,
            )
            for value, label in levels
        )
    )
    return markup(
        ACTIONS,
        pk=job.pk,
        name=job.name,
        csrf=controls["csrf"],
        options=options,
        priority_url=controls["priority_url"](job.pk),
        abort_url=controls["abort_url"](job.pk),
    )


@cache
def label_chip(name: str) -> SafeString:
    """A label as a chip linking to its page (/labels/<label>/); made once per label."""
    return markup(
        '<a class="chip" href="{}" title="{}">{}</a>',
        reverse(links.LABEL_PAGE, args=[name]),
        links.LABEL_TITLE.format(name),
        name,
    )


def hosts_text(roles: Sequence[Mapping[str, Any]]) -> str:
    """How many hosts a multi-host job needs: "3 hosts", or "3–5 hosts" with elastic ones."""
    low = sum(role["count"] for role in roles)
    high = sum(role.get("max", role["count"]) for role in roles)
    return f"{low} hosts" if high == low else f"{low}–{high} hosts"


def roles_text(roles: Sequence[Mapping[str, Any]]) -> str:
    """Its roles in a line: "dut ×2 (bt), peer (ap)"."""
    parts = []
    for role in roles:
        count = role["count"]
        top = role.get("max", count)
        many = (
            f" ×{count}"
            if top == count and count > 1
            else (f" ×{count}–{top}" if top > count else "")
        )
        labels = f" ({' '.join(role['labels'])})" if role["labels"] else ""
        parts.append(f"{role['name']}{many}{labels}")
    return ", ".join(parts)


def _owner(job: Job) -> str:
    return (job.owner.get_username() if job.owner else "") or "?"


# --- a suite's progress: its cells in the suite list and on the dashboard, its page's bars ---

# Finished states first (left), then work in flight, then what still waits.
COMPLETION_ORDER = [
    (JobStatus.PASSED, "passed"),
    (JobStatus.FAILED, "failed"),
    (JobStatus.ERROR, "error"),
    (JobStatus.ABORTED, "aborted"),
    (JobStatus.EXPIRED, "expired"),
    (JobStatus.SKIPPED, "skipped"),
    (JobStatus.RUNNING, "running"),
    (JobStatus.LEASED, "leased"),
    (JobStatus.QUEUED, "queued"),
]
BAR = '<svg class="bar" viewBox="0 0 100 10" preserveAspectRatio="none" role="img" aria-label="{}">'
QUOTA_BAR = (
    '<div class="bar-label"><span>Hosts vs min DUTs</span><strong>{held} / {min}{max}</strong>'
    "</div>"
    + BAR.replace("{}", "{label}")
    + '<rect class="{cls}" width="{pct}" height="10"/></svg>'
)
HELD = '<div class="bar-label"><span>Hosts held</span><strong>{}{}</strong></div>'
DONE_BAR = (
    '<div class="bar-label mt-6"><span>Jobs done</span><strong>{done} / {total}</strong></div>'
    + BAR.replace("{}", "{label}")
    + "{segments}</svg>"
)
SEGMENT = '<rect class="seg-{}" x="{}" width="{}" height="10"><title>{} {}</title></rect>'
SUITE_CELLS = (
    '<td data-label="Priority">{priority}</td><td data-label="Owner">{owner}</td>'
    '<td data-label="Progress">{bars}</td>'
    '<td class="nowrap" data-label="Submitted">{submitted}</td>'
)


def completion_segments(counts: Mapping[str, int] | None) -> list[Segment]:
    """Split a suite's job counts into stacked-bar segments (percentages of the total)."""
    return stacked_segments(counts, COMPLETION_ORDER)


def suite_bars(suite: Suite, counts: Mapping[str, int] | None, held: int) -> SafeString:
    """Min-DUT attainment (hosts the suite holds against its minimum and cap), then its jobs
    done as a bar of their outcomes."""
    counts = counts or {}
    hosts: SafeString | str = ""
    if unfinished_jobs(counts):
        cap = f" · max {suite.max_duts}" if suite.max_duts else ""
        if suite.min_duts:
            met = held >= suite.min_duts
            hosts = markup(
                QUOTA_BAR,
                held=held,
                min=suite.min_duts,
                max=cap,
                label=f"{held} of a minimum of {suite.min_duts} hosts held"
                + (": quota met" if met else ": below its minimum"),
                cls="quota-met" if met else "quota-short",
                pct=max(0, min(100, round(100 * held / suite.min_duts))),
            )
        else:
            hosts = markup(HELD, held, cap or " · no minimum")
    segments = completion_segments(counts)
    done = sum(counts.get(s, 0) for s in TERMINAL_JOB_STATUSES)
    total = sum(counts.values())
    label = f"{done} of {total} jobs finished" + "".join(
        f", {seg.count} {seg.label}" for seg in segments
    )
    bar = markup(
        DONE_BAR,
        done=done,
        total=total,
        label=label,
        segments=mark_safe(  # noqa: S308 -- every value is escaped by markup
            "".join(
                markup(SEGMENT, s.key, f"{s.start:g}", f"{s.pct:g}", s.count, s.label)
                for s in segments
            )
        ),
    )
    return markup('<div class="bars-cell">{}{}</div>', hosts, bar)


def suite_cells(row: Mapping[str, Any], now: datetime | None) -> SafeString:
    """A suite's priority, owner, progress and age cells, from a row of `suite`, `counts` and
    `held` (the suite list's and the dashboard's rows)."""
    suite = row["suite"]
    owner = suite.owner.get_username() if suite.owner else ""
    return markup(
        SUITE_CELLS,
        priority=priority(suite.priority),
        owner=owner or "—",
        bars=suite_bars(suite, row["counts"], row["held"]),
        submitted=html.ago(suite.created_at, now),
    )
