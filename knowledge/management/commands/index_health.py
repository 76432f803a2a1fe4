"""``manage.py index_health [--reindex [NAME]] [--repair]``: the shared search indexes' health as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from knowledge.services import index_health


class Command(BaseCommand):
    help = (
        "Print each shared search index's size, live rows, bloat (size per live row over a fresh index's) and "
        "last rebuild as JSON. --reindex NAME rebuilds that index now (REINDEX INDEX CONCURRENTLY: searches and "
        "writes go on); --reindex alone rebuilds every HNSW index; --repair does what the schedule does "
        "(rebuild the worst index past QUARRY_INDEX_REBUILD_BLOAT)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--reindex", nargs="?", const="", default=None, metavar="NAME")
        parser.add_argument("--repair", action="store_true")

    def handle(self, *args: Any, reindex: str | None, repair: bool, **options: Any) -> None:
        out: dict[str, Any] = {"bound": index_health.rebuild_bound(), "min_bytes": index_health.rebuild_min_bytes()}
        if repair:
            out.update(index_health.indexes_repair(trigger="command"))
        elif reindex is not None:
            names = [reindex] if reindex else [h.name for h in index_health.index_health_report() if h.method == "hnsw"]
            rebuilt = []
            for name in names:
                try:
                    record = index_health.index_rebuild(name=name, trigger="command")
                except ValueError as exc:
                    raise CommandError(str(exc)) from exc
                if record is None:
                    raise CommandError("another rebuild is running; try again when it has finished")
                if record.error:
                    raise CommandError(f"rebuilding {name} failed: {record.error}")
                rebuilt.append({"index": name, "seconds": record.seconds, "size_before": record.size_before,
                                "size_after": record.size_after})
            out["rebuilt"] = rebuilt
        out["indexes"] = [h.as_json() for h in index_health.index_health_report()]
        self.stdout.write(json.dumps(out, indent=2))
