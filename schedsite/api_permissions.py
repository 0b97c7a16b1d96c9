"""DRF permissions for the roles (docs/security.md#roles); the rules live in schedsite.roles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rest_framework.permissions import BasePermission, IsAuthenticated

from schedsite import roles

if TYPE_CHECKING:  # rest_framework.views reads the throttle classes, which import this module
    from rest_framework.request import Request
    from rest_framework.views import APIView


class IsLabStaff(BasePermission):
    """Lab staff only: host and worker writes, locks, reservations, releases, the tick."""

    message = "Only lab staff may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return roles.is_staff(request.user)


class IsStaffOrRunner(BasePermission):
    """The runner protocol: lab staff, or a runner (for its own worker, checked per object)."""

    message = "Only a runner (for its own worker's leases) or lab staff may do this."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return roles.is_staff(request.user) or roles.is_runner(request.user)


class RunsObjectWorker(BasePermission):
    """Staff, or the runner of the worker the object belongs to (`view.runner_id_of(obj)`)."""

    message = "This belongs to a worker you are not the runner of."

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return roles.runner_may_work(request.user, view.runner_id_of(obj))  # type: ignore[attr-defined]


class CanManageOwned(BasePermission):
    """Staff manage anything; a tester manages what they own."""

    message = "You may only do this to your own suites and jobs."

    def has_object_permission(self, request: Request, view: APIView, obj: Any) -> bool:
        return roles.can_manage(request.user, obj.owner_id)


# The DRF permissions that enforce each kind of rule of the table (schedsite.roles.PERMISSIONS).
GATES: dict[roles.Who, tuple[type[BasePermission], ...]] = {
    roles.Who.OWNER: (CanManageOwned,),
    roles.Who.RUNNER: (IsStaffOrRunner,),
    roles.Who.WORKER_RUNNER: (IsStaffOrRunner, RunsObjectWorker),
    roles.Who.STAFF: (IsLabStaff,),
}


def action_rule(view: APIView) -> roles.Rule | None:
    """The table's rule for the view's action; None when any signed-in user may take it."""
    resource = getattr(view, "permission_resource", "")
    action = getattr(view, "action", None) or ""
    return roles.PERMISSIONS.get(f"{resource}.{action}") if resource else None


class RolePermissionsMixin:
    """Every action needs an authenticated user, plus what the table says of the action."""

    # The resource's prefix in schedsite.roles.PERMISSIONS ("host": "host.lock", …); a view
    # that checks an owner itself (suites: the message names the action) leaves it empty.
    permission_resource: str = ""

    def get_permissions(self) -> list[BasePermission]:
        rule = action_rule(self)  # type: ignore[arg-type]
        extra = GATES[rule.who] if rule else ()
        return [IsAuthenticated(), *(cls() for cls in extra)]
