from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from knowledge.models import SEARCH_LANGUAGES
from knowledge.services import text_search


class Command(BaseCommand):
    help = (
        "Show or set a tenant's text search language (stemming and stop words of keyword search). "
        "Setting it re-indexes the tenant's keyword data in the background (a worker runs the task); "
        "--now does it in this process. Searches use the old language until the new index is complete."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--language", choices=SEARCH_LANGUAGES, default=None)
        parser.add_argument("--now", action="store_true", help="Re-index here and now instead of queuing the task.")

    def handle(self, *args: Any, tenant: str, language: str | None, now: bool, **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant).first()
        if row is None:
            raise CommandError(f"tenant {tenant!r} does not exist")
        if language is not None:
            text_search.search_language_set(tenant=row, language=language)
            if now:
                text_search.search_language_apply(namespace=tenant)
        state = text_search.search_language_state(tenant=row)
        status = "re-indexing (queued)" if state.reindexing else "applied"
        self.stdout.write(f"tenant {tenant}: language {state.requested}, index in {state.active}: {status}")
        if state.error:
            self.stdout.write(f"last re-index failed: {state.error}")
