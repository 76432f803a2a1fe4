"""Shared set-up for the benchmark scripts: Django, a throwaway tenant, realistic text."""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
# ../shared beside a clone, or beside the folder of worktrees.
SCIFACT = next((p for p in (ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl",
                            ROOT.parent.parent / "shared" / "data" / "scifact" / "corpus.jsonl") if p.exists()),
               ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl")


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DEBUG", "1")  # benchmarks run locally; production settings need a real key
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    import django

    django.setup()


@contextmanager
def bench_tenant(slug: str, keep: bool = False) -> Iterator[object]:
    """A fresh tenant for the run, deleted (with everything in it) afterwards unless ``keep``."""
    from accounts.models import Tenant
    from accounts.services import tenant_create

    Tenant.objects.filter(slug=slug).delete()
    tenant, _ = tenant_create(slug=slug)
    try:
        yield tenant
    finally:
        if not keep:
            try:
                Tenant.objects.filter(slug=slug).delete()
            except Exception as exc:  # noqa: BLE001 - a failed clean-up must not lose the measurements
                print(f"could not delete bench tenant {slug}: {exc}", file=sys.stderr)


def word_pool(limit_docs: int = 5183) -> list[str]:
    """Words of real scientific abstracts (SciFact), in order, for text with natural term statistics."""
    words: list[str] = []
    if SCIFACT.exists():
        with SCIFACT.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= limit_docs:
                    break
                record = json.loads(line)
                words += f"{record.get('title', '')} {record.get('text', '')}".split()
    if not words:  # without the dataset: a Zipf-like synthetic vocabulary
        rng = random.Random(0)
        vocab = [f"term{i}" for i in range(20000)]
        words = [vocab[min(int(rng.paretovariate(1.1)) - 1, 19999)] for _ in range(500_000)]
    return words


def passages(count: int, words_per: int, seed: int = 0, *, distinct: bool = False) -> list[str]:
    """``count`` passages of consecutive real text (random windows over the pool).

    ``distinct``: no two windows start at the same word (drawn without replacement), so no two
    passages are equal; a benchmark that maps texts to vectors needs that (1,000,000 windows drawn
    with replacement from SciFact's 1.1 million words repeat about a third of them). Needs
    ``count`` below the pool's size."""
    pool = word_pool()
    rng = random.Random(seed)
    if distinct:
        starts = rng.sample(range(max(1, len(pool) - words_per)), count)
    else:
        starts = [rng.randrange(0, max(1, len(pool) - words_per)) for _ in range(count)]
    return [" ".join(pool[start : start + words_per]) for start in starts]


def emit(result: dict[str, object]) -> None:
    print(json.dumps(result, indent=2))


def pctl(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def summary(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50_ms": round(pctl(values, 50), 1), "p95_ms": round(pctl(values, 95), 1), "max_ms": round(max(values), 1),
            "mean_ms": round(statistics.fmean(values), 1)}


class TableEmbedder:
    """Hands out precomputed vectors by text (the model cost was paid up front)."""

    dimension = 384

    def __init__(self, table: dict[str, list[float]], model_id: str) -> None:
        self.table = table
        self.model_id = model_id

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        return [self.table[t] for t in texts]


def perturbed(base: np.ndarray, count: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit vectors: the rows of ``base`` in turn, each with Gaussian noise of ``sigma`` per dimension."""
    vectors = base[np.arange(count) % len(base)] + rng.normal(0, sigma, size=(count, base.shape[1]))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def index_perturbed_corpus(tenant_slug: str, count: int, base_count: int, *, seed: int = 31) -> float:
    """Index ``count`` windows of real text whose vectors are perturbed real embeddings
    (``base_count`` embedded by the local model, filed under its id), and index them all;
    returns seconds."""
    from asgiref.sync import async_to_sync
    from django.db import connection

    from knowledge import rag
    from knowledge.services.indexing import backlog_index
    from knowledge.rag.embedding import LOCAL_MODEL_ID

    texts = passages(count, words_per=120, seed=seed)
    base = np.array(async_to_sync(rag.LocalEmbedder().embed)(texts[:base_count]), dtype=np.float64)
    rng = np.random.default_rng(seed)
    vectors = perturbed(base, count, 0.04, rng)
    service = rag.postgres(TableEmbedder({t: vectors[i].tolist() for i, t in enumerate(texts)}, LOCAL_MODEL_ID),
                           namespace=tenant_slug)
    started = time.perf_counter()
    for start in range(0, count, 1000):
        docs = [rag.RAGDocument(f"c{i}", texts[i]) for i in range(start, min(start + 1000, count))]
        async_to_sync(service.ingest)(docs)
    # Requests of 1,000 documents leave postings and HNSW entries to the indexer: run it
    # to the end, as the workers would, so searches measure the indexed steady state.
    backlog_index(namespace=tenant_slug)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_chunk, knowledge_posting, knowledge_termstat")  # as autovacuum would, soon after a bulk load
    return time.perf_counter() - started
