"""Shared fixtures: named actors, the database vendor, and loud PostgreSQL-only skips."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("django"):
        return  # the planner's tests run without Django (-p no:django)
    from django.conf import settings

    if settings.DATABASES["default"]["ENGINE"].endswith("postgresql"):
        return
    skip = pytest.mark.skip(reason="NEEDS POSTGRESQL: running on SQLite (set DATABASE_URL)")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _fast_password_hashing(request: pytest.FixtureRequest) -> None:
    """Hash test passwords with MD5: the real hasher costs ~0.1 s per user, on purpose."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    settings = request.getfixturevalue("settings")
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_kept_provision_medians(request: pytest.FixtureRequest) -> None:
    """Each test reads the provisioning medians afresh: a process keeps them for minutes."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from jobs.scheduling import provision_cost

    provision_cost.forget()


@pytest.fixture
def sam(django_user_model):  # noqa: ANN001, ANN201
    """Sam, lab staff."""
    user = django_user_model.objects.create_user("sam", password="sam-pass", is_staff=True)
    return user


@pytest.fixture
def alice(django_user_model):  # noqa: ANN001, ANN201
    """Alice, a tester."""
    return django_user_model.objects.create_user("alice", password="alice-pass")


@pytest.fixture
def bob(django_user_model):  # noqa: ANN001, ANN201
    """Bob, another tester."""
    return django_user_model.objects.create_user("bob", password="bob-pass")


@pytest.fixture
def runner_user(django_user_model):  # noqa: ANN001, ANN201
    """runner-1, the runner of worker w1."""
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("runner-1", password="runner-pass")
    group, _ = Group.objects.get_or_create(name="runners")
    user.groups.add(group)
    return user


@pytest.fixture
def is_postgres() -> bool:
    from django.db import connection

    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def _no_remembered_tokens(request: pytest.FixtureRequest) -> None:
    """Each test reads its runners' tokens afresh: a web process keeps them a few seconds."""
    if not request.config.pluginmanager.hasplugin("django"):
        return
    from schedsite.api_authentication import forget_tokens

    forget_tokens()
