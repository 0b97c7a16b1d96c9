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


class RolePermissionsMixin:
    """Every action needs an authenticated user, plus the permissions listed for the action."""

    # action name -> extra permission classes; actions not listed need only authentication.
    action_permissions: dict[str, tuple[type[BasePermission], ...]] = {}

    def get_permissions(self) -> list[BasePermission]:
        extra = self.action_permissions.get(getattr(self, "action", None) or "", ())
        return [IsAuthenticated(), *(cls() for cls in extra)]
