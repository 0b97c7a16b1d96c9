"""Fixtures of the end-to-end tests: child processes stopped at teardown, API clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import DEFAULT_DB_ALIAS, connections

from tests.e2e.support import Api, Children, token_for


@pytest.fixture
def children(tmp_path: Path) -> Iterator[Children]:
    """The test's child processes; each is stopped, by its own id, when the test ends."""
    started = Children(tmp_path)
    yield started
    started.stop()


@pytest.fixture
def api_as(live_server) -> Callable[[object], Api]:  # noqa: ANN001
    """A script's API client for a user, on the live server."""
    return lambda user: Api(f"{live_server.url}/api", token_for(user))


@pytest.fixture(autouse=True)
def _live_server_closes_its_connections() -> Iterator[None]:
    """Each live-server request thread closes its database connection when the request ends.

    With a CONN_MAX_AGE the connection of a finished request thread stays open, unreachable,
    and keeps the test database from being dropped at the end of the session.
    """
    database = connections.settings[DEFAULT_DB_ALIAS]
    saved = database["CONN_MAX_AGE"]
    database["CONN_MAX_AGE"] = 0
    yield
    database["CONN_MAX_AGE"] = saved
