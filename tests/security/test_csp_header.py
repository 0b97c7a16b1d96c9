"""The Content-Security-Policy header: the policy built once per process is django-csp's."""

from __future__ import annotations

import pytest
from csp.decorators import csp_exempt, csp_update
from csp.middleware import CSPMiddleware as DjangoCSPMiddleware
from django.http import HttpResponse
from django.test import RequestFactory

from schedsite.middleware import CSPMiddleware


def answer(request: object) -> HttpResponse:
    return HttpResponse("{}", content_type="application/json")


@csp_update({"img-src": "https://example.org"})
def updated(request: object) -> HttpResponse:
    return HttpResponse("<p>")


@csp_exempt()
def exempt(request: object) -> HttpResponse:
    return HttpResponse("<p>")


def nonced(request: object) -> HttpResponse:
    return HttpResponse(f"<script nonce='{request.csp_nonce}'>")  # type: ignore[attr-defined]


@pytest.mark.parametrize("view", [answer, updated, exempt, nonced])
def test_each_answer_gets_the_headers_django_csp_gives_it(view, settings):
    settings.CONTENT_SECURITY_POLICY_REPORT_ONLY = {
        "EXCLUDE_URL_PREFIXES": ["/static/"],
        "DIRECTIVES": {"default-src": ["'none'"], "report-uri": "/csp-report/"},
    }
    ours, theirs = CSPMiddleware(view), DjangoCSPMiddleware(view)
    for path in ("/api/workers/w1/heartbeat/", "/static/app.css"):
        got = [middleware(RequestFactory().post(path)) for middleware in (ours, ours, theirs)]
        headers = [
            (r.get("Content-Security-Policy"), r.get("Content-Security-Policy-Report-Only"))
            for r in got
        ]
        if view is not nonced:  # a nonce is new for each answer
            assert headers[0] == headers[1] == headers[2], path
        assert [h is None for h in headers[0]] == [h is None for h in headers[2]], path
    assert (headers[0][0] is None) == (view is exempt)


def test_a_replaced_policy_is_built_again(settings):
    middleware = CSPMiddleware(answer)
    before = middleware(RequestFactory().get("/api/")).get("Content-Security-Policy")
    settings.CONTENT_SECURITY_POLICY = {"DIRECTIVES": {"default-src": ["'none'"]}}
    after = middleware(RequestFactory().get("/api/")).get("Content-Security-Policy")
    assert "'self'" in before and after == "default-src 'none'"


def test_a_nonce_asked_for_after_the_header_is_written_is_an_error():
    request = RequestFactory().get("/api/")
    CSPMiddleware(answer)(request)
    with pytest.raises(Exception, match="csp_nonce"):
        str(request.csp_nonce)  # type: ignore[attr-defined]
