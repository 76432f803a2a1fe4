"""What an answer is grounded on: the share of a BEIR folder's questions whose chat context holds
all of their judged passages, with and without the knowledge graph.

    .venv/bin/python bench/chat_context.py ../shared/data/musique --tenant musique [--limit N]

Retrieves each question exactly as the chat does (``chat.retrieval.retrieve``: hybrid search with the
deployment's settings, the floor, the second hop and, with the graph, the passages it places) and
prints one JSON line per setting: ``context_all`` (every judged document among the passages),
``context_recall`` (the mean share of judged documents among them) and ``passages`` (the mean
number). Unlike ``manage.py evaluate_answers`` no model runs: this measures what any model is given.
The tenant must hold the corpus (``manage.py evaluate DIR --tenant SLUG`` ingests it).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _common import setup_django

setup_django()

from asgiref.sync import async_to_sync  # noqa: E402

from accounts.models import Tenant  # noqa: E402
from chat.management.commands.evaluate_answers import _jsonl, _qrels  # noqa: E402
from chat.retrieval import RetrievalOptions, retrieve  # noqa: E402


def measure(tenant: Tenant, questions: list[tuple[str, set[str]]], *, graph: bool) -> dict[str, float | bool]:
    """Context figures for ``questions`` (text, judged document ids) retrieved with or without the graph."""
    complete, recall, passages = 0, 0.0, 0
    for text, judged in questions:
        hits, _ = async_to_sync(retrieve)(tenant=tenant, prompt=text, options=RetrievalOptions(graph=graph))
        found = {hit.chunk.document_id for hit in hits}
        complete += judged <= found
        recall += len(judged & found) / len(judged)
        passages += len(hits)
    n = max(len(questions), 1)
    return {"graph": graph, "context_all": round(complete / n, 4), "context_recall": round(recall / n, 4),
            "passages": round(passages / n, 2), "questions": len(questions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--limit", type=int, default=0, help="only the first N judged questions (0: all)")
    args = parser.parse_args()
    judged = _qrels(args.folder / "qrels.tsv")
    questions = [(row["text"], judged[row["_id"]]) for row in _jsonl(args.folder / "queries.jsonl") if row["_id"] in judged]
    if args.limit:
        questions = questions[: args.limit]
    tenant = Tenant.objects.get(slug=args.tenant)
    for graph in (False, True):
        print(json.dumps(measure(tenant, questions, graph=graph)), flush=True)


if __name__ == "__main__":
    main()
