"""``manage.py export_feedback --tenant SLUG DIR``: a tenant's rated answers as a BEIR folder.

Writes ``DIR/queries.jsonl`` (one query per rated answer: ``_id`` ``feedback-<id>``, the question,
and metadata: rating, comment, retrieval settings), ``DIR/qrels.tsv`` (``query-id corpus-id score``:
each document an answer cited, 1 for a thumbs up, 0 for a thumbs down, judged not relevant) and
``DIR/corpus.jsonl`` (each cited document that still exists: ``_id`` its document id, its title, and
the text of its cited chunks). ``manage.py evaluate DIR --tenant SLUG`` then measures the tenant's
search on its own judged questions: the tenant already holds those documents, so nothing is
ingested, and evaluate scores the questions with at least one relevant (thumbs-up) document.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.access import CliAccessError, cli_context
from accounts.selectors import tenant_get
from chat.selectors import chat_feedback_judged
from knowledge import rag
from knowledge.rag import limits


class Command(BaseCommand):
    help = ("Write a tenant's rated chat answers as a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv) "
            "for `manage.py evaluate DIR --tenant SLUG`.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path, help="Created when missing; its three files are replaced.")
        parser.add_argument("--tenant", required=True, help="The tenant whose feedback is exported.")
        parser.add_argument("--as", dest="as_user", default=None, metavar="USERNAME",
                            help="Export only passages this member may read (issue 34); default: the shell's full view.")

    def handle(self, *args: Any, folder: Path, tenant: str, as_user: str | None = None, **options: Any) -> None:
        found = tenant_get(slug=tenant)
        if found is None:
            raise CommandError(f"--tenant: no tenant {tenant!r}")
        try:
            reader = rag.reader_of(cli_context(tenant_slug=found.slug, username=as_user))
        except CliAccessError as exc:
            raise CommandError(f"--as: {exc}") from None
        judged = chat_feedback_judged(tenant=found)
        cited = list(dict.fromkeys(c["chunk_id"] for j in judged for c in j["citations"] if isinstance(c.get("chunk_id"), str)))
        chunks = _fetch(found.slug, cited, reader)
        # A cited document's text is its cited chunks, in chunk order (what the answers were judged on).
        documents: dict[str, dict[str, Any]] = {}
        for chunk in sorted(chunks.values(), key=lambda c: (c.document_id, _ordinal(c.chunk_id))):
            record = documents.setdefault(chunk.document_id, {"_id": chunk.document_id, "title": chunk.title or "", "texts": []})
            record["texts"].append(chunk.text)
        folder.mkdir(parents=True, exist_ok=True)
        queries = qrels = up = 0
        with (folder / "queries.jsonl").open("w", encoding="utf-8") as q_out, (folder / "qrels.tsv").open("w", encoding="utf-8") as r_out:
            r_out.write("query-id\tcorpus-id\tscore\n")
            for j in judged:
                docs = list(dict.fromkeys(chunks[c["chunk_id"]].document_id for c in j["citations"] if c.get("chunk_id") in chunks))
                if not docs:
                    continue  # nothing it cited is left to judge
                query_id = f"feedback-{j['feedback_id']}"
                q_out.write(json.dumps({"_id": query_id, "text": j["question"], "metadata": {
                    "rating": j["rating"], "comment": j["comment"], "retrieval": j["retrieval"],
                    "rated_at": j["updated_at"].isoformat()}}, ensure_ascii=False) + "\n")
                score = 1 if j["rating"] == "up" else 0
                for doc in docs:
                    r_out.write(f"{query_id}\t{doc}\t{score}\n")
                queries, qrels, up = queries + 1, qrels + len(docs), up + (j["rating"] == "up")
        with (folder / "corpus.jsonl").open("w", encoding="utf-8") as c_out:
            for record in documents.values():
                c_out.write(json.dumps({"_id": record["_id"], "title": record["title"], "text": "\n\n".join(record["texts"])},
                                       ensure_ascii=False) + "\n")
        self.stdout.write(f"{queries} judged questions ({up} up, {queries - up} down), {len(documents)} documents, "
                          f"{qrels} judgements -> {folder}")


def _ordinal(chunk_id: str) -> int:
    tail = chunk_id.rpartition(":")[2]
    return int(tail) if tail.isdigit() else 0


def _fetch(namespace: str, chunk_ids: list[str], reader: rag.Reader | None) -> dict[str, rag.RAGChunk]:
    """The cited chunks still in the tenant's knowledge base, by id (deleted ones, and with ``reader`` the ones
    they may not read, are left out: their questions then have nothing left to judge)."""
    service = rag.tenant_service(namespace, embedder=None, reader=reader)
    found: dict[str, rag.RAGChunk] = {}
    for start in range(0, len(chunk_ids), limits.MAX_FETCH_IDS):
        for chunk in async_to_sync(service.fetch)(chunk_ids[start:start + limits.MAX_FETCH_IDS]):
            found[chunk.chunk_id] = chunk
    return found
