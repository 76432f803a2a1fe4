"""Value types of the RAG API. All frozen, all validated on construction.

Construction is the validation: a ``RAGQuery`` or ``RAGDocument`` that exists is
within every bound of DESIGN section 4, so backends never re-validate input.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from knowledge.rag.graph_types import GraphLeg
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


class Fusion(str, Enum):
    """How hybrid search merges its two ranked lists (each the leg's top ``FUSION_DEPTH``).

    - ``rrf``: Reciprocal Rank Fusion, ``1/(rrf_k + keyword rank) + 1/(rrf_k + semantic rank)``
      (ranks only; the default).
    - ``score``: normalised score fusion, ``keyword_norm + fusion_weight * semantic_norm``, each
      leg's scores normalised by that leg's own evidence (best 1; the keyword list against 0 when it
      holds every match, the semantic list over a range of at least ``SEMANTIC_SPREAD_FLOOR`` so a
      plateau is not stretched into a ranking) and 0 for a chunk missing from that list; each leg's
      first hits are kept within the first places (``knowledge.rag.fusion.score_fusion``).
    """

    RRF = "rrf"
    SCORE = "score"

    @classmethod
    def parse(cls, value: Fusion | str) -> Fusion:
        try:
            return cls(value)
        except ValueError:
            raise RAGValidationError("fusion", f"must be one of rrf, score; got {value!r}") from None


# The semantic leg's weight in score fusion: chosen on SciFact's train split and MuSiQue (README).
DEFAULT_FUSION_WEIGHT = 1.5
MAX_FUSION_WEIGHT = 100.0


def check_fusion_weight(value: object) -> float:
    """A finite number in 0..100 (0: keyword order, semantic only breaks ties among keyword misses)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RAGTypeError("fusion_weight", f"must be a number, got {type(value).__name__}")
    if not math.isfinite(value) or not 0 <= value <= MAX_FUSION_WEIGHT:
        raise RAGValidationError("fusion_weight", f"must be a number between 0 and {MAX_FUSION_WEIGHT:g}, got {value!r}")
    return float(value)


# --- validators -------------------------------------------------------------------


def check_identifier(field_name: str, value: object, pattern: Any, what: str) -> str:
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string, got {type(value).__name__}")
    if not pattern.fullmatch(value):
        raise RAGValidationError(field_name, f"{value[:80]!r} is not a valid {what}")
    return value


def check_new_document_id(field_name: str, value: object) -> str:
    """The id of a document being created or replaced: ``limits.is_document_id`` (no ``.``, ``..`` or empty
    ``/`` segments). Lookups and deletions accept any id matching the pattern, so older ids stay reachable."""
    check_identifier(field_name, value, limits.DOCUMENT_ID_RE, DOCUMENT_ID_WHAT)
    if not limits.is_document_id(value):
        raise RAGValidationError(field_name, f"{str(value)[:80]!r} is not a valid document id: '/'-separated parts must not be empty, '.' or '..'")
    return value  # type: ignore[return-value]


DOCUMENT_ID_WHAT = "document id (letters, digits, ._:/@+=-; at most 200)"


def check_characters(field_name: str, value: str, controls: Any = None) -> str:
    """Refuse what PostgreSQL cannot store (NUL, unpaired surrogates) and, with ``controls`` (a
    pattern of limits), control characters; the message names the first one found."""
    found = limits.UNSTORABLE_RE.search(value) or (controls.search(value) if controls is not None else None)
    if found is not None:
        char = found.group()
        if char == "\x00":
            raise RAGValidationError(field_name, "must not contain NUL characters")
        if "\ud800" <= char <= "\udfff":
            raise RAGValidationError(field_name, "must be valid Unicode (it holds an unpaired surrogate)")
        raise RAGValidationError(field_name, f"must not contain control characters (found U+{ord(char):04X})")
    return value


def check_text(field_name: str, value: object, max_chars: int, per: str = "allowed", controls: Any = None) -> str:
    """A non-empty string of at most ``max_chars`` (the message says ``at most N characters <per>``) that
    PostgreSQL can store; with ``controls``, without control characters."""
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string, got {type(value).__name__}")
    if len(value) > max_chars:
        raise RAGValidationError(field_name, f"at most {max_chars} characters {per}, got {len(value)}")
    if not value.strip():
        raise RAGValidationError(field_name, "must not be empty")
    return check_characters(field_name, value, controls)


def _check_optional_text(field_name: str, value: object, max_chars: int) -> str | None:
    """Titles and URIs: single lines, so no control characters at all."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise RAGTypeError(field_name, f"must be a string or null, got {type(value).__name__}")
    if len(value) > max_chars:
        raise RAGValidationError(field_name, f"at most {max_chars} characters allowed, got {len(value)}")
    return check_characters(field_name, value, limits.LINE_CONTROL_RE)


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
        return check_characters(field_name, value, limits.CONTROL_RE)
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


def check_offsets(start: object, end: object) -> None:
    """Both None, or ``0 <= start < end`` integers."""
    if start is None and end is None:
        return
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (start, end)):
        raise RAGTypeError("start_char", "start_char and end_char must both be integers or both be null")
    if not 0 <= start < end:  # type: ignore[operator]
        raise RAGValidationError("start_char", f"offsets must satisfy 0 <= start_char < end_char, got {start}..{end}")


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
        # The seed's bounds in the order of its list (characters, metadata fields, identifiers), then the rest.
        label = self.id if isinstance(self.id, str) and limits.DOCUMENT_ID_RE.match(self.id) else "?"
        check_text(f"documents[{label}].text", self.text, limits.MAX_CHARS_PER_DOCUMENT, "per document")
        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        check_new_document_id("id", self.id)
        _check_optional_text("title", self.title, limits.MAX_TITLE_CHARS)
        _check_optional_text("uri", self.uri, limits.MAX_URI_CHARS)


@dataclass(frozen=True)
class RAGChunk:
    """A stored piece of a document. ``chunk_id`` is ``<document_id>:<n>``, n from 0 in source order.

    Equality and hashing use the seed's eight fields (``chunk_id`` .. ``embedding``), so a
    chunk a caller writes equals the one a backend returns. ``start_char``/``end_char`` are
    Quarry's extras, outside equality: where the chunk is a verbatim slice of its document,
    ``document.text[start_char:end_char] == text``; both are None when it is not (a custom
    chunker may return any text) or when the backend does not know.
    """

    chunk_id: str
    document_id: str
    namespace: str
    text: str
    title: str | None = None
    uri: str | None = None
    metadata: Metadata = field(default_factory=dict)
    embedding: Vector | None = None
    start_char: int | None = field(default=None, compare=False)
    end_char: int | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # The seed's bounds in the order of its list (characters, vector, metadata, identifiers), then the rest.
        check_text("text", self.text, limits.MAX_CHARS_PER_CHUNK, "per chunk")
        if self.embedding is not None:
            object.__setattr__(self, "embedding", check_vector(self.embedding, "embedding"))
        object.__setattr__(self, "metadata", check_metadata(self.metadata))
        check_identifier("chunk_id", self.chunk_id, limits.CHUNK_ID_RE, limits.CHUNK_ID_WHAT)
        check_identifier("document_id", self.document_id, limits.DOCUMENT_ID_RE, "document id")
        check_identifier("namespace", self.namespace, limits.NAMESPACE_RE, "namespace")
        _check_optional_text("title", self.title, limits.MAX_TITLE_CHARS)
        _check_optional_text("uri", self.uri, limits.MAX_URI_CHARS)
        check_offsets(self.start_char, self.end_char)

    def __hash__(self) -> int:
        # The dataclass hash would hash the metadata mapping, which is not hashable.
        return hash((self.chunk_id, self.document_id, self.namespace, self.text, self.title, self.uri,
                     frozenset(self.metadata.items()), self.embedding))

    @property
    def ordinal(self) -> int:
        return int(self.chunk_id.rsplit(":", 1)[1])


@dataclass(frozen=True)
class RAGHit:
    """A search result. ``score`` is what the mode ranks by (BM25, cosine, RRF or the fused score).

    Hybrid hits carry ``rrf_score`` / ``rrf_rank`` (the chunk's RRF score and rank, whichever
    fusion ordered the page), ``semantic_similarity`` and ``keyword_score`` (None: not in the
    keyword leg's list). With score fusion they also carry its parts: ``keyword_norm`` and
    ``semantic_norm`` (0..1; 0 for a chunk missing from that leg's list), so that
    ``score == keyword_norm + fusion_weight * semantic_norm``, or more for a leg's first hit that
    fusion kept within the first places (``fusion.score_fusion``); both are None otherwise.
    """

    chunk: RAGChunk
    score: float
    rrf_score: float | None = None
    rrf_rank: int | None = None
    semantic_similarity: float | None = None
    keyword_score: float | None = None
    # Set when the graph leg ranked the chunk: its activation, and the entities that led to it.
    graph_score: float | None = None
    graph_path: tuple[str, ...] | None = None
    keyword_norm: float | None = None
    semantic_norm: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.chunk, RAGChunk):
            raise RAGTypeError("chunk", "must be a RAGChunk")
        if isinstance(self.score, bool) or not isinstance(self.score, int | float) or not math.isfinite(self.score):
            raise RAGValidationError("score", "must be a finite number")


# Access lists (issue 34): a document's ``access`` and its chunks' hold principals, and a reader
# reads a chunk when the two share one. Every reader holds EVERYONE, which an unrestricted document
# lists (its default), so "no list means the whole tenant" is one array overlap (``&&``) in SQL.
EVERYONE = "*"


def user_principal(user_id: int) -> str:
    return f"u:{int(user_id)}"


def group_principal(group_id: int) -> str:
    return f"g:{int(group_id)}"


@dataclass(frozen=True)
class Reader:
    """Who reads a tenant's namespace, for its restricted documents: a user (None: anonymous) and the
    ids of the tenant's groups they belong to, resolved for one request.

    A service or query without a reader is trusted code and sees every chunk; with one, search,
    fetch and the graph see only chunks whose access list names ``principals``' any.

    ``member`` False (``Reader.nobody()``): someone who is no member of the tenant (any more), e.g. the
    owner of a conversation or agent run who was removed from it. They read nothing, not even what the
    whole tenant reads: their ``principals`` are empty, so the access test of every statement matches no chunk.
    """

    user_id: int | None
    group_ids: tuple[int, ...] = ()
    member: bool = True

    def __post_init__(self) -> None:
        if self.user_id is not None and (isinstance(self.user_id, bool) or not isinstance(self.user_id, int)):
            raise RAGTypeError("reader", "user_id must be an int or None")
        groups = tuple(self.group_ids)
        if any(isinstance(g, bool) or not isinstance(g, int) for g in groups):
            raise RAGTypeError("reader", "group_ids must be ints")
        if not isinstance(self.member, bool):
            raise RAGTypeError("reader", "member must be a bool")
        if groups and not self.member:
            raise RAGTypeError("reader", "a reader who is no member belongs to no group of the tenant")
        object.__setattr__(self, "group_ids", tuple(sorted(set(groups))))

    @classmethod
    def nobody(cls, user_id: int | None = None) -> Reader:
        """The reader of someone who is no member of the tenant: reads no chunk at all."""
        return cls(user_id, (), member=False)

    @property
    def principals(self) -> list[str]:
        """The principals an access list may name for this reader: ``EVERYONE`` always among them for a
        member, none at all for ``nobody()`` (an empty list overlaps no access list)."""
        if not self.member:
            return []
        own = [user_principal(self.user_id)] if self.user_id is not None else []
        return [EVERYONE, *own, *(group_principal(g) for g in self.group_ids)]


@dataclass(frozen=True)
class ResolvedNamespace:
    """A namespace whose tenant was found once for the whole request: the tenant's id and slug (the
    namespace), the model id of its vectors ("" before the first ones) and how many chunks it holds.

    Read in one statement (``knowledge.rag.factory.resolve_namespace``); a backend that stores by
    tenant uses it instead of looking the slug up again (``RAGQuery.resolved``).
    """

    tenant_id: int
    slug: str
    model: str
    chunks: int
    # Whether any of its chunks is restricted (an access list other than the whole tenant's): when none
    # is, a reader's access test (still in every statement) cannot shorten a page, so the plan skips the
    # short-page precautions it takes for filters. Unknown (True) unless the resolution read it.
    restricted: bool = True


@dataclass(frozen=True)
class RAGQuery:
    """A validated search request for one namespace (``resolved``: its tenant, when already found)."""

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
    fusion: Fusion = Fusion.RRF  # how hybrid mode merges its legs (Fusion)
    fusion_weight: float = DEFAULT_FUSION_WEIGHT  # the semantic leg's weight in score fusion
    resolved: ResolvedNamespace | None = field(default=None, compare=False)
    # Whose search this is (None: trusted code, every chunk): the backend filters by it in SQL.
    reader: Reader | None = None

    def __post_init__(self) -> None:
        # The seed's bounds in the order of its list (limit, query text, filter fields and
        # members, identifiers), then everything else.
        check_limit(self.limit)
        check_text("query", self.text, limits.MAX_QUERY_CHARS, controls=limits.CONTROL_RE)
        object.__setattr__(self, "filters", check_filters(self.filters))
        check_identifier("namespace", self.namespace, limits.NAMESPACE_RE, "namespace")
        object.__setattr__(self, "mode", SearchMode.parse(self.mode))
        object.__setattr__(self, "min_score", check_min_score(self.min_score))
        if isinstance(self.rrf_k, bool) or not isinstance(self.rrf_k, int) or not 1 <= self.rrf_k <= 1000:
            raise RAGValidationError("rrf_k", "must be an integer between 1 and 1000")
        object.__setattr__(self, "fusion", Fusion.parse(self.fusion))
        object.__setattr__(self, "fusion_weight", check_fusion_weight(self.fusion_weight))
        if self.vector is not None:
            object.__setattr__(self, "vector", check_vector(self.vector))
        elif self.mode is not SearchMode.KEYWORD:
            raise RAGValidationError("vector", f"{self.mode.value} search needs a query vector (configure an embedder)")
        if self.graph and self.mode is not SearchMode.HYBRID:
            raise RAGValidationError("graph_search", f"graph search joins hybrid search; it cannot be used with mode {self.mode.value}")
        if self.reader is not None and not isinstance(self.reader, Reader):
            raise RAGTypeError("reader", f"must be a Reader or None, got {type(self.reader).__name__}")
        if self.resolved is not None and self.resolved.slug != self.namespace:
            raise RAGValidationError("namespace", f"resolved as {self.resolved.slug!r}, not {self.namespace!r}")


@dataclass(frozen=True)
class PreparedChunk:
    """A chunk ready to store: text, offsets (None: not a verbatim slice), content hash and its embedding (if any)."""

    chunk_id: str
    ordinal: int
    text: str
    start_char: int | None
    end_char: int | None
    content_hash: str
    embedding: Vector | None
    embedding_model: str | None


@dataclass(frozen=True)
class PreparedDocument:
    """A document and all its chunks, validated and embedded, handed to ``RAGBackend.replace``."""

    document: RAGDocument
    content_hash: str
    chunks: tuple[PreparedChunk, ...]
    # The namespace's model the service embedded for ("" for a namespace without vectors), when it
    # follows the namespace's model (``RAGService(embedder_for_model=...)``): a backend that tracks
    # the model refuses the write (``EmbeddingModelChanged``) once the namespace is on another one.
    # None: the caller chose its embedder; its vectors land whatever the namespace's model.
    namespace_model: str | None = None


@dataclass(frozen=True)
class Stored:
    """What a write stored, and the background work it left for the layer above to queue.

    ``chunks``: how many chunks it stored. ``backlog``: some of them still await their postings
    and HNSW entries (the indexer's work). ``extracted``: the write extracted chunks into the
    knowledge graph (the optional LLM pass may have new texts). The backend never queues work
    itself: it cannot see the services above it; the caller queues it once the write commits.
    """

    chunks: int
    backlog: bool = False
    extracted: bool = False


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def embedding_input(title: str | None, chunk_text: str) -> str:
    """What the embedder sees for a chunk: the document title, then the chunk.

    The title places a chunk cut from the middle of a long document in context.
    A chunk's ``content_hash`` is the hash of this text, so a changed title or
    chunk text means a new embedding and nothing else does.
    """
    return f"{title}\n\n{chunk_text}" if title else chunk_text



@dataclass(frozen=True)
class GraphSearchResult:
    """A hybrid search with the graph leg: the fused hits, and what the leg found (its diagnostics)."""

    hits: list[RAGHit]
    leg: GraphLeg


# The embedder-identity helpers moved to knowledge.rag.protocols with the protocols they read; chat
# still names these four as ``rag.types.*`` (its retrieval is being rewritten meanwhile, issue 32 item 6).
# Imported last: protocols imports this module's value types, all defined by now.
from knowledge.rag.protocols import DEFAULT_RELEVANCE_FLOOR, calibrated_similarity, declared_model_id, relevance_floor  # noqa: E402
