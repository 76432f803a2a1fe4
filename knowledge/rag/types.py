"""Value types of the RAG API. All frozen, all validated on construction.

Construction is the validation: a ``RAGQuery`` or ``RAGDocument`` that exists is
within every bound of DESIGN section 4, so backends never re-validate input.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from knowledge.graph.types import GraphLeg
from knowledge.rag import limits
from knowledge.rag.errors import RAGTypeError, RAGValidationError

Scalar: TypeAlias = str | int | float | bool
Metadata: TypeAlias = Mapping[str, Scalar]
FilterValue: TypeAlias = Scalar | tuple[Scalar, ...]
Filters: TypeAlias = Mapping[str, FilterValue]
Vector: TypeAlias = tuple[float, ...]
Trigger: TypeAlias = Literal["user", "agent"]
EmbedKind: TypeAlias = Literal["document", "query"]


class SearchMode(str, Enum):
    KEYWORD = "keyword"
    SEMANTIC = "semantic"
    HYBRID = "hybrid"

    @classmethod
    def parse(cls, value: SearchMode | str) -> SearchMode:
        try:
            return cls(value)
        except ValueError:
            raise RAGValidationError("mode", f"must be one of keyword, semantic, hybrid; got {value!r}") from None


# --- validators -------------------------------------------------------------------


def check_identifier(field_name: str, value: object, pattern: Any, what: str) -> str:
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string, got {type(value).__name__}")
    if not pattern.match(value):
        raise RAGValidationError(field_name, f"{value[:80]!r} is not a valid {what}")
    return value


def check_text(field_name: str, value: object, max_chars: int) -> str:
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        raise RAGValidationError(field_name, "must not be empty")
    if len(value) > max_chars:
        raise RAGValidationError(field_name, f"at most {max_chars} characters allowed, got {len(value)}")
    if "\x00" in value:
        raise RAGValidationError(field_name, "must not contain NUL characters")
    return value


def _check_optional_text(field_name: str, value: object, max_chars: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string or null, got {type(value).__name__}")
    if len(value) > max_chars:
        raise RAGValidationError(field_name, f"at most {max_chars} characters allowed, got {len(value)}")
    return value


def check_scalar(field_name: str, value: object) -> Scalar:
    """str, int, finite float or bool; anything nested is a type error."""
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise RAGValidationError(field_name, "must be a finite number (no NaN or infinity)")
        return value
    if isinstance(value, str):
        if len(value) > limits.MAX_METADATA_STRING_CHARS:
            raise RAGValidationError(field_name, f"at most {limits.MAX_METADATA_STRING_CHARS} characters allowed")
        return value
    if isinstance(value, Mapping | list | tuple | set):
        raise RAGTypeError(field_name, "nested values are not allowed; use str, int, float or bool")
    raise RAGTypeError(field_name, f"must be str, int, float or bool, got {type(value).__name__}")


def check_metadata(value: object, field_name: str = "metadata") -> Mapping[str, Scalar]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise RAGTypeError(field_name, f"must be an object of scalar values, got {type(value).__name__}")
    if len(value) > limits.MAX_FIELDS:
        raise RAGValidationError(field_name, f"at most {limits.MAX_FIELDS} fields allowed, got {len(value)}")
    checked: dict[str, Scalar] = {}
    for key, item in value.items():
        name = check_identifier(f"{field_name} field", key, limits.FIELD_RE, "field name (letters, digits, _; at most 64)")
        checked[name] = check_scalar(f"{field_name}.{name}", item)
    return MappingProxyType(checked)


def check_filters(value: object) -> Mapping[str, FilterValue]:
    """``{field: scalar}`` is equality, ``{field: [a, b]}`` membership (1..100 values)."""
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise RAGTypeError("filters", f"must be an object, got {type(value).__name__}")
    if len(value) > limits.MAX_FIELDS:
        raise RAGValidationError("filters", f"at most {limits.MAX_FIELDS} fields allowed, got {len(value)}")
    checked: dict[str, FilterValue] = {}
    for key, item in value.items():
        name = check_identifier("filters field", key, limits.FIELD_RE, "field name (letters, digits, _; at most 64)")
        if isinstance(item, list | tuple | set | frozenset):
            members = list(item)
            if not members:
                raise RAGValidationError(f"filters.{name}", "a membership filter needs at least 1 value")
            if len(members) > limits.MAX_MEMBERS:
                raise RAGValidationError(f"filters.{name}", f"at most {limits.MAX_MEMBERS} values per membership filter, got {len(members)}")
            checked[name] = tuple(check_scalar(f"filters.{name}", m) for m in members)
        else:
            checked[name] = check_scalar(f"filters.{name}", item)
    return MappingProxyType(checked)


def check_vector(value: object, field_name: str = "vector") -> Vector:
    if isinstance(value, str | bytes | Mapping) or not hasattr(value, "__iter__"):
        raise RAGTypeError(field_name, "must be a sequence of numbers")
    items = list(value)  # type: ignore[call-overload]
    if not items:
        raise RAGValidationError(field_name, "must not be empty")
    if len(items) > limits.MAX_VECTOR_DIMENSIONS:
        raise RAGValidationError(field_name, f"at most {limits.MAX_VECTOR_DIMENSIONS} dimensions allowed, got {len(items)}")
    out: list[float] = []
    for item in items:
        if isinstance(item, bool | str | bytes) or not hasattr(item, "__float__"):
            raise RAGTypeError(field_name, f"values must be numbers, got {type(item).__name__}")
        number = float(item)
        if not math.isfinite(number):
            raise RAGValidationError(field_name, "values must be finite (no NaN or infinity)")
        out.append(number)
    return tuple(out)


def check_limit(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise RAGTypeError("limit", f"must be an integer, got {type(value).__name__}")
    if not 1 <= value <= limits.MAX_LIMIT:
        raise RAGValidationError("limit", f"must be between 1 and {limits.MAX_LIMIT}, got {value}")
    return value


def check_min_score(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RAGTypeError("min_score", f"must be a number or null, got {type(value).__name__}")
    if not math.isfinite(value):
        raise RAGValidationError("min_score", "must be finite")
    return float(value)


# --- value types ------------------------------------------------------------------


@dataclass(frozen=True)
class RAGDocument:
    """A document to ingest. ``id`` is the caller's stable identifier."""

    id: str
    text: str
    title: str | None = None
    uri: str | None = None
    metadata: Metadata = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_identifier("id", self.id, limits.DOCUMENT_ID_RE, "document id (letters, digits, ._:/@+=-; at most 200)")
        check_text(f"documents[{self.id}].text", self.text, limits.MAX_CHARS_PER_DOCUMENT)
        _check_optional_text("title", self.title, limits.MAX_TITLE_CHARS)
        _check_optional_text("uri", self.uri, limits.MAX_URI_CHARS)
        object.__setattr__(self, "metadata", check_metadata(self.metadata))


@dataclass(frozen=True)
class RAGChunk:
    """A stored piece of a document. ``chunk_id`` is ``<document_id>:<n>``, n from 0 in source order."""

    chunk_id: str
    document_id: str
    namespace: str
    text: str
    title: str | None = None
    uri: str | None = None
    metadata: Metadata = field(default_factory=dict)
    embedding: Vector | None = None
    start_char: int | None = None
    end_char: int | None = None

    def __post_init__(self) -> None:
        check_identifier("chunk_id", self.chunk_id, limits.CHUNK_ID_RE, "chunk id ('<document id>:<n>')")
        check_identifier("document_id", self.document_id, limits.DOCUMENT_ID_RE, "document id")
        check_identifier("namespace", self.namespace, limits.NAMESPACE_RE, "namespace")
        check_text("text", self.text, limits.MAX_CHARS_PER_CHUNK)
        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        if self.embedding is not None:
            object.__setattr__(self, "embedding", check_vector(self.embedding, "embedding"))

    @property
    def ordinal(self) -> int:
        return int(self.chunk_id.rsplit(":", 1)[1])


@dataclass(frozen=True)
class RAGHit:
    """A search result. ``score`` is what the mode ranks by (BM25, cosine or RRF)."""

    chunk: RAGChunk
    score: float
    rrf_score: float | None = None
    rrf_rank: int | None = None
    semantic_similarity: float | None = None
    keyword_score: float | None = None
    # Set when the graph leg ranked the chunk: its activation, and the entities that led to it.
    graph_score: float | None = None
    graph_path: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.chunk, RAGChunk):
            raise RAGTypeError("chunk", "must be a RAGChunk")
        if isinstance(self.score, bool) or not isinstance(self.score, int | float) or not math.isfinite(self.score):
            raise RAGValidationError("score", "must be a finite number")


@dataclass(frozen=True)
class RAGQuery:
    """A validated search request for one namespace."""

    text: str
    namespace: str
    mode: SearchMode = SearchMode.HYBRID
    limit: int = 8
    filters: Filters = field(default_factory=dict)
    min_score: float | None = None
    vector: Vector | None = None
    rrf_k: int = 60
    rerank: bool = False
    embedding_model: str | None = None
    graph: bool = False  # add the graph leg (hybrid mode only)

    def __post_init__(self) -> None:
        check_text("query", self.text, limits.MAX_QUERY_CHARS)
        check_identifier("namespace", self.namespace, limits.NAMESPACE_RE, "namespace")
        object.__setattr__(self, "mode", SearchMode.parse(self.mode))
        check_limit(self.limit)
        object.__setattr__(self, "filters", check_filters(self.filters))
        object.__setattr__(self, "min_score", check_min_score(self.min_score))
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or not 1 <= self.rrf_k <= 1000:
            raise RAGValidationError("rrf_k", "must be an integer between 1 and 1000")
        if self.vector is not None:
            object.__setattr__(self, "vector", check_vector(self.vector))
        elif self.mode is not SearchMode.KEYWORD:
            raise RAGValidationError("vector", f"{self.mode.value} search needs a query vector (configure an embedder)")
        if self.graph and self.mode is not SearchMode.HYBRID:
            raise RAGValidationError("graph_search", f"graph search joins hybrid search; it cannot be used with mode {self.mode.value}")


@dataclass(frozen=True)
class PreparedChunk:
    """A chunk ready to store: text, offsets, content hash and its embedding (if any)."""

    chunk_id: str
    ordinal: int
    text: str
    start_char: int
    end_char: int
    content_hash: str
    embedding: Vector | None
    embedding_model: str | None


@dataclass(frozen=True)
class PreparedDocument:
    """A document and all its chunks, validated and embedded, handed to ``RAGBackend.replace``."""

    document: RAGDocument
    content_hash: str
    chunks: tuple[PreparedChunk, ...]


# --- protocols --------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. ``model_id`` is stored with every vector it makes."""

    model_id: str
    dimension: int | None

    async def embed(self, texts: Sequence[str], *, kind: EmbedKind = "document") -> list[list[float]]: ...


@runtime_checkable
class Chunker(Protocol):
    """Splits a document into chunk texts, in source order. Each text is a substring of the document."""

    def split(self, document: RAGDocument) -> list[str]: ...


@runtime_checkable
class RAGBackend(Protocol):
    """Storage and search for chunks, per namespace.

    ``replace`` swaps each document's chunks completely and atomically;
    ``known_embeddings`` lets the service skip re-embedding unchanged chunks.
    """

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def replace(self, namespace: str, documents: Sequence[PreparedDocument], *, actor: str | None, trigger: Trigger) -> int: ...

    async def delete(self, namespace: str, document_ids: Sequence[str], *, actor: str | None, trigger: Trigger) -> int: ...

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[RAGChunk]: ...

    async def search(self, query: RAGQuery) -> list[RAGHit]: ...

    async def known_embeddings(self, namespace: str, document_ids: Sequence[str], model_id: str) -> dict[tuple[str, str], Vector]: ...


@dataclass(frozen=True)
class GraphSearchResult:
    """A hybrid search with the graph leg: the fused hits, and what the leg found (its diagnostics)."""

    hits: list[RAGHit]
    leg: GraphLeg
