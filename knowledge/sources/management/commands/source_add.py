"""``manage.py source_add --tenant acme --name "Docs site" --kind web --config '{"url": "https://docs.example.com/"}' --every 60``"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge.sources.connectors.base import ConfigError
from knowledge.sources.management.commands._common import tenant_for
from knowledge.sources.services.editing import source_create


class Command(BaseCommand):
    help = "Add a source (checked and reached first); its first sync is queued for the workers."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--name", required=True)
        parser.add_argument("--kind", required=True, help="web, git, folder or s3")
        parser.add_argument("--config", required=True, help="the kind's settings as a JSON object (README, Sources)")
        parser.add_argument("--every", type=int, default=None, metavar="MINUTES", help="sync every N minutes (default: manual only)")
        parser.add_argument("--paused", action="store_true", help="add it paused: no sync until resumed or run by hand")

    def handle(self, *args: Any, **options: Any) -> None:
        tenant = tenant_for(options["tenant"])
        try:
            config = json.loads(options["config"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--config is not JSON: {exc}") from None
        try:
            source = source_create(tenant=tenant, name=options["name"], kind=options["kind"], config=config,
                                   schedule_minutes=options["every"], enabled=not options["paused"], actor="cli")
        except ConfigError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from None
        schedule = f"every {source.schedule_minutes} min" if source.schedule_minutes else "manual syncs"
        self.stdout.write(f"source {source.pk} {source.name!r} ({source.kind}, {schedule}); documents are named {source.key}/...")
