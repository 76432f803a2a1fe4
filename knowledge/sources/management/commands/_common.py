"""What the source commands share: the tenant from ``--tenant``, and a source by id or name in it."""

from __future__ import annotations

from django.core.management.base import CommandError

from accounts.access import CliAccessError, cli_context
from accounts.models import Tenant
from knowledge.sources.models import Source
from knowledge.sources.selectors import source_list


def tenant_for(slug: str) -> Tenant:
    try:
        return cli_context(tenant_slug=slug).tenant
    except CliAccessError as exc:
        raise CommandError(str(exc)) from None


def source_named(tenant: Tenant, name_or_id: str) -> Source:
    sources = source_list(tenant=tenant)
    found = sources.filter(pk=int(name_or_id)).first() if name_or_id.isdigit() else None
    found = found or sources.filter(name=name_or_id).first() or sources.filter(key=name_or_id).first()
    if found is None:
        raise CommandError(f"tenant {tenant.slug} has no source {name_or_id!r}; `manage.py source_list --tenant {tenant.slug}` lists them")
    return found
