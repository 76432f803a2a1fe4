"""THE tenant resolution, for every way in, and the one access helper for objects by id.

The tenant is resolved once per request (or message, or command), right after
authentication, into a ``TenantContext``; everything downstream takes that context
(or its tenant) and never looks at the request again. Objects of another tenant are
404, never 403: a caller cannot even learn that they exist.

- API (DRF views): ``resolve_tenant_context(request)``; MCP over HTTP: ``token_tenant_context``.
- Pages: ``page_tenant(request)``; WebSocket messages: ``tenant_context_for_user``.
- Admin: ``editable_tenants(request)``.
- Management commands (``manage.py mcp`` included): ``cli_context``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import models
from django.http import Http404, HttpRequest
from rest_framework import exceptions
from rest_framework.request import Request

from accounts.models import TENANT_SLUG_RE, ApiToken, Membership, Role, Tenant
from accounts.selectors import group_ids_for, membership_role, tenant_get, tenants_for_user

M = TypeVar("M", bound=models.Model)

_SLUG = re.compile(TENANT_SLUG_RE)


@dataclass(frozen=True)
class TenantContext:
    """Who is calling, in which tenant, with which role."""

    tenant: Tenant
    role: Role
    user: AbstractBaseUser | AnonymousUser
    token: ApiToken | None = None
    # A principal that is no user: the shell's "cli" (``cli_context``).
    acting_as: str | None = None

    @property
    def principal(self) -> str:
        """A stable name for the caller, used to key per-caller state such as chat sessions."""
        if self.acting_as:
            return self.acting_as
        if self.user.is_authenticated:
            return f"user:{self.user.pk}"
        return "anonymous"

    @property
    def actor(self) -> str:
        """How the audit trail names the caller: the user, and the token when one was used."""
        name = self.user.get_username() if self.user.is_authenticated else "anonymous"
        return f"{name} (token {self.token.prefix})" if self.token else name

    def has_role(self, role: Role | str) -> bool:
        return Role.rank(self.role) >= Role.rank(role)

    @property
    def reads_everything(self) -> bool:
        """Whether the caller reads every document of the tenant, restricted ones included: its admins
        (a token's role counts: a reader token of an admin reads as a member) and the shell's ``cli``."""
        return self.acting_as == CLI_PRINCIPAL or self.role == Role.ADMIN

    @property
    def user_id(self) -> int | None:
        """The caller's user id (the principal ``u:<id>`` of access lists); None for anonymous callers."""
        return int(self.user.pk) if self.user.is_authenticated else None

    @cached_property
    def group_ids(self) -> tuple[int, ...]:
        """The tenant's groups the caller belongs to: read once per context, so once per request (a
        membership change counts from the next one); an API token acts as its owner."""
        return group_ids_for(user=self.user, tenant=self.tenant)


class TenantNotFound(exceptions.NotFound):
    default_detail = "Tenant not found."
    default_code = "tenant_not_found"


def requested_tenant(request: Request) -> str | None:
    """The ``tenant`` the request names (JSON body or query string), validated; None if omitted."""
    value: Any = request.query_params.get("tenant")
    named = value is not None
    if value is None:
        data = request.data  # parses the body: malformed JSON surfaces here as a 400
        if hasattr(data, "get"):
            value = data.get("tenant")
            named = "tenant" in data
    if value is None and named:
        raise exceptions.ValidationError({"tenant": ["Must be a tenant slug, not null: omit it for the default tenant."]})
    if value is None:
        return None
    if value == "":
        raise exceptions.ValidationError({"tenant": ["Must not be empty: omit it for the default tenant."]})
    if not isinstance(value, str) or not _SLUG.fullmatch(value):
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
        context = token_tenant_context(token=token, slug=slug)
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


def token_tenant_context(*, token: ApiToken, slug: str | None) -> TenantContext:
    """The context of an authenticated API ``token`` asking for tenant ``slug`` (None: its own).

    The API's rule, shared with MCP: a token reads its own tenant only (any other is
    ``TenantNotFound``, 404), with the lower of its role and its owner's current one; an
    owner who left the tenant makes the token fail authentication.
    """
    if slug is not None and slug != token.tenant.slug:
        raise TenantNotFound()
    held = membership_role(user=token.owner, tenant=token.tenant)
    if held is None:
        raise exceptions.AuthenticationFailed("The API token's owner is no longer a member of its tenant.")
    return TenantContext(tenant=token.tenant, role=Role.lowest(token.role, held), user=token.owner, token=token)


def get_for_tenant(queryset: models.QuerySet[M], *, tenant: Tenant, **lookup: Any) -> M:
    """The one way to load an object by id for a caller: another tenant's object is 404."""
    obj = queryset.filter(tenant=tenant, **lookup).first()
    if obj is None:
        raise exceptions.NotFound()
    return obj


# --- Signed-in browser users: pages and the WebSocket ---------------------------------------------

# The tenant a user last switched to, kept in their session.
SESSION_TENANT_KEY = "quarry_tenant"


def tenant_context_for_user(*, user: AbstractBaseUser | AnonymousUser, slug: str | None) -> TenantContext | None:
    """The signed-in ``user``'s context in tenant ``slug`` (``DEFAULT`` when None), or None.

    The HTTP API's rule for session users: None when the user is anonymous or inactive,
    the slug is malformed or unknown, or the user holds no role there (superusers are
    admins everywhere). Transports turn None into a 404 or a ``tenant_not_found`` event.
    """
    if not user.is_authenticated:
        return None
    slug = slug or settings.QUARRY_DEFAULT_TENANT
    if not isinstance(slug, str) or not _SLUG.fullmatch(slug):
        return None
    tenant = tenant_get(slug=slug)
    role = membership_role(user=user, tenant=tenant) if tenant is not None else None
    if tenant is None or role is None or Role.rank(role) < Role.rank(Role.READER):
        return None
    return TenantContext(tenant=tenant, role=role, user=user)


class NoTenant(Exception):
    """The user belongs to no tenant: there is nothing they may read."""


def page_tenant(request: HttpRequest) -> TenantContext:
    """The tenant a page works in.

    ``tenant`` in the query string or form wins (404 unless the user is a
    member: links carry it, so a page keeps its tenant when another tab switches). Otherwise
    the tenant the user last switched to, then ``DEFAULT`` (the API's default), then their
    first. ``NoTenant`` when they belong to none.
    """
    explicit = request.GET.get("tenant") or request.POST.get("tenant")
    if explicit:
        ctx = tenant_context_for_user(user=request.user, slug=explicit)
        if ctx is None:
            raise Http404("Tenant not found.")
        return ctx
    for slug in (request.session.get(SESSION_TENANT_KEY), None):
        ctx = tenant_context_for_user(user=request.user, slug=slug)
        if ctx is not None:
            return ctx
    for tenant in tenants_for_user(user=request.user):  # type: ignore[arg-type]
        ctx = tenant_context_for_user(user=request.user, slug=tenant.slug)
        if ctx is not None:
            return ctx
    raise NoTenant


# --- The admin --------------------------------------------------------------------------------


def editable_tenants(request: HttpRequest) -> list[Tenant]:
    """Tenants the staff user may edit in the admin (every tenant for superusers), once per request.

    Access follows tenant roles (editor or admin), not Django's per-model permissions.
    """
    cached = getattr(request, "_quarry_editable_tenants", None)
    if cached is None:
        user = request.user
        if not (user.is_active and user.is_staff):
            cached = []
        elif user.is_superuser:
            cached = tenants_for_user(user=user, min_role=Role.EDITOR)  # type: ignore[arg-type]
        else:
            # The user's role rides along (``staff_role``) in the same statement: ``admin_tenants`` reads it
            # without a query of its own for every admin page the sidebar asks about.
            role = Membership.objects.filter(tenant=models.OuterRef("pk"), user=user).values("role")[:1]
            cached = list(
                Tenant.objects.filter(memberships__user=user, memberships__role__in=[Role.EDITOR, Role.ADMIN])
                .annotate(staff_role=models.Subquery(role)).distinct()
            )
        request._quarry_editable_tenants = cached  # type: ignore[attr-defined]
    return cached


def admin_tenants(request: HttpRequest) -> list[Tenant]:
    """The ``editable_tenants`` where the staff user is the tenant's admin (every one for superusers)."""
    if request.user.is_superuser:
        return editable_tenants(request)
    return [t for t in editable_tenants(request) if getattr(t, "staff_role", None) == Role.ADMIN]


# --- Management commands ------------------------------------------------------------------------

CLI_PRINCIPAL = "cli"


class CliAccessError(Exception):
    """A command named a tenant that does not exist, or a user who is no member of it."""


def cli_context(*, tenant_slug: str, username: str | None = None) -> TenantContext:
    """The shell's context in ``tenant_slug``: the ``cli`` principal with the admin role (whoever
    has the shell runs the server), or ``username``, a member, with their own role.

    Raises ``CliAccessError`` with a sentence for the terminal.
    """
    tenant = tenant_get(slug=tenant_slug) if isinstance(tenant_slug, str) and _SLUG.fullmatch(tenant_slug) else None
    if tenant is None:
        raise CliAccessError(f"tenant {tenant_slug!r} does not exist; create it with `manage.py create_tenant {tenant_slug}`")
    if username is None:
        return TenantContext(tenant=tenant, role=Role.ADMIN, user=AnonymousUser(), acting_as=CLI_PRINCIPAL)
    user = get_user_model().objects.filter(username=username).first()
    role = membership_role(user=user, tenant=tenant) if user is not None else None
    if user is None or role is None:
        raise CliAccessError(f"{username!r} is not a member of tenant {tenant.slug}.")
    return TenantContext(tenant=tenant, role=role, user=user)
