"""``manage.py source_sync --tenant acme "Docs site" [--wait]``: sync a source now.

Without ``--wait`` the sync is queued for the workers. With it, the sync runs in this process with a
progress bar (or, when a worker is already running it, the bar follows that sync), then the counts
and errors are printed; documents written are processed by the workers as uploads are.
"""

from __future__ import annotations

import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from knowledge.sources.management.commands._common import source_named, tenant_for
from knowledge.sources.models import Source, SourceSync, SyncStatus
from knowledge.sources.services.syncing import SourceGone, source_sync_request, source_sync_run


class Command(BaseCommand):
    help = "Sync a source now (queued for the workers, or with --wait run here with a progress bar)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="the source's id, name or key")
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--wait", action="store_true", help="run the sync here and show its progress")

    def handle(self, *args: Any, **options: Any) -> None:
        source = source_named(tenant_for(options["tenant"]), options["source"])
        try:
            queued = source_sync_request(source=source, trigger="manual")
        except SourceGone as exc:
            raise CommandError(str(exc)) from None
        if not options["wait"]:
            self.stdout.write("sync queued" if queued else "merged into the sync already queued or running")
            return
        bar = tqdm(desc=f"sync {source.name}", unit="item")

        def show(sync: SourceSync) -> None:
            bar.set_postfix(added=sync.added, updated=sync.updated, unchanged=sync.unchanged, failed=sync.failed, refresh=False)
            bar.update(sync.listed - bar.n)

        sync = source_sync_run(source_pk=source.pk, progress=show)
        if sync is None:  # a worker holds it: follow that sync from its saved counts
            since = SourceSync.objects.filter(source=source).order_by("-pk").values_list("pk", flat=True).first() or 0
            while Source.objects.filter(pk=source.pk, lease_until__isnull=False).exists() or not SourceSync.objects.filter(
                    source=source, pk__gte=since).exclude(status=SyncStatus.RUNNING).exists():
                current = SourceSync.objects.filter(source=source).order_by("-pk").first()
                if current is not None:
                    show(current)
                time.sleep(1)
            sync = SourceSync.objects.filter(source=source).order_by("-pk").first()
        assert sync is not None
        show(sync)
        bar.close()
        self.stdout.write(f"{sync.status}: added {sync.added}, updated {sync.updated}, unchanged {sync.unchanged}, "
                          f"deleted {sync.deleted}, failed {sync.failed}")
        for error in sync.errors:
            self.stdout.write(f"  {error.get('item') or '(listing)'}: {error.get('reason')}")
        if sync.status == SyncStatus.FAILED:
            raise CommandError("the sync failed")
