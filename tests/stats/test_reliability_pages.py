"""The reliability pages: the figures of the API in a table sorted by any column, a range
selector, the CSV link, and a clear 400 for a bad range (docs/ui.md#reliability)."""

from __future__ import annotations

import re

import pytest

from tests import factories as f

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
alice_client = f.client_fixture("alice", f.signed_in)


def cells(html: str, label: str) -> list[str]:
    """The text of every cell of a column, by its data-label, tags stripped, in row order."""
    found = re.findall(rf'data-label="{label}">(.*?)</t[dh]>', html, flags=re.S)
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in found]


def test_the_host_page_shows_the_host_that_broke_twice_first(broken_twice, alice_client):
    html = alice_client.get("/reliability/hosts/").content.decode()

    assert cells(html, "Host") == ["h1", "h2"]
    assert cells(html, "Breaks") == ["2", "0"]
    assert cells(html, "Failed repairs") == ["1", "0"]
    assert cells(html, "Out of service") == ["3.0 h", "0"]
    assert cells(html, "MTBF")[1] == "—"
    assert cells(html, "Pass rate") == ["0%", "100%"]
    assert "2 hosts · the last 30 days" in html
    # Sorted by breaks, most first: its head says so, to screen readers too.
    assert re.search(r'<th scope="col" class="num" aria-sort="descending"><a [^>]*>Breaks', html)


def test_a_column_head_sorts_by_it_and_a_second_click_reverses(broken_twice, alice_client):
    page = alice_client.get("/reliability/hosts/?range=30d&ordering=hostname").content.decode()
    link = re.search(r'href="([^"]+)"[^>]*title="Of its jobs, those that passed"', page)[1]
    assert "ordering=-pass_rate" in link  # a rate sorts highest first

    table = alice_client.get(link.replace("&amp;", "&"), headers=HTMX).content.decode()
    assert table.lstrip().startswith('<div id="reliability-table"')  # only the table
    assert cells(table, "Host") == ["h2", "h1"]
    again = re.search(r'href="([^"]+)"[^>]*title="Of its jobs, those that passed"', table)[1]
    assert "ordering=pass_rate" in again and "ordering=-pass_rate" not in again


def test_the_range_selector_narrows_the_figures(broken_twice, alice_client):
    html = alice_client.get("/reliability/hosts/?range=1h").content.decode()

    assert cells(html, "Breaks") == ["0", "0"]
    assert '<option value="1h" selected>hour</option>' in html
    # The export carries the range and the order the page shows.
    assert 'href="/api/stats/hosts/?range=1h&amp;ordering=-breaks&amp;format=csv"' in html


def test_the_test_page_marks_the_flaky_test_and_names_the_host_it_failed_on(
    test_runs, alice_client
):
    html = alice_client.get("/reliability/tests/?ordering=name").content.decode()

    assert [c.split("Failed on")[0] for c in cells(html, "Test")] == [
        "lone",
        "smoke-t0",
        "stable-t0",
    ]
    assert cells(html, "Flaky") == ["no", "flaky", "no"]
    assert 'title="Passed and failed on build R1">flaky</span>' in html
    assert 'Failed on <a href="/hosts/h2/">h2</a>' in html
    assert cells(html, "Pass rate") == ["50%", "50%", "50%"]


@pytest.mark.parametrize(
    "url", ["/reliability/hosts/?range=forever", "/reliability/tests/?ordering=uptime"]
)
def test_a_bad_range_or_column_is_a_400_page_that_says_what_is_allowed(alice_client, url):
    response = alice_client.get(url)

    assert response.status_code == 400
    text = response.content.decode()
    assert "must be one of" in text and ("1h, 24h, 7d, 30d" in text or "pass_rate" in text)


def test_the_navigation_links_the_reliability_pages(alice_client):
    html = alice_client.get("/reliability/tests/").content.decode()

    assert '<a href="/reliability/hosts/" aria-current="page">Reliability</a>' in html
    assert "No test passed or failed in the last 7 days." in html
