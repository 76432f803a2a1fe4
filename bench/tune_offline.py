"""Tune the offline model's sentence selection (chat.llm.selection.Tuning) on a BEIR folder with answers.

    .venv/bin/python bench/tune_offline.py ../shared/data/musique --tenant musique [--grid]

Retrieves each question's passages once, the way ``chat.retrieval.retrieve`` does (default
settings), then replays only the offline model over them with each setting: the gold answer
contained, citation precision/recall against the qrels, cannot-answer share, mean length and
the model's p50/p95 time after retrieval. As in the chat pipeline, the hits' similarities to
the question (``chat.retrieval.similarities``, handed to the offline model as data) stand for their sentences', so nothing is
embedded when retrieval was semantic or hybrid; the vectors path (the agent's) is what runs
when no hit carries a similarity. The
tenant must hold the corpus (``manage.py evaluate DIR --tenant SLUG`` ingests it). The
end-to-end figures are ``manage.py evaluate_answers``'s; this is for choosing parameters.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

from _common import setup_django

setup_django()

from asgiref.sync import async_to_sync  # noqa: E402

from accounts.models import Tenant  # noqa: E402
from chat.management.commands.evaluate_answers import _jsonl, _qrels, contains_answer, percentile  # noqa: E402
from chat.retrieval import retrieve, similarities  # noqa: E402
from chat.prompting import CitationMarkers, build_messages  # noqa: E402
from chat.llm import offline  # noqa: E402
from chat.llm.offline import extractive_answer_async  # noqa: E402
from chat.llm.selection import Tuning  # noqa: E402


def run(cases: list[tuple[dict, list, set[str]]], tuning: Tuning) -> dict[str, float]:
    contained, precision, recall, cannot, chars, times, cited_n = [], [], [], [], [], [], []
    for query, hits, relevant in cases:
        messages = build_messages(template="default", hits=hits, memory=[], prompt=query["text"])
        # As chat.pipeline.answer_stream does: the hits' similarities stand for their sentences'.
        started = time.perf_counter()
        text = async_to_sync(extractive_answer_async)(messages, similarity=similarities(hits) or None, tuning=tuning)
        times.append(1000 * (time.perf_counter() - started))
        markers = CitationMarkers(len(hits))
        text = markers.feed(text) + markers.flush()
        documents = list(dict.fromkeys(hits[n - 1].chunk.document_id for n in markers.used))
        found = len(set(documents) & relevant)
        contained.append(contains_answer(text, query["answer"]))
        if documents:
            precision.append(found / len(documents))
        recall.append(found / len(relevant))
        cannot.append(not documents)
        chars.append(len(text))
        cited_n.append(len(documents))
    return {"answer_contained": round(statistics.fmean(contained), 3),
            "citation_precision": round(statistics.fmean(precision), 3) if precision else 0.0,
            "citation_recall": round(statistics.fmean(recall), 3), "citations_per_answer": round(statistics.fmean(cited_n), 2),
            "cannot_answer": round(statistics.fmean(cannot), 3), "mean_chars": round(statistics.fmean(chars), 1),
            "model_p50_ms": round(percentile(times, 50), 1), "model_p95_ms": round(percentile(times, 95), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--grid", action="store_true", help="Try a grid of settings instead of the defaults only.")
    args = parser.parse_args()
    tenant = Tenant.objects.get(slug=args.tenant)
    judged = _qrels(args.folder / "qrels.tsv")
    queries = [q for q in _jsonl(args.folder / "queries.jsonl") if q.get("answer") and q["_id"] in judged]
    cases = [(q, async_to_sync(retrieve)(tenant=tenant, prompt=q["text"])[0], judged[q["_id"]]) for q in queries]
    settings = [Tuning()]
    if args.grid:
        settings += [dataclasses.replace(Tuning(), max_chars=c, hop_weight=h, stop_ratio=r, type_weight=t)
                     for c, h, r, t in itertools.product((260, 300, 340, 420), (0.5, 0.8, 1.2), (0.5, 0.6), (0.15, 0.3))]
    real_embed = offline._embed
    cache: dict[tuple[str, ...], list[list[float]] | None] = {}

    async def cached_embed(texts: list[str]) -> list[list[float]] | None:
        if tuple(texts) not in cache:
            cache[tuple(texts)] = await real_embed(texts)
        return cache[tuple(texts)]

    for index, tuning in enumerate(settings):
        if index == 1:  # the first setting is timed with real embedding; the grid reuses its vectors
            offline._embed = cached_embed  # type: ignore[assignment]
        row = {"passage_floor": tuning.passage_floor, "passage_weight": tuning.passage_weight, "stop_ratio": tuning.stop_ratio,
               "type_weight": tuning.type_weight, "title_weight": tuning.title_weight, "hop_weight": tuning.hop_weight,
               "max_units": tuning.max_units, "max_chars": tuning.max_chars, **run(cases, tuning)}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    sys.exit(main())
