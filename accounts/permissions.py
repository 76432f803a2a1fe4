"""DRF permissions by tenant role: reader < editor < admin."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, permissions
from rest_framework.request import Request

from accounts.access import resolve_tenant_context
from accounts.models import Role


class _TenantRole(permissions.BasePermission):
    required: Role = Role.READER

    def has_permission(self, request: Request, view: Any) -> bool:
        if not hasattr(view, request.method.lower()):
            return True  # DRF answers 405 next; a method the view lacks must not first read the body or resolve a tenant
        context = resolve_tenant_context(request)
        if not context.has_role(self.required):
            raise exceptions.PermissionDenied(
                f"This needs the {self.required} role in tenant {context.tenant.slug}; you are {Role.with_article(context.role)}."
            )
        return True


class IsTenantReader(_TenantRole):
    required = Role.READER


class IsTenantEditor(_TenantRole):
    required = Role.EDITOR


class IsTenantAdmin(_TenantRole):
    required = Role.ADMIN
