"""Pool targets and the balancer that keeps each pool full (docs/health.md#pool-targets).

A swap is a label change of two hosts: a ready spare takes the pool label of a broken member,
and the member takes the spare label. It lives in jobs, not hosts, because whether a job holds
a host is the jobs app's (an active lease, jobs.querysets.ACTIVE_LEASE).

`pool_plan` says what a target would do now (the API's preview); `pools_balance` does it,
each swap under row locks taken in id order and re-checked (compare-and-set), so a spare
leased, locked or retired meanwhile, or a member taken by a test job, is left alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, Q
from django.utils import timezone

from hosts import audit
from hosts.audit import BALANCER, Actor
from hosts.choices import EventKind, HostStatus
from hosts.models import Host, HostEvent, Label, PoolTarget
from hosts.services import labels_validate
from hosts.signals import tick_wanted
from jobs.choices import MAINTENANCE_KINDS
from jobs.models import Lease
from schedsite.errors import Conflict, InvalidInput
from schedsite.field_changes import apply_changes, fields_known, locked_or_conflict

# A member in one of these is out of service and may be swapped out for a spare.
BROKEN = (
    HostStatus.NEEDS_VERIFY,
    HostStatus.VERIFYING,
    HostStatus.NEEDS_REPAIR,
    HostStatus.REPAIRING,
    HostStatus.REPAIR_FAILED,
)
# In service: ready, leased or not (a leased host stays ready).
IN_SERVICE = (HostStatus.READY,)

TARGET_FIELDS = ("pool", "spare", "min_ready", "same")
MIN_READY_MOST = 10_000


# --- the targets ----------------------------------------------------------------------------


# A label prefix: a label's part before its colon ("board" of board:eve).
label_prefix_validator = RegexValidator(
    r"^[A-Za-z0-9][A-Za-z0-9._/=+-]*\Z", "a label prefix, such as board (no colon)"
)
PREFIX_MOST = 50
SAME_MOST = 20  # prefixes in `same`


def _prefixes(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise InvalidInput('same: a list of label prefixes, such as ["board"]', field="same")
    if len(value) > SAME_MOST:
        raise InvalidInput(f"same: at most {SAME_MOST} label prefixes", field="same")
    for prefix in value:
        try:
            label_prefix_validator(prefix)
        except ValidationError as exc:
            raise InvalidInput(
                f"same: {prefix[:40]!r} is not {exc.messages[0]}", field="same"
            ) from exc
        if len(prefix) > PREFIX_MOST:
            raise InvalidInput(f"same: a prefix is at most {PREFIX_MOST} characters", field="same")
    return sorted(set(value))


def pool_target_clean(
    fields: dict[str, object], *, target: PoolTarget | None = None
) -> dict[str, object]:
    """The model's values for the given target fields; InvalidInput or Conflict names a bad one."""
    fields_known(fields, TARGET_FIELDS, "pool target")
    out: dict[str, object] = {}
    for name in ("pool", "spare"):
        if name in fields:
            value = fields[name]
            # Blank is no label: refused here, not by the API's field alone (the page sends it).
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{name}: one label, such as pool:cq", field=name)
            out[name] = labels_validate([value.strip()], field=name)[0]
    if "min_ready" in fields:
        value = fields["min_ready"]
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value <= MIN_READY_MOST
        ):
            raise InvalidInput(
                f"min_ready: a whole number from 0 to {MIN_READY_MOST}", field="min_ready"
            )
        out["min_ready"] = value
    if "same" in fields:
        out["same"] = _prefixes(fields["same"])
    pool = out.get("pool", target.pool if target else None)
    spare = out.get("spare", target.spare if target else None)
    if pool is not None and pool == spare:
        raise InvalidInput("spare: must differ from pool", field="spare")
    if "pool" in out:
        others = PoolTarget.objects.exclude(pk=target.pk) if target else PoolTarget.objects
        if others.filter(pool=out["pool"]).exists():
            raise Conflict(f"pool {out['pool']} has a target already", field="pool")
    return out


def _target_text(name: str, value: object) -> str:
    if name == "same":
        return ", ".join(value) or "(any)"  # type: ignore[arg-type]
    return str(value)


def _target_summary(target: PoolTarget) -> str:
    return "; ".join(f"{f} {_target_text(f, getattr(target, f))}" for f in TARGET_FIELDS[1:])


def _target_audit(kind: str, target: PoolTarget, by: Actor, message: str) -> None:
    # About no one host: the event names the target in `subject`, as health policies do.
    audit.record(kind, actor=by, subject=f"pool target {target.pool}", message=message)


@transaction.atomic
def pool_target_create(*, by: Actor, **fields: object) -> PoolTarget:
    """Add a pool target; the next balancer run fills the pool."""
    missing = [f for f in ("pool", "spare", "min_ready") if f not in fields]
    if missing:
        raise InvalidInput(f"{missing[0]}: required", field=missing[0])
    target = PoolTarget.objects.create(**pool_target_clean(fields))
    _target_audit(EventKind.CREATED, target, by, f"target added: {_target_summary(target)}")
    tick_wanted("pool target added")
    return target


@transaction.atomic
def pool_target_update(*, target: PoolTarget, by: Actor, **fields: object) -> PoolTarget:
    """Change a pool target's labels, size or the prefixes a spare must share."""
    target = locked_or_conflict(PoolTarget, target.pk, "the pool target no longer exists")
    values = pool_target_clean(fields, target=target)
    changes = apply_changes(target, values, _target_text)
    if not changes:
        return target
    target.save(update_fields=[*values, "updated_at"])
    _target_audit(EventKind.UPDATED, target, by, "; ".join(changes))
    tick_wanted("pool target changed")
    return target


@transaction.atomic
def pool_target_delete(*, target: PoolTarget, by: Actor) -> None:
    """Remove a pool target; the hosts keep their labels."""
    target = locked_or_conflict(PoolTarget, target.pk, "the pool target no longer exists")
    _target_audit(EventKind.DELETED, target, by, f"target deleted: {_target_summary(target)}")
    target.delete()


# --- the rule -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Swap:
    member_id: int
    member: str
    member_status: str
    spare_id: int
    spare: str
    reason: str

    def as_dict(self) -> dict[str, object]:
        return {
            "out": self.member,
            "out_status": self.member_status,
            "in": self.spare,
            "reason": self.reason,
        }


@dataclass
class Plan:
    target: PoolTarget
    in_service: int
    swaps: list[Swap] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # broken members a job still holds
    warnings: list[str] = field(default_factory=list)

    @property
    def short(self) -> int:
        return max(self.target.min_ready - self.in_service, 0)

    def as_dict(self) -> dict[str, object]:
        return {
            "pool": self.target.pool,
            "min_ready": self.target.min_ready,
            "in_service": self.in_service,
            "swaps": [s.as_dict() for s in self.swaps],
            "waiting": self.waiting,
            "warnings": self.warnings,
        }


def _held_by_job() -> Exists:
    """An active lease on the host that is not a maintenance job's: a test or a reservation."""
    return Exists(
        Lease.objects.active().filter(host=OuterRef("pk")).exclude(job__kind__in=MAINTENANCE_KINDS)
    )


def _carrying(label: str) -> Q:
    return Q(labels__name=label)


def _free_spares(target: PoolTarget) -> Iterable[Host]:
    """Hosts that may move in: carry the spare label, not the pool's; ready, unlocked, unleased."""
    return (
        Host.objects.filter(_carrying(target.spare), status=HostStatus.READY, locked=False)
        .exclude(_carrying(target.pool))
        .exclude(Exists(Lease.objects.active().filter(host=OuterRef("pk"))))
        .prefetch_related("labels")
        .order_by("id")
    )


def _kin(labels: Iterable[str], prefixes: Iterable[str]) -> tuple[tuple[str, ...], ...]:
    """The host's labels under each prefix of `same`: what a spare must share with a member."""
    names = sorted(labels)
    return tuple(tuple(n for n in names if n.startswith(f"{p}:")) for p in prefixes)


def _kin_text(kin: tuple[tuple[str, ...], ...], prefixes: Iterable[str]) -> str:
    parts = [", ".join(values) or f"no {p}:*" for values, p in zip(kin, prefixes, strict=True)]
    return "; ".join(parts) or "any"


def pool_plan(target: PoolTarget) -> Plan:
    """What the balancer would do for `target` now: its swaps, the members it waits for, and
    the warnings (a pool that cannot be filled). Reads only."""
    members = Host.objects.filter(_carrying(target.pool))
    plan = Plan(target=target, in_service=members.filter(status__in=IN_SERVICE).count())
    if not plan.short:
        return plan
    broken = list(
        members.filter(status__in=BROKEN)
        .annotate(held=_held_by_job())
        .prefetch_related("labels")
        .order_by("id")
    )
    spares = list(_free_spares(target))
    prefixes = list(target.same)
    by_kin: dict[tuple, list[Host]] = {}
    for spare in spares:
        by_kin.setdefault(_kin(spare.label_names, prefixes), []).append(spare)
    wanted = plan.short
    for member in broken:
        if wanted == 0:
            break
        if member.held:
            plan.waiting.append(f"{member.hostname} ({member.status}) waits: a job holds it")
            continue
        kin = _kin(member.label_names, prefixes)
        candidates = by_kin.get(kin)
        if not candidates:
            plan.warnings.append(
                f"no ready spare {target.spare} with {_kin_text(kin, prefixes)} "
                f"to replace {member.hostname} ({member.status})"
            )
            continue
        spare = candidates.pop(0)
        plan.swaps.append(
            Swap(
                member_id=member.pk,
                member=member.hostname,
                member_status=member.status,
                spare_id=spare.pk,
                spare=spare.hostname,
                reason=(
                    f"{target.pool} had {plan.in_service} of {target.min_ready} hosts in "
                    f"service; {member.hostname} is {member.status}"
                ),
            )
        )
        wanted -= 1
    if wanted > len(plan.waiting):
        unmet = wanted - len(plan.waiting)
        plan.warnings.append(
            f"{target.pool} stays {unmet} short of {target.min_ready} in service: "
            f"{plan.in_service} in service, no spare to swap in"
            if broken
            else f"{target.pool} has {plan.in_service} of {target.min_ready} in service and "
            "no broken member to swap out"
        )
    return plan


# How a swap's two events begin and end: pool_swaps finds a pool's swaps by them.
def _swapped_out(pool: str) -> str:
    return f"labels {pool} → "


def _swapped_in(pool: str) -> str:
    return f" → {pool}: swapped in"


@transaction.atomic
def _swap(target: PoolTarget, swap: Swap) -> bool:
    """Swap one member and spare under row locks (hosts in id order); False if either changed."""
    ids = sorted((swap.member_id, swap.spare_id))
    locked = {h.pk: h for h in Host.objects.select_for_update().filter(pk__in=ids).order_by("id")}
    if len(locked) != 2:
        return False
    # Re-read under the locks: the compare of the compare-and-set.
    spare_ok = _free_spares(target).filter(pk=swap.spare_id).exists()
    member_ok = (
        Host.objects.filter(_carrying(target.pool), pk=swap.member_id, status__in=BROKEN)
        .exclude(_held_by_job())
        .exists()
    )
    if not (spare_ok and member_ok):
        return False
    pool, spare = (
        Label.objects.get_or_create(name=name)[0] for name in (target.pool, target.spare)
    )
    member, incoming = locked[swap.member_id], locked[swap.spare_id]
    member.labels.remove(pool)
    member.labels.add(spare)
    incoming.labels.remove(spare)
    incoming.labels.add(pool)
    Host.objects.filter(pk__in=ids).update(updated_at=timezone.now())
    audit.record_many(
        [
            audit.entry(
                EventKind.UPDATED,
                actor=BALANCER,
                host=member,
                message=f"{_swapped_out(target.pool)}{target.spare}: swapped out for "
                f"{incoming.hostname} ({swap.reason})",
            ),
            audit.entry(
                EventKind.UPDATED,
                actor=BALANCER,
                host=incoming,
                message=f"labels {target.spare}{_swapped_in(target.pool)} for "
                f"{member.hostname} ({swap.reason})",
            ),
        ]
    )
    tick_wanted("pool balanced")
    return True


@dataclass
class BalanceResult:
    swapped: list[Swap] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"swapped": [s.as_dict() for s in self.swapped], "warnings": self.warnings}


def pools_balance(targets: Iterable[PoolTarget] | None = None) -> BalanceResult:
    """Fill every pool short of its target with swaps; each swap commits on its own."""
    result = BalanceResult()
    for target in PoolTarget.objects.all() if targets is None else targets:
        plan = pool_plan(target)
        result.warnings += plan.warnings
        result.swapped += [swap for swap in plan.swaps if _swap(target, swap)]
    return result


# --- what the pool pages show ----------------------------------------------------------------


@dataclass(frozen=True)
class PoolRow:
    target: PoolTarget
    members: int
    plan: Plan


def pool_overview() -> list[PoolRow]:
    """Every target with its pool's size and what the balancer would do now. Reads only."""
    targets = list(PoolTarget.objects.all())
    sizes = dict(
        Label.objects.filter(name__in=[t.pool for t in targets])
        .annotate(n=Count("hosts"))
        .values_list("name", "n")
    )
    return [PoolRow(target=t, members=sizes.get(t.pool, 0), plan=pool_plan(t)) for t in targets]


def pool_members(target: PoolTarget) -> list[Host]:
    """The hosts carrying the pool's label, each with `held` (a test job or reservation holds
    it, so the balancer waits for it)."""
    return list(
        Host.objects.filter(_carrying(target.pool))
        .select_related("worker")
        .annotate(held=_held_by_job())
        .order_by("hostname")
    )


def pool_swaps(target: PoolTarget, *, limit: int = 20) -> list[HostEvent]:
    """The balancer's last swaps into or out of the pool, newest first (its host events)."""
    return list(
        HostEvent.objects.filter(actor=BALANCER)
        .filter(
            Q(message__startswith=_swapped_out(target.pool))
            | Q(message__contains=_swapped_in(target.pool))
        )
        .select_related("host")[:limit]
    )
