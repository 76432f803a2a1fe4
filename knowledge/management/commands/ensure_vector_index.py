from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from knowledge.rag.backends.postgres.sql import create_hnsw_index_sql, hnsw_index_name
from knowledge.rag import default_embedder
from knowledge.rag.protocols import declared_dimension


class Command(BaseCommand):
    help = (
        "Create the pgvector HNSW index for an embedding dimension (default: the configured embedder's). "
        "Without pgvector, search stays exact in plain SQL and this command says so."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dimension", type=int, default=None)

    def handle(self, *args: Any, dimension: int | None, **options: Any) -> None:
        if dimension is None:
            embedder = default_embedder()
            # ``dimension`` is an optional capability of an embedder: without it, say --dimension.
            dimension = declared_dimension(embedder) if embedder else None
        if not dimension or not 1 <= dimension <= 2000:
            raise CommandError("--dimension must be between 1 and 2000 (pgvector's HNSW limit for vector)")
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
            if cursor.fetchone() is None:
                self.stdout.write("pgvector is not installed in this database: semantic search runs exact in plain SQL")
                return
            cursor.execute(create_hnsw_index_sql(dimension))
        self.stdout.write(f"index {hnsw_index_name(dimension)} is in place")
