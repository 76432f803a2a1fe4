"""Reads for accounts. Every function that touches tenant data takes the tenant."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

from accounts.models import ApiToken, Group, Membership, Role, Tenant


def tenant_get(*, slug: str) -> Tenant | None:
    """The tenant called ``slug``; None for unknown slugs and for private stores (nobody resolves those)."""
    return Tenant.objects.public().filter(slug=slug).first()


def membership_role(*, user: AbstractBaseUser | AnonymousUser, tenant: Tenant) -> Role | None:
    """The user's role in ``tenant``; superusers are admins of every tenant but the private stores."""
    if not user.is_authenticated or not user.is_active or tenant.private_to_id is not None:
        return None
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    role = Membership.objects.filter(user=user, tenant=tenant).values_list("role", flat=True).first()
    return Role(role) if role else None


def tenants_for_user(*, user: AbstractBaseUser, min_role: Role = Role.READER) -> list[Tenant]:
    """Tenants where ``user`` holds at least ``min_role`` (all tenants for superusers)."""
    if getattr(user, "is_superuser", False):
        return list(Tenant.objects.public())
    allowed = [r for r in Role if Role.rank(r) >= Role.rank(min_role)]
    return list(Tenant.objects.filter(memberships__user=user, memberships__role__in=allowed).distinct())


def api_token_for_secret(*, secret: str) -> ApiToken | None:
    """The active token whose secret this is, or None (unknown and revoked look alike)."""
    if not secret.startswith(ApiToken.PREFIX) or len(secret) > 200:
        return None
    return (
        ApiToken.objects.active()
        .select_related("tenant", "owner")
        .filter(digest=ApiToken.hash_secret(secret))
        .first()
    )


def group_ids_for(*, user: AbstractBaseUser | AnonymousUser, tenant: Tenant) -> tuple[int, ...]:
    """The ids of ``tenant``'s groups ``user`` belongs to, read now: a membership change counts from the next request."""
    if not user.is_authenticated:
        return ()
    return tuple(Group.objects.filter(tenant=tenant, members=user).order_by("pk").values_list("pk", flat=True))


def groups_of_tenant(*, tenant: Tenant) -> list[Group]:
    """The tenant's groups by name, with their members (one query each)."""
    return list(Group.objects.filter(tenant=tenant).prefetch_related("members").order_by("name"))


def group_get(*, tenant: Tenant, name: str) -> Group | None:
    return Group.objects.filter(tenant=tenant, name=name).first()
