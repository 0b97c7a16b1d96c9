"""The scheduler settings: one row with the planner's defaults, changed compare-and-set, audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import services
from jobs.choices import HostChoice, SchedulerOrdering
from jobs.models import SchedulerSettings, SchedulerSettingsChange
from jobs.scheduling import planner, snapshot
from schedsite.errors import Conflict, InvalidInput

pytestmark = pytest.mark.django_db


def test_the_defaults_are_the_planners_default_policy():
    assert SchedulerSettings.objects.filter(pk=1).exists()  # made by the migration
    SchedulerSettings.objects.all().delete()
    settings = SchedulerSettings.load()
    assert settings.pk == 1 and settings.version == 0
    assert (settings.ordering, settings.aging_minutes, settings.aging_cap) == ("fifo", 0, 20)
    assert settings.host_choice == "affinity"
    assert settings.default_duration == timedelta(minutes=10)
    assert settings.policy() == planner.Policy()


def test_load_returns_the_one_row_it_created():
    first = SchedulerSettings.load()
    SchedulerSettings.objects.filter(pk=1).update(aging_cap=7)
    assert SchedulerSettings.load().aging_cap == 7
    assert SchedulerSettings.objects.count() == 1 and first.pk == 1


def test_the_choices_are_the_planners():
    assert tuple(SchedulerOrdering.values) == planner.ORDERINGS
    assert tuple(HostChoice.values) == planner.HOST_CHOICES


def test_policy_carries_every_setting_to_the_planner():
    settings = services.update_scheduler_settings(
        "sam",
        ordering="dynsize",
        aging_minutes=15,
        aging_cap=40,
        host_choice="spread",
        default_duration=90,
    )
    assert settings.policy() == planner.Policy(
        ordering="dynsize",
        aging_minutes=15,
        aging_cap=40,
        host_choice="spread",
        default_duration_s=90.0,
    )


@pytest.mark.parametrize(
    "change",
    [
        {"ordering": "random"},
        {"host_choice": "nearest"},
        {"aging_cap": 101},
        {"default_duration": timedelta(0)},
        {"id": 2},
    ],
)
def test_the_database_refuses_values_outside_the_rules(change):
    SchedulerSettings.load()
    with pytest.raises(IntegrityError), transaction.atomic():
        SchedulerSettings.objects.filter(pk=1).update(**change)


def test_a_change_bumps_the_version_and_is_audited_with_old_and_new_values(sam):
    settings = services.update_scheduler_settings(
        sam, expected_version=0, reason="short jobs first", ordering="size", default_duration=300
    )
    assert settings.version == 1 and settings.updated_by == "sam"
    assert SchedulerSettings.load().ordering == "size"
    change = SchedulerSettingsChange.objects.get()
    assert change.actor == "sam" and change.reason == "short jobs first" and change.version == 1
    assert change.changes == {"ordering": ["fifo", "size"], "default_duration": [600, 300]}


def test_setting_the_values_it_already_has_writes_nothing(sam):
    SchedulerSettings.load()
    settings = services.update_scheduler_settings(sam, ordering="fifo", aging_cap=20)
    assert settings.version == 0
    assert not SchedulerSettingsChange.objects.exists()


def test_a_stale_version_is_a_conflict_and_changes_nothing(sam):
    services.update_scheduler_settings(sam, aging_minutes=10)  # now version 1
    with pytest.raises(Conflict, match="changed by someone else"):
        services.update_scheduler_settings(sam, expected_version=0, aging_minutes=30)
    settings = SchedulerSettings.load()
    assert (settings.aging_minutes, settings.version) == (10, 1)
    assert SchedulerSettingsChange.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"ordering": "random"}, "ordering"),
        ({"aging_cap": -1}, "aging_cap"),
        ({"aging_cap": 101}, "aging_cap"),
        ({"aging_minutes": True}, "aging_minutes"),
        ({"host_choice": ""}, "host_choice"),
        ({"default_duration": 0}, "default_duration"),
        ({"default_duration": 8 * 24 * 3600}, "default_duration"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_value_names_its_field_and_changes_nothing(sam, change, field):
    with pytest.raises(InvalidInput) as refused:
        services.update_scheduler_settings(sam, **{"aging_cap": 5, **change})
    assert refused.value.field == field
    settings = SchedulerSettings.load()
    assert settings.version == 0 and settings.aging_cap == 20
    assert not SchedulerSettingsChange.objects.exists()


def test_a_change_asks_for_a_tick_once_committed(sam, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as callbacks:
        services.update_scheduler_settings(sam, host_choice="pack")
    assert len(callbacks) == 1
    with django_capture_on_commit_callbacks() as callbacks:
        services.update_scheduler_settings(sam, host_choice="pack")  # no change: no tick
    assert callbacks == []


@pytest.mark.postgres
def test_a_change_makes_the_next_tick_plan_instead_of_finding_the_lab_unchanged(sam):
    SchedulerSettings.load()
    snapshot.lab_changes(now=timezone.now())  # the log drained, as a tick leaves it
    assert not snapshot.lab_changes(now=timezone.now()).written
    services.update_scheduler_settings(sam, ordering="size")
    assert snapshot.lab_changes(now=timezone.now()).written
