from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from accounts.access import CliAccessError, cli_context
from knowledge.evaluation import ingest_beir_corpus
from knowledge.services.indexing import backlog_drain


class Command(BaseCommand):
    help = "Index a BEIR folder's corpus.jsonl into a tenant (unchanged chunks are not embedded again)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--tenant", required=True)
        parser.add_argument("--batch-size", type=int, default=100)

    def handle(self, *args: Any, folder: Path, tenant: str, batch_size: int, **options: Any) -> None:
        try:
            found = cli_context(tenant_slug=tenant).tenant
        except CliAccessError as exc:
            raise CommandError(str(exc)) from None
        corpus = folder / "corpus.jsonl"
        if not corpus.is_file():
            raise CommandError(f"{corpus} not found: a BEIR folder holds corpus.jsonl, queries.jsonl and qrels.tsv")
        try:
            with tqdm(desc="ingest", unit="doc") as bar:
                documents, chunks = ingest_beir_corpus(tenant=found, corpus=corpus, batch_size=batch_size, progress=bar.update)
        except (ValueError, json.JSONDecodeError) as exc:
            raise CommandError(str(exc)) from None
        backlog_drain(namespace=found.slug)  # large batches leave postings and HNSW entries to do
        self.stdout.write(f"{documents} documents, {chunks} chunks")
