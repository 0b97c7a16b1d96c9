"""Lab files carry multi-host jobs: roles and together_by survive import and export."""

from __future__ import annotations

import copy
import json

import pytest
from django.core.management import CommandError, call_command

from jobs.models import Job, Suite

pytestmark = pytest.mark.django_db


def host(name: str, *labels: str) -> dict:
    return {
        "hostname": name,
        "worker": "w1",
        "labels": list(labels),
        "status": "ready",
        "locked": False,
        "lock_reason": "",
        "current_build": "",
    }


PAIR = {
    "name": "bt_Pair",
    "labels": ["board:eve"],
    "host": None,
    "running_on": None,
    "roles": [
        {"name": "dut", "labels": ["bt"], "count": 1, "max": 2},
        {"name": "peer", "labels": ["ap"], "count": 1, "max": 1},
    ],
    "together_by": "chamber",
}
LAB = {
    "workers": [{"name": "w1", "paused": False}],
    "hosts": [
        host("a1.lab", "board:eve", "bt", "chamber:a"),
        host("a2.lab", "ap", "board:eve", "chamber:a"),
    ],
    "suites": [
        {
            "name": "BT",
            "priority": 50,
            "min_duts": 2,
            "max_duts": None,
            "build": "",
            "jobs": [PAIR, {"name": "one", "labels": ["bt"], "host": None, "running_on": None}],
        }
    ],
    "jobs": [{**PAIR, "name": "solo_Pair", "priority": 40}],
}


def write(tmp_path, data):  # noqa: ANN001, ANN201
    path = tmp_path / "lab.json"
    path.write_text(json.dumps(data))
    return path


def test_roles_and_together_by_round_trip_through_a_lab_file(tmp_path, capsys):
    call_command("import_lab", str(write(tmp_path, LAB)))
    pair = Job.objects.get(name="bt_Pair")
    assert pair.roles == PAIR["roles"] and pair.together_by == "chamber"
    assert Job.objects.get(name="one").roles == []

    capsys.readouterr()
    call_command("export_lab")
    exported = json.loads(capsys.readouterr().out)

    assert exported["suites"] == LAB["suites"]
    assert exported["jobs"] == LAB["jobs"]


def test_roles_are_normalized_on_import_as_on_submission(tmp_path):
    lab = copy.deepcopy(LAB)
    lab["suites"][0]["jobs"][0]["roles"] = [
        {"name": "dut", "labels": ["bt", "bt"], "count": 2},
        {"name": "peer", "labels": ["ap"]},
    ]
    call_command("import_lab", str(write(tmp_path, lab)))

    assert Job.objects.get(name="bt_Pair").roles == [
        {"name": "dut", "labels": ["bt"], "count": 2, "max": 2},
        {"name": "peer", "labels": ["ap"], "count": 1, "max": 1},
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"roles": [{"name": "dut"}, {"name": "dut"}]},
            "jobs[0] (bt_Pair).roles[1].name: role dut is named twice",
        ),
        (
            {"roles": [{"name": "dut", "count": 3, "max": 2}]},
            "jobs[0] (bt_Pair).roles[0].max: for role dut, at least its count",
        ),
        ({"roles": [], "together_by": "chamber"}, "jobs[0] (bt_Pair).together_by"),
        ({"host": "a1.lab"}, "jobs[0] (bt_Pair).roles: a job pinned to a host"),
        ({"running_on": "a1.lab"}, "jobs[0] (bt_Pair).running_on: a job with roles is imported"),
    ],
    ids=["same name", "max below count", "together_by alone", "pinned", "running"],
)
def test_a_bad_role_in_a_lab_file_changes_nothing_and_names_it(tmp_path, change, expected):
    lab = copy.deepcopy(LAB)
    lab["suites"][0]["jobs"][0].update(change)

    with pytest.raises(CommandError) as err:
        call_command("import_lab", str(write(tmp_path, lab)))

    assert expected in str(err.value)
    assert not Suite.objects.exists() and not Job.objects.exists()
