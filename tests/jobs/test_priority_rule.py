"""Priorities: one table of level names, one parser, one default, read by every door."""

from __future__ import annotations

import pytest
from rest_framework.exceptions import ValidationError

from jobs.api.fields import PriorityField
from jobs.choices import DEFAULT_PRIORITY, PRIORITY_LEVELS, Priority, parse_priority
from jobs.labfile import _Checker
from jobs.models import Job, Suite
from jobs.templatetags.schedsite_ui import priority_name

# What a person or a file may write -> the priority it means (None: refused).
CASES = {
    "a number": (70, 70),
    "the lowest": (0, 0),
    "the highest": (100, 100),
    "a level's name": ("cq", 70),
    "a name in capitals, with spaces": ("  Weekly ", 10),
    "digits in a string": ("70", 70),
    "a whole float": (70.0, 70),
    "above 100": (101, None),
    "below 0": (-1, None),
    "a fraction": (70.5, None),
    "a boolean": (True, None),
    "nothing": (None, None),
    "an unknown name": ("urgent", None),
    "a superscript digit": ("²", None),
    "too many digits": ("0070", None),
}


@pytest.mark.parametrize(("given", "expected"), CASES.values(), ids=CASES.keys())
def test_the_api_and_the_lab_file_read_a_priority_alike(given, expected):
    if expected is None:
        with pytest.raises(ValueError):
            parse_priority(given)
        with pytest.raises(ValidationError):
            PriorityField().to_internal_value(given)
    else:
        assert parse_priority(given) == expected
        assert PriorityField().to_internal_value(given) == expected
    check = _Checker()
    got = check.priority({"priority": given}, "suites[0]", DEFAULT_PRIORITY)
    assert (got, bool(check.problems)) == (
        (expected, False) if expected is not None else (DEFAULT_PRIORITY, True)
    )


def test_the_lab_file_says_what_is_wrong_with_a_priority():
    check = _Checker()
    for given in (500, "urgent", 1.5):
        check.priority({"priority": given}, "s", DEFAULT_PRIORITY)
    assert check.problems == [
        "s.priority: must be from 0 to 100, got 500",
        "s.priority: unknown level 'urgent' (use 0–100 or weekly, daily, postbuild, default, "
        "build, pfq, cq, super)",
        "s.priority: must be a whole number, got 1.5",
    ]


def test_one_default_and_one_table_of_names():
    assert DEFAULT_PRIORITY == Priority.DEFAULT == 40
    assert Suite._meta.get_field("priority").default == DEFAULT_PRIORITY
    assert Job._meta.get_field("priority").default == DEFAULT_PRIORITY
    assert {level.label: level.value for level in Priority} == PRIORITY_LEVELS
    assert [priority_name(value) for value in (70, 45, None)] == ["cq", "", ""]
