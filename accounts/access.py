"""Tenant resolution and the one access helper for objects by id.

The tenant is resolved once per request, right after authentication, into a
``TenantContext``; everything downstream takes that context (or its tenant)
and never looks at the request again. Objects of another tenant are 404,
never 403: a caller cannot even learn that they exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models
from rest_framework import exceptions
from rest_framework.request import Request

from accounts.models import TENANT_SLUG_RE, ApiToken, Role, Tenant
from accounts.selectors import membership_role, tenant_get

M = TypeVar("M", bound=models.Model)

_SLUG = re.compile(TENANT_SLUG_RE)


@dataclass(frozen=True)
class TenantContext:
    """Who is calling, in which tenant, with which role."""

    tenant: Tenant
    role: Role
    user: AbstractBaseUser | AnonymousUser
    token: ApiToken | None = None

    @property
    def principal(self) -> str:
        """A stable name for the caller, used to key per-caller state such as chat sessions."""
        if self.user.is_authenticated:
            return f"user:{self.user.pk}"
        return "anonymous"

    def has_role(self, role: Role | str) -> bool:
        return Role.rank(self.role) >= Role.rank(role)


class TenantNotFound(exceptions.NotFound):
    default_detail = "Tenant not found."
    default_code = "tenant_not_found"


def requested_tenant(request: Request) -> str | None:
    """The ``tenant`` the request names (JSON body or query string), validated; None if omitted."""
    value: Any = request.query_params.get("tenant")
    if value is None:
        data = request.data  # parses the body: malformed JSON surfaces here as a 400
        if hasattr(data, "get"):
            value = data.get("tenant")
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _SLUG.match(value):
        raise exceptions.ValidationError({"tenant": ["Must be a tenant slug: letters, digits, '-' or '_', at most 64 characters."]})
    return value


def resolve_tenant_context(request: Request) -> TenantContext:
    """Resolve (and cache on the request) the caller's tenant and role.

    Rules: with a token, an omitted tenant is the token's own and any other
    tenant is 404. With a session, an omitted tenant is ``DEFAULT``; a tenant
    the user does not belong to is 404. With ``QUARRY_AUTH_MODE=none``, an
    anonymous caller is a reader of ``DEFAULT``.
    """
    cached = getattr(request, "_tenant_context", None)
    if cached is not None:
        return cached
    user = request.user
    token = request.auth if isinstance(request.auth, ApiToken) else None
    if token is None and not user.is_authenticated and settings.QUARRY_AUTH_MODE != "none":
        raise exceptions.NotAuthenticated()  # before reading the body: 401 beats 400
    slug = requested_tenant(request)

    if token is not None:
        if slug is not None and slug != token.tenant.slug:
            raise TenantNotFound()
        held = membership_role(user=user, tenant=token.tenant)
        if held is None:
            raise exceptions.AuthenticationFailed("The API token's owner is no longer a member of its tenant.")
        context = TenantContext(tenant=token.tenant, role=Role.lowest(token.role, held), user=user, token=token)
    elif user.is_authenticated:
        tenant = tenant_get(slug=slug or settings.QUARRY_DEFAULT_TENANT)
        role = membership_role(user=user, tenant=tenant) if tenant is not None else None
        if tenant is None or role is None:
            raise TenantNotFound()
        context = TenantContext(tenant=tenant, role=role, user=user)
    elif settings.QUARRY_AUTH_MODE == "none":
        tenant = tenant_get(slug=settings.QUARRY_DEFAULT_TENANT)
        if tenant is None or (slug is not None and slug != tenant.slug):
            raise TenantNotFound()
        context = TenantContext(tenant=tenant, role=Role.READER, user=user)
    else:
        raise exceptions.NotAuthenticated()
    request._tenant_context = context  # type: ignore[attr-defined]
    return context


def get_for_tenant(queryset: models.QuerySet[M], *, tenant: Tenant, **lookup: Any) -> M:
    """The one way to load an object by id for a caller: another tenant's object is 404."""
    obj = queryset.filter(tenant=tenant, **lookup).first()
    if obj is None:
        raise exceptions.NotFound()
    return obj
