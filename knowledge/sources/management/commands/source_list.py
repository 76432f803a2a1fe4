"""``manage.py source_list --tenant acme``: each source, its state and last sync."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from knowledge.sources.management.commands._common import tenant_for
from knowledge.sources.selectors import latest_syncs, source_list, source_status


class Command(BaseCommand):
    help = "List a tenant's sources with their status and last sync's counts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_for(options["tenant"])
        sources = list(source_list(tenant=tenant))
        latest = latest_syncs(sources)
        if not sources:
            self.stdout.write(f"tenant {tenant.slug} has no sources")
        for source in sources:
            last = latest.get(source.pk)
            schedule = f"every {source.schedule_minutes} min" if source.schedule_minutes else "manual"
            line = f"{source.pk:>4}  {source.name}  [{source.kind}, {schedule}]  {source_status(source, last)}"
            if last is not None:
                line += (f"  last {last.started_at:%Y-%m-%d %H:%M}: added {last.added}, updated {last.updated}, unchanged {last.unchanged}, "
                         f"deleted {last.deleted}, failed {last.failed}")
            self.stdout.write(line)
            for error in (last.errors if last is not None else [])[:5]:
                self.stdout.write(f"        {error.get('item') or '(listing)'}: {error.get('reason')}")
