"""Embedders written the way an API user would write one (the Embedder protocol is public).

They stand in for a model only where a test is about our contract, not about
embedding quality; tests about quality use the real local model.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import re
from collections.abc import Sequence
from typing import Any

from knowledge.rag import BgeSmallEmbedder, LocalEmbedder

_WORD = re.compile(r"[a-z0-9]+")


class BagOfWordsEmbedder:
    """Feature-hashed bag of words: texts sharing words are close. Deterministic."""

    def __init__(self, dimension: int = 64, model_id: str = "test/bag-of-words") -> None:
        self.dimension = dimension
        self.model_id = model_id
        self.calls: list[list[str]] = []

    @property
    def texts_embedded(self) -> int:
        return sum(len(c) for c in self.calls)

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        self.calls.append(list(texts))
        return [self.vector(t) for t in texts]

    def vector(self, text: str) -> list[float]:
        v = [0.0] * self.dimension
        for word in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v[h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
        if not any(v):
            v[0] = 1.0
        norm = math.sqrt(sum(x * x for x in v))
        return [x / norm for x in v]


class GatedEmbedder(BagOfWordsEmbedder):
    """A model server whose query embeddings take ``query_seconds``; counts how many were in flight at once."""

    def __init__(self, query_seconds: float = 0.3) -> None:
        super().__init__(model_id="test/gated")
        self.query_seconds = query_seconds
        self.in_flight = self.peak = 0

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        if kind == "query":
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            await asyncio.sleep(self.query_seconds)
            self.in_flight -= 1
        return await super().embed(texts, kind=kind)


class BrokenEmbedder(BagOfWordsEmbedder):
    """Returns the wrong thing in a chosen way: 'short', 'nan', 'dims', 'raise', 'zero'."""

    def __init__(self, fault: str) -> None:
        super().__init__()
        self.fault = fault

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        vectors = await super().embed(texts, kind=kind)
        if self.fault == "raise":
            raise RuntimeError("model server exploded")
        if self.fault == "short":
            return vectors[:-1]
        if self.fault == "nan":
            vectors[0][0] = float("nan")
        if self.fault == "dims":
            vectors[-1] = vectors[-1][:-1]
        if self.fault == "zero":
            vectors[0] = [0.0] * self.dimension
        return vectors


class _Recording:
    """Records each ``embed`` call's texts (``calls``; ``texts``: all of them, in order), then embeds
    with the real model it is mixed into: for tests about which texts get embedded, where the model's
    vectors and calibration (its relevance floor) must be the real ones. Configured by dotted path
    (``QUARRY_EMBEDDER``), as a deployment configures its provider."""

    calls: list[list[str]]

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)  # type: ignore[call-arg]
        self.calls = []

    @property
    def texts(self) -> list[str]:
        return [text for call in self.calls for text in call]

    async def embed(self, texts: Sequence[str], *, kind: str = "document") -> list[list[float]]:
        self.calls.append(list(texts))
        return await super().embed(texts, kind=kind)  # type: ignore[misc]


class RecordingLocalEmbedder(_Recording, LocalEmbedder):
    """The real all-MiniLM-L6-v2, recording what it embeds."""


class RecordingBgeEmbedder(_Recording, BgeSmallEmbedder):
    """The real bge-small (same model id and vectors), recording what it embeds."""
