"""Messages shown after an action keep the names in them exactly as they were typed."""

from __future__ import annotations

import pytest

from hosts import services as host_services
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("fragment", ["row", "detail"])
def test_a_refused_host_action_names_the_host_as_typed(sam_client, fragment):
    host = f.host("DUT-7.Lab", ["board:eve"], worker=f.worker("Rack-7"))
    host_services.host_lock(host=host, by="bob", reason="mine")

    locked = sam_client.post(
        "/hosts/DUT-7.Lab/lock/", {"reason": "also mine", "fragment": fragment}, headers=HTMX
    )
    host_services.host_unlock(host=host, by="bob")
    unlocked = sam_client.post("/hosts/DUT-7.Lab/unlock/", {"fragment": fragment}, headers=HTMX)

    assert locked.status_code == 409 and unlocked.status_code == 409
    assert "Host DUT-7.Lab is already locked" in locked.content.decode()
    assert "Host DUT-7.Lab is not locked" in unlocked.content.decode()
    for response in (locked, unlocked):
        assert "dut-7.lab" not in response.content.decode()


@pytest.mark.parametrize("fragment", ["row", "detail"])
def test_a_refused_worker_action_names_the_worker_as_typed(sam_client, fragment):
    worker = f.worker("Rack-7")
    host_services.worker_pause(worker=worker, by="bob", reason="maintenance")

    paused = sam_client.post(
        "/workers/Rack-7/pause/", {"reason": "again", "fragment": fragment}, headers=HTMX
    )
    host_services.worker_resume(worker=worker, by="bob")
    resumed = sam_client.post("/workers/Rack-7/resume/", {"fragment": fragment}, headers=HTMX)

    assert paused.status_code == 409 and resumed.status_code == 409
    assert "Worker Rack-7 is already paused" in paused.content.decode()
    assert "Worker Rack-7 is not paused" in resumed.content.decode()
    for response in (paused, resumed):
        assert "rack-7" not in response.content.decode()
