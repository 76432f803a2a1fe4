from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.access import CliAccessError, cli_context
from knowledge.services.documents import demo_corpus_ingest


class Command(BaseCommand):
    help = "Index the small demo corpus about Quarry into a tenant (default: DEFAULT)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", default=settings.QUARRY_DEFAULT_TENANT)

    def handle(self, *args: Any, tenant: str, **options: Any) -> None:
        try:
            found = cli_context(tenant_slug=tenant).tenant
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None
        chunks = demo_corpus_ingest(tenant=found)
        self.stdout.write(f"demo corpus: {chunks} chunks in tenant {found.slug}")
