"""Editing a host as it was seen, and importing or exporting many hosts (jobs.host_inventory).

What each writes to the audit trail (old and new values), that a stale edit or a stale preview
is refused, and that a refused import changes nothing at all.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from hosts import inventory_files as files
from hosts import services
from hosts.models import Host, HostEvent, Worker
from jobs import host_inventory as inventory
from jobs import services as job_services
from jobs.models import Lease
from schedsite.errors import Conflict, InvalidInput
from tests import factories as f
from tests.hosts.test_inventory_services import rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab():  # noqa: ANN201
    w1, w2 = f.worker("w1"), f.worker("w2")
    h1 = f.host("h1.lab", ["board:eve", "pool:cq"], worker=w1, build="R1")
    h2 = f.host("h2.lab", ["board:kevin"], worker=w2)
    return w1, w2, h1, h2


def edit(host: Host, **fields: object) -> Host:
    values = {**inventory.inventory_values(host), **fields}
    worker = Worker.objects.get(name=values["worker"]) if values["worker"] else None
    return inventory.host_edit(
        host=host,
        by="sam",
        version=fields.get("version", inventory.inventory_version(host)),  # type: ignore[arg-type]
        labels=values["labels"],  # type: ignore[arg-type]
        worker=worker,
        current_build=values["current_build"],  # type: ignore[arg-type]
    )


# --- edit -----------------------------------------------------------------------------------


def test_an_edit_is_audited_with_the_old_and_new_values(lab):
    _, _, h1, _ = lab
    edit(h1, labels=["board:eve", "wifi"], worker="w2", current_build="R2")
    h1.refresh_from_db()
    assert (h1.label_names, h1.worker.name, h1.current_build) == (["board:eve", "wifi"], "w2", "R2")
    event = HostEvent.objects.filter(host=h1, kind="updated").get()
    assert event.actor == "sam"
    assert "labels board:eve, pool:cq → board:eve, wifi" in event.message
    assert "worker w1 → w2" in event.message and "build R1 → R2" in event.message


def test_an_edit_on_a_stale_form_is_refused_and_changes_nothing(lab):
    _, _, h1, _ = lab
    seen = inventory.inventory_version(h1)
    edit(h1, labels=["board:eve"])  # someone else saves first
    before = rows()
    with pytest.raises(Conflict, match="changed by someone else"):
        edit(h1, labels=["board:eve", "pool:bvt"], version=seen)
    assert rows() == before


def test_a_status_change_does_not_make_an_open_edit_form_stale(lab):
    _, _, h1, _ = lab
    seen = inventory.inventory_version(h1)
    services.host_lock(host=h1, by="sam", reason="debugging")  # not labels, worker or build
    edit(h1, current_build="R3", version=seen)
    h1.refresh_from_db()
    assert h1.current_build == "R3"


def test_a_leased_host_can_be_relabelled_and_keeps_its_lease(lab):
    _, _, h1, _ = lab
    lease = job_services.lease_reserve(
        host=h1, holder="alice", duration=timedelta(minutes=30), reason="debugging"
    )
    edit(h1, labels=["board:eve"])
    assert Lease.objects.active().filter(pk=lease.pk).exists()
    h1.refresh_from_db()
    assert h1.label_names == ["board:eve"]


def test_a_bad_label_is_refused_naming_the_field(lab):
    _, _, h1, _ = lab
    before = rows()
    with pytest.raises(InvalidInput) as err:
        edit(h1, labels=["board eve,x"])
    assert err.value.field == "labels"
    assert rows() == before


# --- import ---------------------------------------------------------------------------------

CSV = """hostname,worker,labels,build
h1.lab,w1,board:eve;pool:cq,R1
h2.lab,w1,board:kevin,
h3.lab,w2,board:eve wifi,R9
"""


def plan_of(text: str, fmt: str = "csv") -> inventory.ImportPlan:
    entries, wheres, notes = files.read(text, fmt)
    plan = inventory.import_plan(entries, wheres)
    plan.notes = notes
    return plan


def test_the_preview_says_new_changed_and_unchanged_and_saves_nothing(lab):
    before = rows()
    plan = plan_of(CSV)
    assert [(r.hostname, r.action) for r in plan.rows] == [
        ("h1.lab", "unchanged"),
        ("h2.lab", "changed"),
        ("h3.lab", "new"),
    ]
    assert plan.rows[1].changes == ["worker w2 → w1"]
    assert plan.rows[2].labels == ["board:eve", "wifi"]
    assert rows() == before


def test_each_bad_row_says_what_is_wrong_with_it(lab):
    plan = plan_of(
        "hostname,worker,labels,build\n"
        "bad name,w1,,\n"
        "h5.lab,nope,,\n"
        "h6.lab,w1,board eve;ok;a,b,\n"
        "h1.lab,w1,,\n"
        "h1.lab,w1,,\n"
    )
    errors = {r.where: (r.hostname, r.errors) for r in plan.rows if r.action == "error"}
    assert "Use letters" in errors["line 2"][1][0]
    assert errors["line 3"][1] == ["worker: unknown worker 'nope'"]
    assert errors["line 4"][0] == ""  # one cell too many: the row is not guessed at
    assert errors["line 6"][1] == ["hostname: duplicate hostname h1.lab"]
    assert plan.rows[3].action == "changed"  # line 5 itself is fine


def test_yaml_reads_the_lab_file_hosts_list_and_notes_what_it_ignores(lab):
    plan = plan_of(
        "workers: [{name: w1}]\n"
        "hosts:\n"
        "- {hostname: h1.lab, worker: w1, labels: [board:eve, pool:cq], current_build: R1,"
        " status: ready, locked: false}\n"
        "- {hostname: h4.lab, labels: board:eve}\n",
        "yaml",
    )
    assert [r.action for r in plan.rows] == ["unchanged", "error"]
    assert plan.rows[1].errors == ["labels: must be a list of strings"]
    assert any("workers" in n for n in plan.notes)
    assert any("locked, status" in n for n in plan.notes)


def test_apply_imports_every_row_and_audits_each_host(lab):
    plan = plan_of(CSV)
    entries = [r.entry() for r in plan.rows]
    inventory.hosts_import(entries=entries, by="sam", digest=plan.digest())
    h2, h3 = Host.objects.get(hostname="h2.lab"), Host.objects.get(hostname="h3.lab")
    assert h2.worker.name == "w1" and h3.label_names == ["board:eve", "wifi"]
    assert HostEvent.objects.get(host=h2, kind="updated").message == "worker w2 → w1"
    assert HostEvent.objects.filter(host=h3, kind="created", actor="sam").exists()
    assert not HostEvent.objects.filter(subject="h1.lab", kind="updated").exists()


def test_apply_refuses_a_preview_the_inventory_moved_away_from(lab):
    _, _, h1, _ = lab
    plan = plan_of(CSV)
    edit(h1, labels=["board:eve"])  # between the preview and the apply
    before = rows()
    with pytest.raises(Conflict, match="changed since the preview"):
        inventory.hosts_import(
            entries=[r.entry() for r in plan.rows], by="sam", digest=plan.digest()
        )
    assert rows() == before


def test_apply_is_all_or_nothing(lab, monkeypatch):
    plan = plan_of(CSV)
    real = inventory.services.host_create

    def fails(**kwargs: object) -> Host:
        real(**kwargs)
        raise Conflict("the database said no")

    monkeypatch.setattr(inventory.services, "host_create", fails)
    before = rows()
    with pytest.raises(Conflict):
        inventory.hosts_import(
            entries=[r.entry() for r in plan.rows], by="sam", digest=plan.digest()
        )
    assert rows() == before


# --- export ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "yaml"])
def test_an_export_imports_back_unchanged(lab, fmt):
    f.host("h9.lab", [], build="build, with a comma")
    text = (files.write_csv if fmt == "csv" else files.write_yaml)(Host.objects.all())
    plan = plan_of(text, fmt)
    assert [r.action for r in plan.rows] == ["unchanged"] * 3
    assert not plan.to_apply


def test_csv_export_lists_labels_separated_by_spaces(lab):
    text = files.write_csv(Host.objects.filter(hostname="h1.lab"))
    assert text == "hostname,worker,labels,build\nh1.lab,w1,board:eve pool:cq,R1\n"


def test_a_build_a_spreadsheet_would_run_as_a_formula_is_exported_as_text(lab):
    f.host("h9.lab", [], build='=HYPERLINK("http://evil")')
    text = files.write_csv(Host.objects.filter(hostname="h9.lab"))
    assert text.splitlines()[1] == 'h9.lab,,,"\'=HYPERLINK(""http://evil"")"'
    plan = plan_of(text)
    assert [r.action for r in plan.rows] == ["unchanged"]  # the import takes the quote off


def test_a_column_the_file_leaves_out_keeps_the_hosts_value(lab):
    plan = plan_of("hostname,labels\nh1.lab,board:eve\nh5.lab,wifi\n")
    assert [(r.action, r.changes) for r in plan.rows] == [
        ("changed", ["labels board:eve, pool:cq → board:eve"]),  # worker and build kept
        ("new", []),
    ]
    assert (plan.rows[0].worker, plan.rows[0].current_build) == ("w1", "R1")
    assert plan.rows[1].worker is None


def test_a_yaml_entry_that_is_not_a_mapping_is_its_rows_error(lab):
    plan = plan_of("hosts:\n- h1.lab\n- {hostname: [h2.lab]}\n", "yaml")
    assert plan.rows[0].errors == ["must be a mapping"]
    assert plan.rows[1].action == "error"
