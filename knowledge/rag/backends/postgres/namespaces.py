"""Which tenant a namespace (a tenant slug) names."""

from __future__ import annotations

from accounts.models import Tenant
from knowledge.rag.errors import NamespaceNotFound


def find_tenant_id(using: str, namespace: str) -> int | None:
    """The tenant of the namespace, or None: reads of a namespace that does not exist find nothing."""
    return Tenant.objects.using(using).filter(slug=namespace).values_list("id", flat=True).first()


def tenant_id(using: str, namespace: str) -> int:
    """The tenant of the namespace; ``NamespaceNotFound`` when there is none (writes and maintenance)."""
    found = find_tenant_id(using, namespace)
    if found is None:
        raise NamespaceNotFound(f"namespace {namespace!r}: no tenant with that slug")
    return found
