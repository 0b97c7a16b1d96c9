"""`JSONText`: a JSON value stored as its text, written as the standard library would write it."""

from __future__ import annotations

import json

import pytest

from jobs.models import WaitReasonClass
from schedsite.model_fields import dumps_compact

REASON = {
    "code": "hosts_unavailable",
    "message": "1 is held for job 65888 (expected start in about 10 min); the other 106 are "
    'busy running priority ≤ 70 jobs — «quoted» "too", a\\path\nand a tab\t',
    "details": {
        "matching": 109,
        "busy": 106,
        "held_for": None,
        "workers_at_capacity": {"w-1": 4},
        "labels": ["board:eve", "pool:cq"],
        "share": 0.25,
        "pinned": False,
    },
}


def _stdlib(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def test_the_text_is_what_the_standard_library_writes():
    assert dumps_compact(REASON) == _stdlib(REASON)
    assert dumps_compact({"a": [1, 2.5, "é"], "b": {}}) == '{"a":[1,2.5,"é"],"b":{}}'


def test_integer_keys_are_written_as_strings_as_the_standard_library_does():
    value = {7: "seven", "8": {9: [True]}}
    assert dumps_compact(value) == _stdlib(value) == '{"7":"seven","8":{"9":[true]}}'


@pytest.mark.django_db
def test_a_row_reads_back_the_value_it_was_given():
    WaitReasonClass.objects.create(key="k", reason=REASON)
    assert WaitReasonClass.objects.get(key="k").reason == REASON
