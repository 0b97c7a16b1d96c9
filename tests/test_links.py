"""A route reversed once per page gives each row the URL reverse() gives it, or its error."""

from __future__ import annotations

import pytest
from django.urls import NoReverseMatch, reverse
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from jobs.api.fields import IdentityURL
from schedsite import links
from schedsite.links import route_url

# Values the fast path formats in, values it hands to reverse(), values no route takes.
IDS = [1, 7, 42, 10**12, "0", "0042"]
NAMES = ["dut1", "dut1.lab", "a-b_c.d", "X9", "9081726354", "h.9081726354"]
ODD = ["", "a b", "café", "a/b", "..", ".x", "-x", "a%2Fb", "a&b", -1, None]


def reversed_or_error(view_name: str, value: object) -> str | type[Exception]:
    try:
        return reverse(view_name, args=[value])
    except NoReverseMatch:
        return NoReverseMatch


@pytest.mark.parametrize(
    ("view_name", "accepts", "values"),
    [
        ("jobs:job_detail", links.IDS, IDS + NAMES + ODD),
        ("jobs:suite_detail", links.IDS, IDS + NAMES + ODD),
        ("hosts:host_detail", links.NAMES, IDS + NAMES + ODD),
        ("hosts:worker_detail", links.NAMES, IDS + NAMES + ODD),
        ("api:host-detail", links.NAMES, IDS + NAMES + ODD),
        ("api:job-detail", links.IDS, IDS + NAMES + ODD),
    ],
)
def test_each_value_gets_what_reverse_gives_it(view_name, accepts, values):
    url = route_url(view_name, accepts)
    for value in values:
        expected = reversed_or_error(view_name, value)
        if expected is NoReverseMatch:
            with pytest.raises(NoReverseMatch):
                url(value)
        else:
            assert url(value) == expected, value


def test_a_route_the_placeholder_cannot_stand_in_is_refused_at_once():
    with pytest.raises(NoReverseMatch):
        route_url("hosts:host_list")  # takes no value


class Named:
    """A stand-in row: a primary key and a name, as the serializers read them."""

    def __init__(self, pk: object, name: str) -> None:
        self.pk = pk
        self.name = name


class Reference(serializers.Serializer):
    url = serializers.HyperlinkedIdentityField(view_name="api:worker-detail", lookup_field="name")
    job = serializers.HyperlinkedIdentityField(view_name="api:job-detail")


class Fast(serializers.Serializer):
    url = IdentityURL(view_name="api:worker-detail", lookup_field="name", accepts=links.NAMES)
    job = IdentityURL(view_name="api:job-detail")


@pytest.mark.parametrize(
    "path",
    ["/api/workers/", "/api/workers/?format=json", "/api/jobs/?page=2&format=api"],
)
def test_identity_urls_are_drfs_for_every_row(path, settings):
    settings.ALLOWED_HOSTS = ["lab.example"]
    request = Request(APIRequestFactory().get(path, HTTP_HOST="lab.example:8443"))
    # Names outside links.NAMES (a space, an accent, dots alone) take DRF's own path.
    names = [*NAMES, "a b", "café", "..", "x."]
    rows = [Named(pk, name) for pk, name in zip(IDS * 2, names, strict=False)]
    context = {"request": request}
    expected = Reference(rows, many=True, context=context).data
    assert Fast(rows, many=True, context=context).data == expected
    assert any("format=" in row["url"] for row in expected) == ("format=" in path)


def test_an_unsaved_row_has_no_url_as_before():
    row = Named(None, "w1")
    context = {"request": Request(APIRequestFactory().get("/api/jobs/"))}
    assert Fast(row, context=context).data["job"] is None
    assert Reference(row, context=context).data["job"] is None
