from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from knowledge.models import EmbeddingMigration, EmbeddingMigrationStatus
from knowledge.services import reembedding


def _line(migration: EmbeddingMigration) -> str:
    text = (f"{migration.source_model or 'no vectors'} -> {migration.target_model}: {migration.status}, "
            f"{migration.done:,} of {migration.total:,} chunks ({migration.percent}%)")
    return text + (f"; {migration.error}" if migration.error else "")


class Command(BaseCommand):
    help = (
        "Show or change a tenant's embedding model without downtime. --model embeds every chunk with the new "
        "model in the background (a worker runs it; --now runs it here and waits), while searches keep using the "
        "old vectors; when all are ready the tenant switches in one transaction and the old vectors are dropped. "
        "Progress: this command without --model, or the admin's Embedding model moves."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--model", default=None,
                            help="local (all-MiniLM-L6-v2), bge-small (bge-small-en-v1.5), or the configured QUARRY_EMBEDDING_MODEL.")
        parser.add_argument("--now", action="store_true", help="Do the work in this process and wait for the switch.")
        parser.add_argument("--cancel", action="store_true", help="Stop the running move and drop what it staged.")

    def handle(self, *args: Any, tenant: str, model: str | None, now: bool, cancel: bool, **options: Any) -> None:
        row = Tenant.objects.filter(slug=tenant).first()
        if row is None:
            raise CommandError(f"tenant {tenant!r} does not exist")
        if cancel:
            stopped = reembedding.reembed_cancel(tenant=row)
            self.stdout.write(f"tenant {tenant}: " + ("no move was running" if stopped is None else "cancelled " + _line(stopped)))
            return
        if model is not None:
            try:
                migration = reembedding.reembed_start(tenant=row, model=model, actor="manage.py reembed", queue=not now)
            except reembedding.ReembedError as exc:
                raise CommandError(str(exc)) from None
            if not now:
                self.stdout.write(f"tenant {tenant}: queued {_line(migration)}")
                return

            def show(current: EmbeddingMigration) -> None:
                self.stdout.write(f"tenant {tenant}: {_line(current)}")

            status = reembedding.reembed_run(migration.pk, seconds=None, on_progress=show)
            migration.refresh_from_db()
            if status != EmbeddingMigrationStatus.DONE:
                raise CommandError(f"tenant {tenant}: {_line(migration)}")
            return
        current = reembedding.running(row) or EmbeddingMigration.objects.filter(tenant=row).first()
        self.stdout.write(f"tenant {tenant}: model {reembedding.tenant_model(row) or 'none yet (the configured one)'}")
        if current is not None:
            self.stdout.write(("moving " if current.status == EmbeddingMigrationStatus.RUNNING else "last move ") + _line(current))
