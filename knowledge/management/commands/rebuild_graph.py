from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.models import Tenant
from knowledge.models import Entity, Mention, Relation
from knowledge.services.graphing import graph_rebuild


class Command(BaseCommand):
    help = (
        "Recompute a tenant's knowledge graph (entities, mentions, relations) from its indexed chunks, "
        "in one transaction, with a progress bar. Search keeps the old graph until it commits."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="The tenant's slug.")
        parser.add_argument("--quiet", action="store_true", help="No progress bar.")

    def handle(self, *args: Any, tenant: str, quiet: bool, **options: Any) -> None:
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"tenant {tenant!r} does not exist")
        with tqdm(desc="graph", unit="chunk", disable=quiet) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            chunks = graph_rebuild(namespace=found.slug, on_progress=progress)
        entities = Entity.objects.filter(tenant=found).count()
        mentions = Mention.objects.filter(tenant=found).count()
        relations = Relation.objects.filter(tenant=found).count()
        self.stdout.write(f"rebuilt the graph of tenant {found.slug}: {chunks} chunks, {entities} entities, "
                          f"{mentions} mentions, {relations} relations")
