"""``manage.py evaluate_answers DIR --tenant SLUG [--graph] [--limit N] [--json]``: answer quality of the chat model.

Asks every query of a BEIR folder whose ``queries.jsonl`` rows carry an ``answer``
(the short gold answer, e.g. ``../shared/data/musique``) through
``chat.pipeline.answer_stream``, i.e. with whatever model the catalog configures
(the built-in offline model when no provider is), and reports:

- ``answer_contained``: share of responses that contain the normalized gold answer
  (lower case, punctuation and the articles a/an/the removed, whitespace collapsed,
  as SQuAD's evaluation normalizes);
- ``citation_precision`` / ``citation_recall``: the cited documents against ``qrels.tsv``
  (precision averaged over the responses that cite something, recall over all);
- ``citations_per_answer``, ``cannot_answer`` (share of responses citing nothing),
  ``mean_chars``;
- ``first_text_ms`` / ``end_ms`` p50 and p95 from the question to the first text and to
  the ``completed`` event, and ``retrieval_ms`` p50/p95 (retrieval alone, timed separately
  right after), and ``after_retrieval_ms`` p50/p95: per question, ``end_ms`` less its
  ``retrieval_ms``, i.e. what the model, streaming and storing the exchange add.

The tenant must already hold the corpus (``manage.py evaluate DIR --tenant SLUG`` ingests
it): chat reads the knowledge base, it does not write it. Each question gets a fresh
session (no memory of the others), deleted afterwards.
"""

from __future__ import annotations

import csv
import json as jsonlib
import math
import re
import statistics
import string
import time
from contextlib import aclosing
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import Tenant
from chat.models import ChatSession
from chat.pipeline import answer_stream
from chat.retrieval import RetrievalOptions, retrieve
from chat.services import chat_session_create
from common.db import db_step

PRINCIPAL = "evaluate-answers"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "\u201c\u201d\u2018\u2019")


def normalize_answer(text: str) -> str:
    """SQuAD's normalization: lower case, no punctuation, no articles, single spaces."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


def contains_answer(response: str, gold: str) -> bool:
    wanted = normalize_answer(gold)
    return bool(wanted) and f" {wanted} " in f" {normalize_answer(response)} "


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    rows.append(jsonlib.loads(line))
                except jsonlib.JSONDecodeError as exc:
                    raise CommandError(f"{path.name} line {number}: not valid JSON ({exc.msg})") from None
    return rows


def _qrels(path: Path) -> dict[str, set[str]]:
    judged: dict[str, set[str]] = {}
    with path.open(encoding="utf-8") as fh:
        for row in csv.reader(fh, delimiter="\t"):
            if len(row) >= 3 and row[2].strip().lstrip("-").isdigit() and int(row[2]) > 0:
                judged.setdefault(row[0], set()).add(row[1])
    return judged


class Command(BaseCommand):
    help = (
        "Measure the chat model's answers on a BEIR folder whose queries carry an 'answer': gold answer contained, "
        "citation precision/recall against the qrels, cannot-answer share, mean length, latency to first text and to the end."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", type=Path)
        parser.add_argument("--tenant", required=True, help="Tenant holding the corpus (manage.py evaluate ingests it).")
        parser.add_argument("--graph", action="store_true", help="Answer with graph search (the knowledge graph's leg).")
        parser.add_argument("--limit", type=int, default=0, help="Ask only the first N questions (0: all).")
        parser.add_argument("--qrels", default="qrels.tsv")
        parser.add_argument("--queries", default="queries.jsonl")
        parser.add_argument("--json", action="store_true", help="Print one JSON object and nothing else.")

    def handle(self, *args: Any, folder: Path, tenant: str, graph: bool, limit: int, qrels: str, queries: str,
               json: bool, **options: Any) -> None:
        for name in (queries, qrels):
            if not (folder / name).is_file():
                raise CommandError(f"{folder / name} not found: a BEIR folder holds {queries} and {qrels}")
        found = Tenant.objects.filter(slug=tenant).first()
        if found is None:
            raise CommandError(f"Tenant {tenant!r} not found: run manage.py evaluate {folder} --tenant {tenant} first to ingest the corpus.")
        judged = _qrels(folder / qrels)
        asked = [q for q in _jsonl(folder / queries) if isinstance(q.get("answer"), str) and str(q.get("_id")) in judged]
        if not asked:
            raise CommandError(f"No query of {queries} has both an 'answer' and judgements in {qrels}.")
        if limit > 0:
            asked = asked[:limit]
        rows = [async_to_sync(self._ask)(found, q, judged[str(q["_id"])], graph) for q in asked]
        cited = [r for r in rows if r["cited"]]
        report = {
            "dataset": folder.resolve().name, "tenant": found.slug, "graph": graph, "questions": len(rows),
            "model": rows[0]["model"] if rows else None,
            "answer_contained": round(statistics.fmean(r["contained"] for r in rows), 4),
            "citation_precision": round(statistics.fmean(r["precision"] for r in cited), 4) if cited else 0.0,
            "citation_recall": round(statistics.fmean(r["recall"] for r in rows), 4),
            "citations_per_answer": round(statistics.fmean(len(r["cited"]) for r in rows), 3),
            "cannot_answer": round(statistics.fmean(not r["cited"] for r in rows), 4),
            "mean_chars": round(statistics.fmean(r["chars"] for r in rows), 1),
            **{f"{key}_{q}": round(percentile([r[key] for r in rows], int(q[1:])), 1)
               for key in ("first_text_ms", "end_ms", "retrieval_ms", "after_retrieval_ms") for q in ("p50", "p95")},
        }
        if json:
            self.stdout.write(jsonlib.dumps(report))
            return
        for key, value in report.items():
            self.stdout.write(f"{key:<22} {value}")

    async def _ask(self, tenant: Tenant, query: dict[str, Any], relevant: set[str], graph: bool) -> dict[str, Any]:
        session: ChatSession = await db_step(chat_session_create, tenant=tenant, principal=PRINCIPAL)
        session.tenant = tenant
        prompt = str(query["text"])
        started = time.perf_counter()
        first: float | None = None
        parts: list[str] = []
        completed: dict[str, Any] = {}
        # The operator's full view (reader None), as the timed retrieval below and `evaluate` without --as.
        events = answer_stream(session=session, prompt=prompt, reader=None, options=RetrievalOptions.of(graph_search=graph))
        try:
            async with aclosing(events):
                async for event in events:
                    if event["event"] == "text_delta":
                        first = first or time.perf_counter()
                        parts.append(event["data"]["text"])
                    elif event["event"] == "completed":
                        completed = dict(event["data"])
                    elif event["event"] == "error":
                        raise CommandError(f"{query['_id']}: {event['data']['detail']}")
            end = time.perf_counter()
            retrieval_started = time.perf_counter()
            await retrieve(tenant=tenant, prompt=prompt, options=RetrievalOptions(graph=graph))
            retrieval_ms = 1000 * (time.perf_counter() - retrieval_started)
        finally:
            await db_step(lambda: ChatSession.objects.filter(pk=session.pk).delete())
        # The answer as stored (its markers renumbered like its citations); the streamed text keeps the model's.
        text = str((completed.get("message") or {}).get("content") or "".join(parts))
        documents = list(dict.fromkeys(c["document_id"] for c in completed.get("citations", [])))
        hits = len(set(documents) & relevant)
        return {
            "model": completed.get("model"), "contained": contains_answer(text, str(query["answer"])), "cited": documents,
            "precision": hits / len(documents) if documents else 0.0, "recall": hits / len(relevant) if relevant else 0.0,
            "chars": len(text), "first_text_ms": 1000 * ((first or end) - started), "end_ms": 1000 * (end - started),
            "retrieval_ms": retrieval_ms, "after_retrieval_ms": max(0.0, 1000 * (end - started) - retrieval_ms),
        }
