"""Writes for accounts: tenants, memberships, groups, API tokens."""

from __future__ import annotations

import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models.functions import Now
from django.utils import timezone

from accounts.models import ApiToken, Group, Membership, Role, Tenant
from common import replicas


def tenant_create(*, slug: str, name: str = "") -> tuple[Tenant, bool]:
    """Create the tenant unless it exists. Returns ``(tenant, created)``.

    Raises ``ValidationError`` for a slug that is not a safe identifier.
    """
    existing = Tenant.objects.filter(slug=slug).first()
    if existing is not None:
        return existing, False
    tenant = Tenant(slug=slug, name=name or slug)
    tenant.full_clean()
    tenant.save()
    return tenant, True


def user_ensure(*, username: str, email: str = "", password: str | None = None, superuser: bool = False) -> tuple[AbstractBaseUser, bool]:
    """Return the user called ``username``, creating it when missing.

    A new user without a password gets an unusable one (it can use tokens only).
    An existing user is left as it is.
    """
    User = get_user_model()
    user = User.objects.filter(username=username).first()
    if user is not None:
        return user, False
    if superuser:
        user = User.objects.create_superuser(username=username, email=email, password=password)
    else:
        user = User.objects.create_user(username=username, email=email, password=password)
    return user, True


def tenant_access_changed(*, tenant: Tenant) -> None:
    """Who may read what in ``tenant`` changes in the current transaction (a membership, a group, a group's
    members): from its commit, every request reads the tenant as changed, read replicas included (the
    tenant is pinned to the primary for their lag bound, ``common.replicas.pin_tenant``).

    The services below call it; so does the admin, whose forms write these rows themselves."""
    replicas.pin_tenant(tenant.slug)


@transaction.atomic
def membership_set(*, user: AbstractBaseUser, tenant: Tenant, role: Role | str) -> Membership:
    """Give ``user`` exactly ``role`` in ``tenant`` (creating or changing the membership)."""
    role = Role(role)
    membership, _ = Membership.objects.update_or_create(user=user, tenant=tenant, defaults={"role": role})
    tenant_access_changed(tenant=tenant)
    return membership


def membership_ensure(*, user: AbstractBaseUser, tenant: Tenant, role: Role | str) -> Membership:
    """Make sure ``user`` holds at least ``role`` in ``tenant``; never lowers a role."""
    role = Role(role)
    membership = Membership.objects.filter(user=user, tenant=tenant).first()
    if membership is None:
        return membership_set(user=user, tenant=tenant, role=role)
    if Role.rank(membership.role) < Role.rank(role):
        membership.role = role
        membership.save(update_fields=["role"])
        tenant_access_changed(tenant=tenant)
    return membership


def api_token_create(*, tenant: Tenant, owner: AbstractBaseUser, role: Role | str, name: str = "") -> tuple[ApiToken, str]:
    """Create a token and return it with its secret, which is not stored and cannot be shown again.

    Precondition: ``owner`` holds at least ``role`` in ``tenant`` (or is a superuser);
    a token never carries more rights than its owner.
    """
    role = Role(role)
    if not getattr(owner, "is_superuser", False):
        held = Membership.objects.filter(user=owner, tenant=tenant).values_list("role", flat=True).first()
        if held is None or Role.rank(held) < Role.rank(role):
            raise ValidationError(f"{owner} is not {Role.with_article(role)} of tenant {tenant.slug}; a token cannot carry more rights than its owner.")
    secret = ApiToken.PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        tenant=tenant,
        owner=owner,
        role=role,
        name=name,
        prefix=secret[: len(ApiToken.PREFIX) + 8],
        digest=ApiToken.hash_secret(secret),
    )
    return token, secret


def api_token_revoke(*, token: ApiToken) -> None:
    """Revoke the token now; revoking twice keeps the first time."""
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=Now())
    token.refresh_from_db(fields=["revoked_at"])


def api_token_touch(*, token: ApiToken, every_seconds: int) -> None:
    """Record that the token was used, at most once per ``every_seconds`` (reads stay cheap)."""
    now = timezone.now()
    if token.last_used_at is not None and now - token.last_used_at < timedelta(seconds=every_seconds):
        return
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    token.last_used_at = now


# --- Groups: who may read restricted documents (issue 34) --------------------------------------------


class GroupError(ValueError):
    """A group request the tenant cannot honour; ``field`` names the input at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def group_create(*, tenant: Tenant, name: str) -> Group:
    """Create the tenant's group ``name``. Raises ``GroupError`` for a malformed or taken name."""
    group = Group(tenant=tenant, name=name)
    try:
        group.full_clean()
    except ValidationError as exc:
        messages = exc.message_dict
        if "__all__" in messages or any("already exists" in m for m in messages.get("name", [])):
            raise GroupError("name", f"tenant {tenant.slug} already has a group {name!r}") from None
        raise GroupError("name", " ".join(messages.get("name", ["is not a valid group name"]))) from None
    group.save()
    return group


def group_delete(*, group: Group) -> None:
    """Delete ``group``. Documents that named it keep its id in their access lists, which names nobody
    now: they stay restricted (to the rest of their list, and to admins) rather than opening up."""
    with transaction.atomic():
        group.delete()
        tenant_access_changed(tenant=group.tenant)


def group_member_add(*, group: Group, username: str) -> AbstractBaseUser:
    """Add the tenant member ``username`` to ``group`` (idempotent); ``GroupError`` for anyone else."""
    member = get_user_model().objects.filter(username=username, memberships__tenant_id=group.tenant_id).first()
    if member is None:
        raise GroupError("username", f"{username!r} is not a member of tenant {group.tenant.slug}")
    with transaction.atomic():
        group.members.add(member)
        tenant_access_changed(tenant=group.tenant)
    return member


def group_member_remove(*, group: Group, user: AbstractBaseUser) -> None:
    """Take ``user`` out of ``group``: from their next request they no longer read what only it may."""
    with transaction.atomic():
        group.members.remove(user)
        tenant_access_changed(tenant=group.tenant)


def membership_remove(*, user: AbstractBaseUser, tenant: Tenant) -> None:
    """Take ``user`` out of ``tenant``, and out of its groups."""
    with transaction.atomic():
        for group in Group.objects.filter(tenant=tenant, members=user):
            group.members.remove(user)
        Membership.objects.filter(user=user, tenant=tenant).delete()
        tenant_access_changed(tenant=tenant)
