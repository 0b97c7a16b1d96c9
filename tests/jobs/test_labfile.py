"""import_lab / export_lab: round trip, rejection of bad files as a whole."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from hosts.models import Host, Worker
from jobs.choices import JobStatus
from jobs.models import Job, Lease, Suite

pytestmark = pytest.mark.django_db

LAB = {
    "workers": [
        {"name": "w1", "paused": False},
        {"name": "w2", "paused": True, "paused_reason": "rack move"},
    ],
    "hosts": [
        {
            "hostname": "h1.lab",
            "worker": "w1",
            "labels": ["board:x", "pool:bvt"],
            "status": "ready",
            "locked": False,
            "lock_reason": "",
            "current_build": "R1",
        },
        {
            "hostname": "h2.lab",
            "worker": "w1",
            "labels": ["board:x"],
            "status": "ready",
            "locked": True,
            "lock_reason": "debugging",
            "current_build": "",
        },
        {
            "hostname": "h3.lab",
            "worker": "w2",
            "labels": ["board:y"],
            "status": "needs_repair",
            "locked": False,
            "lock_reason": "",
            "current_build": "",
        },
    ],
    "suites": [
        {
            "name": "SA",
            "priority": 50,
            "min_duts": 2,
            "max_duts": None,
            "build": "R2",
            "jobs": [
                {"name": "t1", "labels": ["board:x"], "host": None, "running_on": "h1.lab"},
                {"name": "t2", "labels": ["board:x"], "host": None, "running_on": None},
            ],
        },
    ],
    "jobs": [
        {
            "name": "solo",
            "priority": 40,
            "labels": ["board:x"],
            "host": "h2.lab",
            "running_on": None,
        }
    ],
}


def write(tmp_path, data, name="lab.json"):  # noqa: ANN001, ANN201
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_a_lab_file_round_trips_through_export(tmp_path, capsys):
    call_command("import_lab", str(write(tmp_path, LAB)))
    assert Host.objects.count() == 3 and Worker.objects.get(name="w2").paused
    job = Job.objects.get(name="t1")
    assert job.status == JobStatus.RUNNING
    assert Lease.objects.get(job=job, released_at__isnull=True).host.hostname == "h1.lab"

    capsys.readouterr()
    call_command("export_lab")
    exported = json.loads(capsys.readouterr().out)

    assert exported["workers"] == LAB["workers"]
    assert exported["hosts"] == LAB["hosts"]
    assert exported["suites"] == LAB["suites"]
    assert exported["jobs"] == LAB["jobs"]


def test_importing_the_same_file_twice_changes_nothing_more(tmp_path):
    path = write(tmp_path, LAB)
    call_command("import_lab", str(path))
    call_command("import_lab", str(path))
    assert (Suite.objects.count(), Job.objects.count(), Host.objects.count()) == (1, 3, 3)


def test_yaml_files_are_read_by_extension(tmp_path):
    import yaml

    call_command("import_lab", str(write(tmp_path, yaml.safe_dump(LAB), "lab.yaml")))
    assert Host.objects.count() == 3


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda lab: lab["suites"][0]["jobs"][1].update(running_on="nope.lab"),
            "suites[0] (SA).jobs[1] (t2).running_on: unknown host 'nope.lab'",
        ),
        (
            lambda lab: lab["suites"][0].update(priority=500),
            "suites[0] (SA).priority: must be from 0 to 100, got 500",
        ),
        (
            lambda lab: lab["hosts"].append(dict(lab["hosts"][0])),
            "hosts[3] (h1.lab).hostname: duplicate hostname h1.lab",
        ),
        (lambda lab: lab["hosts"][0].update(worker="w9"), "hosts[0] (h1.lab).worker"),
        (lambda lab: lab["hosts"][0].update(status="broken"), "hosts[0] (h1.lab).status"),
        (lambda lab: lab["suites"][0]["jobs"][1].update(running_on="h1.lab"), "already runs"),
    ],
)
def test_a_bad_file_changes_nothing_and_names_the_entry(tmp_path, mutate, expected):
    lab = json.loads(json.dumps(LAB))
    mutate(lab)
    with pytest.raises(CommandError) as err:
        call_command("import_lab", str(write(tmp_path, lab)))
    assert expected in str(err.value)
    assert not Host.objects.exists() and not Suite.objects.exists() and not Job.objects.exists()


def test_a_file_that_is_not_json_is_rejected_clearly(tmp_path):
    with pytest.raises(CommandError, match="not valid"):
        call_command("import_lab", str(write(tmp_path, "{nope", "lab.json")))


def test_tick_json_prints_the_leases_it_made(tmp_path, capsys):
    from django.utils import timezone

    call_command("import_lab", str(write(tmp_path, LAB)))
    Worker.objects.update(last_seen=timezone.now())  # their runners heartbeat
    capsys.readouterr()
    call_command("tick", "--json")
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"leases", "expired", "duration_ms"}
    # h1 runs t1; h2 is locked; h3 is on a paused worker: nothing is free for t2 or solo.
    assert out["leases"] == [] and out["expired"] == 0
    Host.objects.filter(hostname="h2.lab").update(locked=False, lock_reason="")
    call_command("tick", "--json")
    out = json.loads(capsys.readouterr().out)
    assert out["leases"] == [{"job": "t2", "suite": "SA", "host": "h2.lab", "kind": "test"}]


def test_an_imported_lab_has_its_audit_trail(tmp_path):
    from hosts.choices import EventKind
    from hosts.models import HostEvent

    call_command("import_lab", str(write(tmp_path, LAB)))
    events = HostEvent.objects.all()
    created = set(events.filter(kind=EventKind.CREATED).values_list("host__hostname", flat=True))
    assert {"h1.lab", "h2.lab", "h3.lab"} <= created
    assert set(
        events.filter(kind=EventKind.CREATED, worker__isnull=False).values_list(
            "worker__name", flat=True
        )
    ) == {"w1", "w2"}
    assert list(events.filter(kind=EventKind.LOCKED).values_list("host__hostname", "message")) == [
        ("h2.lab", "debugging")
    ]
    assert list(events.filter(kind=EventKind.PAUSED).values_list("worker__name", "message")) == [
        ("w2", "rack move")
    ]
    running = events.filter(kind__in=[EventKind.LEASED, EventKind.STARTED], host__hostname="h1.lab")
    assert sorted(running.values_list("kind", flat=True)) == [EventKind.LEASED, EventKind.STARTED]
    assert set(events.values_list("actor", flat=True)) == {"import_lab"}


def test_reimporting_a_changed_lab_audits_each_change(tmp_path):
    from hosts.choices import EventKind
    from hosts.models import HostEvent

    call_command("import_lab", str(write(tmp_path, LAB)))
    lab = json.loads(json.dumps(LAB))
    lab["hosts"][1].update(locked=False, lock_reason="")
    lab["hosts"][2].update(status="ready")
    lab["workers"][1].update(paused=False)
    call_command("import_lab", str(write(tmp_path, lab)))
    assert not Host.objects.get(hostname="h2.lab").locked
    assert Host.objects.get(hostname="h3.lab").status == "ready"
    assert not Worker.objects.get(name="w2").paused
    assert HostEvent.objects.filter(kind=EventKind.UNLOCKED, host__hostname="h2.lab").exists()
    assert HostEvent.objects.filter(kind=EventKind.RESUMED, worker__name="w2").exists()
    status = HostEvent.objects.get(kind=EventKind.STATUS, host__hostname="h3.lab")
    assert (status.old_status, status.new_status) == ("needs_repair", "ready")


def test_a_label_too_long_for_the_inventory_is_rejected_by_name(tmp_path):
    lab = json.loads(json.dumps(LAB))
    lab["hosts"][2]["labels"] = ["x" * 101]
    with pytest.raises(CommandError) as err:
        call_command("import_lab", str(write(tmp_path, lab)))
    assert "hosts[2] (h3.lab).labels" in str(err.value) and "at most 100" in str(err.value)
    assert not Host.objects.exists() and not Worker.objects.exists()


def test_reimporting_a_new_lock_reason_replaces_it_in_the_trail(tmp_path):
    from hosts.choices import EventKind
    from hosts.models import HostEvent

    call_command("import_lab", str(write(tmp_path, LAB)))
    lab = json.loads(json.dumps(LAB))
    lab["hosts"][1].update(lock_reason="power supply")
    call_command("import_lab", str(write(tmp_path, lab)))
    assert Host.objects.get(hostname="h2.lab").lock_reason == "power supply"
    trail = HostEvent.objects.filter(host__hostname="h2.lab").order_by("id")
    assert list(trail.values_list("kind", "message"))[-3:] == [
        (EventKind.LOCKED, "debugging"),
        (EventKind.UNLOCKED, ""),
        (EventKind.LOCKED, "power supply"),
    ]
