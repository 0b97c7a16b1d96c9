"""One rule for "lab staff": `roles.is_staff` in Python and `roles.staff_q` in SQL agree."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from notifications.models import Subscription
from schedsite import roles

pytestmark = pytest.mark.django_db

# (is_staff flag, groups): every way an account can be, or not be, lab staff.
ACCOUNTS = {
    "plain": (False, []),
    "flag": (True, []),
    "group": (False, [roles.STAFF_GROUP]),
    "both": (True, [roles.STAFF_GROUP]),
    "runner": (False, [roles.RUNNER_GROUP]),
    "other-group": (False, ["testers"]),
    "group-and-runner": (False, [roles.STAFF_GROUP, roles.RUNNER_GROUP]),
}


@pytest.fixture
def accounts(django_user_model):  # noqa: ANN001, ANN201
    made = {}
    for name, (flag, groups) in ACCOUNTS.items():
        user = django_user_model.objects.create_user(name, is_staff=flag)
        for group in groups:
            user.groups.add(Group.objects.get_or_create(name=group)[0])
        made[name] = user
    return made


def test_the_sql_rule_picks_exactly_the_accounts_the_python_rule_calls_staff(
    accounts, django_user_model
):
    by_python = {name for name, user in accounts.items() if roles.is_staff(user)}
    by_sql = set(
        django_user_model.objects.filter(roles.staff_q())
        .distinct()
        .values_list("username", flat=True)
    )
    assert by_python == by_sql == {"flag", "group", "both", "group-and-runner"}


def test_the_sql_rule_through_a_relation_picks_the_same_accounts(accounts):
    for user in accounts.values():
        Subscription.objects.create(user=user)
    by_sql = set(
        Subscription.objects.filter(roles.staff_q("user__"))
        .distinct()
        .values_list("user__username", flat=True)
    )
    assert by_sql == {name for name, user in accounts.items() if roles.is_staff(user)}
