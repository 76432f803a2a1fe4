"""Shared set-up for the benchmark scripts: Django, a throwaway tenant, realistic text."""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCIFACT = ROOT.parent / "shared" / "data" / "scifact" / "corpus.jsonl"


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


def passages(count: int, words_per: int, seed: int = 0) -> list[str]:
    """``count`` passages of consecutive real text (random windows over the pool)."""
    pool = word_pool()
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        start = rng.randrange(0, max(1, len(pool) - words_per))
        out.append(" ".join(pool[start : start + words_per]))
    return out


def emit(result: dict[str, object]) -> None:
    print(json.dumps(result, indent=2))
