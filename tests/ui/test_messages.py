"""Messages shown after an action keep the names in them exactly as they were typed."""

from __future__ import annotations

import pytest

from hosts import services as host_services
from tests import factories as f
from tests.ui.conftest import HTMX

pytestmark = pytest.mark.django_db


# A host and a worker with capitals in their names: how to make one, its hold and release
# services, its page, the two actions, and how a refusal names it.
HOLDS = [
    pytest.param(
        lambda: f.host("DUT-7.Lab", ["board:eve"], worker=f.worker("Rack-7")),
        (host_services.host_lock, host_services.host_unlock),
        "/hosts/DUT-7.Lab/",
        ("lock", "unlock", "locked"),
        "Host DUT-7.Lab",
        id="host",
    ),
    pytest.param(
        lambda: f.worker("Rack-7"),
        (host_services.worker_pause, host_services.worker_resume),
        "/workers/Rack-7/",
        ("pause", "resume", "paused"),
        "Worker Rack-7",
        id="worker",
    ),
]


@pytest.mark.parametrize("fragment", ["row", "detail"])
@pytest.mark.parametrize(("make", "services", "url", "words", "named"), HOLDS)
def test_a_refused_hold_names_the_host_or_worker_as_typed(
    sam_client, fragment, make, services, url, words, named
):
    obj = make()
    hold, release = services
    held, released, state = words
    subject = {obj._meta.model_name: obj}
    hold(**subject, by="bob", reason="mine")

    again = sam_client.post(
        f"{url}{held}/", {"reason": "also mine", "fragment": fragment}, headers=HTMX
    )
    release(**subject, by="bob")
    not_held = sam_client.post(f"{url}{released}/", {"fragment": fragment}, headers=HTMX)

    assert again.status_code == 409 and not_held.status_code == 409
    assert f"{named} is already {state}" in again.content.decode()
    assert f"{named} is not {state}" in not_held.content.decode()
    typed = named.split()[1]
    for response in (again, not_held):
        assert typed.lower() not in response.content.decode()
