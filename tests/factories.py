"""Factories for test data. They call the same services the product uses."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from django.contrib.auth.models import User

from accounts.models import Role, Tenant
from accounts.services import api_token_create, membership_set, tenant_create, user_ensure

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from knowledge.models import Chunk

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


def chunk_vectors(chunks: QuerySet[Chunk]) -> list[list[float] | None]:
    """The chunks' vectors in primary-key order, read as the backend stores them: ``embedding_half`` where
    pgvector is installed (migration 0022 leaves ``embedding`` NULL there), the float8[] elsewhere."""
    # Imported here: the factories module stays importable before Django's apps are ready.
    from django.db import connections

    from knowledge.rag.backends.postgres import PostgresBackend
    from knowledge.rag.backends.postgres import sql as q

    pks = list(chunks.order_by("pk").values_list("pk", flat=True))
    pgvector = PostgresBackend(using=chunks.db, index_hook=None).has_pgvector()
    with connections[chunks.db].cursor() as cursor:
        cursor.execute(f"SELECT c.id, {q.stored_vector_sql(pgvector)} FROM knowledge_chunk c WHERE c.id = ANY(%s)", [pks])
        found = dict(cursor.fetchall())
    return [found[pk] for pk in pks]
