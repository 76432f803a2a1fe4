"""Which tenant a namespace (a tenant slug) names."""

from __future__ import annotations

from typing import Any

from django.db import connections

from accounts.models import Tenant
from knowledge.rag.errors import NamespaceNotFound
from knowledge.rag.types import ResolvedNamespace


def find_tenant_id(using: str, namespace: str) -> int | None:
    """The tenant of the namespace, or None: reads of a namespace that does not exist find nothing."""
    return Tenant.objects.using(using).filter(slug=namespace).values_list("id", flat=True).first()


def resolve(using: str, namespace: str) -> ResolvedNamespace | None:
    """The tenant of the namespace with the model of its vectors, its chunk count and whether it holds restricted
    chunks, in one statement
    (None: no tenant has that slug)."""
    connection = connections[using]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT t.id, t.slug, coalesce(s.embedding_model, ''), coalesce(s.chunk_count, 0), "
            # The partial index chunk_restricted (restricted chunks only) answers this at once.
            "EXISTS (SELECT 1 FROM knowledge_chunk c WHERE c.tenant_id = t.id AND NOT (c.access @> (ARRAY['*'])::varchar(32)[])) "
            "FROM accounts_tenant t LEFT JOIN knowledge_corpusstat s ON s.tenant_id = t.id WHERE t.slug = %s",
            [namespace],
        )
        row = cursor.fetchone()
    _release_idle(connection)
    return None if row is None else ResolvedNamespace(int(row[0]), row[1], row[2], int(row[3]), bool(row[4]))


def _release_idle(connection: Any) -> None:
    """Give a pooled connection back between statements when no transaction holds it.

    A search embeds its query after reading the namespace (CPU: the longest step under load). The
    connection goes back meanwhile, as the API's views give theirs back before searching, so a slow
    embedding model cannot exhaust the pool; the search's SQL takes one again."""
    if not connection.in_atomic_block and connection.pool is not None:
        connection.close()


def tenant_id(using: str, namespace: str) -> int:
    """The tenant of the namespace; ``NamespaceNotFound`` when there is none (writes and maintenance)."""
    found = find_tenant_id(using, namespace)
    if found is None:
        raise NamespaceNotFound(f"namespace {namespace!r}: no tenant with that slug")
    return found
