from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from knowledge.rag.backends.postgres import PostgresBackend, maintenance


class Command(BaseCommand):
    help = "Recompute BM25 term statistics from the stored chunks (all tenants, or one)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=None)

    def handle(self, *args: Any, tenant: str | None, **options: Any) -> None:
        tenants = Tenant.objects.filter(slug=tenant) if tenant else Tenant.objects.all()
        if tenant and not tenants.exists():
            raise CommandError(f"tenant {tenant!r} does not exist")
        backend = PostgresBackend()
        for t in tenants:
            maintenance.rebuild_statistics(backend, t.slug)
            self.stdout.write(f"rebuilt search statistics of tenant {t.slug}")
