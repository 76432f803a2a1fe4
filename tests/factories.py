"""Factories for test data. They call the same services the product uses."""

from __future__ import annotations

import itertools

from django.contrib.auth.models import User

from accounts.models import Role, Tenant
from accounts.services import api_token_create, membership_set, tenant_create, user_ensure

_seq = itertools.count(1)


def make_tenant(slug: str | None = None) -> Tenant:
    tenant, _ = tenant_create(slug=slug or f"tenant-{next(_seq)}")
    return tenant


def make_user(username: str | None = None, *, password: str | None = "pw-for-tests-only", superuser: bool = False) -> User:
    user, _ = user_ensure(username=username or f"user{next(_seq)}", password=password, superuser=superuser)
    return user  # type: ignore[return-value]


def make_member(tenant: Tenant, role: Role | str = Role.READER, username: str | None = None) -> User:
    user = make_user(username)
    membership_set(user=user, tenant=tenant, role=role)
    return user


def make_token(tenant: Tenant, user: User, role: Role | str | None = None) -> str:
    """A token secret for ``user`` in ``tenant``, at ``role`` (default: the user's membership role)."""
    if role is None:
        role = user.memberships.get(tenant=tenant).role
    _, secret = api_token_create(tenant=tenant, owner=user, role=role)
    return secret
