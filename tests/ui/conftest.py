"""Fixtures for the web UI tests: a small lab, Alice's reservation, clients signed in."""

from __future__ import annotations

from datetime import datetime, timedelta
from types import SimpleNamespace

import pytest

from jobs import services
from jobs.models import Lease
from tests import factories as f

HTMX = {"HX-Request": "true"}


@pytest.fixture
def lab(db):  # noqa: ANN001, ANN201
    """Two online workers and three hosts with board and pool labels."""
    w1 = f.worker("w1")
    w2 = f.worker("w2")
    return SimpleNamespace(
        w1=w1,
        w2=w2,
        h1=f.host("h1.lab", ["board:eve", "pool:cq"], worker=w1),
        h2=f.host("h2.lab", ["board:eve", "pool:bvt"], worker=w1),
        h3=f.host("h3.lab", ["board:kevin", "pool:cq"], worker=w2),
    )


@pytest.fixture
def alices(lab, alice) -> Lease:  # noqa: ANN001
    """h1.lab reserved by Alice, a tester, for an hour."""
    return services.lease_reserve(
        host=lab.h1, holder=alice, duration=timedelta(hours=1), reason="flashing firmware"
    )


def expiry(lease: Lease) -> datetime | None:
    """When the lease ends, as the database has it now."""
    return Lease.objects.get(pk=lease.pk).expires_at


sam_client = f.client_fixture("sam", f.signed_in)
alice_client = f.client_fixture("alice", f.signed_in)
bob_client = f.client_fixture("bob", f.signed_in)
