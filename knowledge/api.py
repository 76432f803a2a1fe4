"""REST endpoints for the knowledge base: search and fetch (readers); documents (readers read, editors write).

Request bodies are closed (a field an endpoint does not declare is a 400) and typed as sent
(``config.serializers``); the bounds are the RAG API's own (``knowledge.rag``), checked once,
with its messages, and stated in the OpenAPI schema as JSON Schema (patterns, lengths).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiRequest, extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantEditor, IsTenantReader
from config.db import release_connection
from config.parsers import BoundedJSONField
from config.serializers import (
    ClosedSerializer,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
    TenantField,
)
from knowledge import rag
from knowledge.models import API_STATUSES, CANCELLED_PHASES, Document
from knowledge.rag import limits
from knowledge.rag.types import MAX_FUSION_WEIGHT
from knowledge.selectors import chunk_fetch, chunk_graph_search, chunk_search, document_list, graph_picture
from knowledge.services.documents import DocumentInputError, document_delete_many, document_ingest, document_upload_create

# Offsets past this are refused (PostgreSQL's OFFSET is a bigint; no tenant holds a billion documents).
MAX_OFFSET = 1_000_000_000


class EmbeddingUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "embedding_unavailable"
    default_detail = "The embedding model failed; keyword search still works."


def rag_error_to_api(exc: rag.RAGError) -> exceptions.APIException:
    """Translate the RAG API's errors into HTTP ones; every bound becomes a 400 naming its field."""
    if isinstance(exc, rag.RAGValidationError | rag.RAGTypeError):
        return exceptions.ValidationError({exc.field: [exc.message]})
    if isinstance(exc, rag.ConfigurationError):
        return exceptions.ValidationError({"mode": [str(exc)]})
    if isinstance(exc, rag.EmbedderError):
        return EmbeddingUnavailable(f"The embedding model failed: {exc}")
    raise exc


def document_id_in_url(document_id: str) -> str:
    """A document id from a URL, checked as ids in bodies are (a lookup: any id that could be stored)."""
    if not limits.DOCUMENT_ID_RE.fullmatch(document_id):
        raise exceptions.ValidationError({"document_id": [f"{document_id[:80]!r} is not a valid document id."]})
    return document_id


# --- JSON Schema of the RAG API's values ---------------------------------------------------------

SCALAR_SCHEMA: dict[str, Any] = {"anyOf": [
    {"type": "string", "maxLength": limits.MAX_METADATA_STRING_CHARS, "pattern": limits.TEXT_PATTERN},
    {"type": "number"},
    {"type": "boolean"},
]}
FIELDS_SCHEMA: dict[str, Any] = {"maxProperties": limits.MAX_FIELDS, "propertyNames": {"pattern": limits.FIELD_PATTERN, "maxLength": 64}}


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA, "additionalProperties": SCALAR_SCHEMA,
    "description": "Flat metadata: field names of letters, digits and _; values text, numbers or true/false.",
})
class MetadataField(serializers.DictField):
    """An object; its names and values are checked by the RAG API (messages name ``metadata.<field>``)."""


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA,
    "additionalProperties": {"anyOf": [
        *SCALAR_SCHEMA["anyOf"],
        {"type": "array", "minItems": 1, "maxItems": limits.MAX_MEMBERS, "items": SCALAR_SCHEMA},
    ]},
    "description": '{"field": value} is equality, {"field": [a, b]} membership; fields AND together.',
})
class FiltersField(serializers.DictField):
    pass


def _string(pattern: str, max_length: int, *, min_length: int = 1, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": min_length, "maxLength": max_length, "pattern": pattern}
    return {**schema, "description": description} if description else schema


@extend_schema_field(_string(limits.NON_BLANK_TEXT_PATTERN, limits.MAX_QUERY_CHARS,
                             description="The question or keywords: not blank, no control characters but tab and line breaks."))
class QueryField(StrictCharField):
    pass


@extend_schema_field(_string(limits.CHUNK_ID_PATTERN, limits.MAX_CHUNK_ID_CHARS, description=(
    "A chunk id ('<document id>:<n>' for Quarry's own chunks): letters, digits and ._:/@+=-, at most 207.")))
class ChunkIdField(StrictCharField):
    pass


@extend_schema_field(_string(limits.DOCUMENT_ID_PATTERN, 200, description=(
    "The caller's id: letters, digits and ._:/@+=-, at most 200; '/'-separated parts are neither empty nor only dots.")))
class NewDocumentIdField(StrictCharField):
    pass


@extend_schema_field(_string(limits.DOCUMENT_TEXT_PATTERN, limits.MAX_CHARS_PER_DOCUMENT, description="Not blank, no NUL."))
class DocumentTextField(StrictCharField):
    pass


@extend_schema_field({"type": ["string", "null"], "maxLength": limits.MAX_TITLE_CHARS, "pattern": limits.LINE_PATTERN})
class TitleField(StrictCharField):
    pass


@extend_schema_field({"type": ["string", "null"], "maxLength": limits.MAX_URI_CHARS, "pattern": limits.LINE_PATTERN})
class UriField(StrictCharField):
    pass


# --- Search and fetch ------------------------------------------------------------------------------


class FusionField(serializers.ChoiceField):
    """Hybrid search's fusion (``rag.Fusion``); null or absent: the server's default (QUARRY_HYBRID_FUSION)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            choices=[f.value for f in rag.Fusion], required=False, allow_null=True, default=None,
            help_text="Hybrid mode: how the keyword and semantic lists are merged. rrf: Reciprocal Rank Fusion (ranks). score: each "
                      "list's scores normalised (0..1), keyword + fusion_weight x semantic, each list's first hits kept within the "
                      "first places. Absent: the server's default.",
            **kwargs,
        )


class FusionWeightField(StrictFloatField):
    """Score fusion's weight of the semantic list, 0..``MAX_FUSION_WEIGHT``; null or absent: the server's default."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            required=False, allow_null=True, default=None, min_value=0.0, max_value=MAX_FUSION_WEIGHT,
            help_text=f"With fusion score: the semantic list's weight (0..{MAX_FUSION_WEIGHT:g}). Absent: the server's default.",
            **kwargs,
        )


def check_fusion_request(attrs: dict[str, Any]) -> dict[str, Any]:
    """A request's fusion fields agree with its mode and graph_search (errors name the field)."""
    fusion, weight = attrs.get("fusion"), attrs.get("fusion_weight")
    mode = attrs.get("mode", rag.SearchMode.HYBRID.value)
    if (fusion is not None or weight is not None) and mode != rag.SearchMode.HYBRID.value:
        field = "fusion" if fusion is not None else "fusion_weight"
        raise exceptions.ValidationError({field: [f"fusion applies to hybrid search; it cannot be used with mode {mode}"]})
    if weight is not None and fusion == rag.Fusion.RRF.value:
        raise exceptions.ValidationError({"fusion_weight": ["fusion_weight applies to score fusion; this request asks for rrf"]})
    return attrs


class ChunkSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    document_id = serializers.CharField()
    title = serializers.CharField(allow_null=True)
    uri = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    metadata = MetadataField()
    start_char = serializers.IntegerField(allow_null=True)
    end_char = serializers.IntegerField(allow_null=True)


class SearchHitSerializer(ChunkSerializer):
    score = serializers.FloatField(help_text="What the mode ranks by: BM25 (keyword), cosine (semantic), or in hybrid mode "
                                             "RRF or, with fusion score, keyword_norm + fusion_weight x semantic_norm.")
    rrf_rank = serializers.IntegerField(allow_null=True, help_text="Hybrid mode: the hit's rank under RRF, whichever fusion ordered the page.")
    semantic_similarity = serializers.FloatField(allow_null=True)
    keyword_norm = serializers.FloatField(required=False, help_text="Hybrid mode with fusion score: the keyword leg's part, its BM25 "
                                                                    "as a share of the list's best (against its last when the list "
                                                                    "was cut at the fusion depth; 0 when not in it).")
    semantic_norm = serializers.FloatField(required=False, help_text="Hybrid mode with fusion score: the semantic leg's part, its cosine "
                                                                     "min-max normalised within the leg's list over a range of at least "
                                                                     "0.1 (0 when not in it).")
    graph_path = serializers.ListField(child=serializers.CharField(), required=False,
                                       help_text="With graph_search, for a hit the graph leg ranked: the entities that led to it.")


class GraphEntitySerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()


class GraphRelationSerializer(serializers.Serializer):
    subject = serializers.CharField()
    predicate = serializers.CharField()
    object = serializers.CharField()
    chunk_id = serializers.CharField(help_text="The passage that states it.")


class GraphLegSerializer(serializers.Serializer):
    used = serializers.BooleanField(help_text="Whether the graph leg reached any entity.")
    named = GraphEntitySerializer(many=True, help_text="Entities the query names.")
    nodes = GraphEntitySerializer(many=True, help_text="Entities the expansion went through.")
    relations = GraphRelationSerializer(many=True)


def chunk_json(chunk: rag.RAGChunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.chunk_id, "document_id": chunk.document_id, "title": chunk.title, "uri": chunk.uri,
        "text": chunk.text, "metadata": dict(chunk.metadata), "start_char": chunk.start_char, "end_char": chunk.end_char,
    }


class SearchInputSerializer(ClosedSerializer):
    """A search: the query, and optionally mode, limit, metadata filters, a score floor and the tenant."""

    query = QueryField(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False)
    mode = serializers.ChoiceField(choices=[m.value for m in rag.SearchMode], default=rag.SearchMode.HYBRID.value)
    limit = StrictIntegerField(min_value=1, max_value=limits.MAX_LIMIT, default=8)
    filters = FiltersField(required=False, default=dict)
    min_score = StrictFloatField(required=False, allow_null=True, default=None, help_text="Drop hits scored below this.")
    graph_search = StrictBooleanField(
        default=False, help_text="Hybrid mode only: fuse in the knowledge graph's leg (passages reached through the entities "
                                 "the query and its top hits name); hits it ranked carry graph_path.",
    )
    fusion = FusionField()
    fusion_weight = FusionWeightField()
    tenant = TenantField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return check_fusion_request(attrs)


class SearchOutputSerializer(serializers.Serializer):
    hits = SearchHitSerializer(many=True)
    graph = GraphLegSerializer(required=False, help_text="With graph_search: what the graph leg went through.")


class SearchApi(APIView):
    permission_classes = [IsTenantReader]
    throttle_scope = "search"

    @extend_schema(operation_id="search", request=SearchInputSerializer, responses={200: SearchOutputSerializer},
                   summary="Search the tenant's chunks (keyword, semantic or hybrid; optionally with the knowledge graph), best first")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = SearchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v["graph_search"] and v["mode"] != rag.SearchMode.HYBRID.value:
            raise exceptions.ValidationError({"graph_search": [f"graph search joins hybrid search; it cannot be used with mode {v['mode']}"]})
        graph: dict[str, Any] | None = None
        # Sign-in, throttle and tenant are read: give the pooled connection back while the query is
        # embedded (CPU, the longest step under load); the search takes one again for its SQL.
        release_connection()
        try:
            if v["graph_search"]:
                result = chunk_graph_search(tenant=ctx.tenant, query=v["query"], limit=v["limit"], filters=v["filters"],
                                            min_score=v["min_score"], fusion=v.get("fusion"), fusion_weight=v.get("fusion_weight"))
                hits = result.hits
                graph = {
                    "used": bool(result.leg.entities),
                    "named": [{"name": n.name, "type": n.type} for n in result.leg.named],
                    "nodes": [{"name": n.name, "type": n.type} for n in result.leg.nodes],
                    "relations": [{"subject": r.subject, "predicate": r.predicate, "object": r.object, "chunk_id": r.chunk_id}
                                  for r in result.leg.relations],
                }
            else:
                hits = chunk_search(tenant=ctx.tenant, query=v["query"], mode=v["mode"], limit=v["limit"],
                                    filters=v["filters"], min_score=v["min_score"], fusion=v["fusion"],
                                    fusion_weight=v["fusion_weight"])
        except rag.ConfigurationError as exc:
            raise exceptions.ValidationError({"graph_search" if v["graph_search"] else "mode": [str(exc)]}) from None
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        body: dict[str, Any] = {"hits": [_hit_json(h) for h in hits]}
        if graph is not None:
            body["graph"] = graph
        return Response(body)


def _hit_json(hit: rag.RAGHit) -> dict[str, Any]:
    out = {**chunk_json(hit.chunk), "score": hit.score, "rrf_rank": hit.rrf_rank, "semantic_similarity": hit.semantic_similarity}
    if hit.keyword_norm is not None and hit.semantic_norm is not None:
        out["keyword_norm"], out["semantic_norm"] = hit.keyword_norm, hit.semantic_norm
    if hit.graph_path:
        out["graph_path"] = list(hit.graph_path)
    return out


class GraphPictureInputSerializer(ClosedSerializer):
    ids = serializers.ListField(child=ChunkIdField(max_length=limits.MAX_CHUNK_ID_CHARS), allow_empty=False, min_length=1, max_length=limits.MAX_LIMIT)
    expand = StrictBooleanField(default=False, help_text="Also the other documents' passages that mention the entities.")
    tenant = TenantField()


class PicturePassageSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    document_id = serializers.CharField()
    title = serializers.CharField()
    focus = serializers.BooleanField(help_text="One of the passages asked about.")


class PictureEntitySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField()


class PictureLinkSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    entity = serializers.IntegerField(help_text="The id of an entity of the picture: the passage mentions it.")


class GraphPictureOutputSerializer(serializers.Serializer):
    passages = PicturePassageSerializer(many=True)
    entities = PictureEntitySerializer(many=True)
    links = PictureLinkSerializer(many=True)


class GraphPictureApi(APIView):
    """How passages connect through the entities they mention (the pages' graph picture)."""

    permission_classes = [IsTenantReader]

    @extend_schema(request=GraphPictureInputSerializer, responses={200: GraphPictureOutputSerializer},
                   summary="How passages connect through the entities they mention")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = GraphPictureInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            picture = graph_picture(tenant=ctx.tenant, chunk_ids=data.validated_data["ids"], expand=data.validated_data["expand"])
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response(picture.as_json())


class ChunkFetchInputSerializer(ClosedSerializer):
    """Chunk ids to fetch, at most 1,000."""

    ids = serializers.ListField(child=ChunkIdField(max_length=limits.MAX_CHUNK_ID_CHARS), allow_empty=False, min_length=1, max_length=limits.MAX_FETCH_IDS)
    tenant = TenantField()


class ChunkFetchOutputSerializer(serializers.Serializer):
    chunks = ChunkSerializer(many=True, help_text="In the order asked for; ids that do not exist (here) are left out.")


class ChunkFetchApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(operation_id="chunks_fetch", request=ChunkFetchInputSerializer, responses={200: ChunkFetchOutputSerializer},
                   summary="Fetch chunks by id, in order")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = ChunkFetchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            chunks = chunk_fetch(tenant=ctx.tenant, ids=data.validated_data["ids"])
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"chunks": [chunk_json(c) for c in chunks]})


# --- Documents: synchronous ingest, background uploads, status, delete -----------------------------


class CancelledSerializer(serializers.Serializer):
    phase = serializers.ChoiceField(choices=CANCELLED_PHASES, allow_null=True, help_text=(
        "Where the work was when it was cancelled: queued, processing (claimed, not yet extracting), extracting, "
        "embedding or indexing; null for a document cancelled before Quarry kept the phase."))


class DocumentSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The id the caller chose.")
    title = serializers.CharField(allow_blank=True)
    uri = serializers.CharField(allow_blank=True)
    status = serializers.ChoiceField(choices=API_STATUSES, help_text=(
        "queued, processing, ready, failed (see error), or cancelled (an editor cancelled the latest request; "
        "see cancelled.phase). The chunks of the last version that landed stay searchable whatever the status."))
    progress = serializers.FloatField(help_text="0..1 while processing; 1 when ready.")
    error = serializers.CharField(allow_blank=True, help_text="Why the latest request failed, as a sentence naming the file; empty otherwise.")
    cancelled = CancelledSerializer(allow_null=True, help_text=(
        "Set when the latest request was cancelled (admin action; status `cancelled`), with the phase it was in. "
        "Null otherwise."))
    chunk_count = serializers.IntegerField(help_text="Chunks currently searchable (the last version that landed).")
    metadata = MetadataField()
    updated_at = serializers.DateTimeField()


def document_json(document: Document) -> dict[str, Any]:
    return {
        "id": document.external_id, "title": document.title, "uri": document.uri, "status": document.api_status,
        "progress": document.progress, "error": document.error,
        "cancelled": {"phase": document.phase or None} if document.cancelled else None,
        "chunk_count": document.chunk_count, "metadata": document.metadata, "updated_at": document.updated_at,
    }


def _input_error(exc: DocumentInputError) -> exceptions.ValidationError:
    return exceptions.ValidationError({exc.field: [exc.message]})


class _ReadOrEdit(APIView):
    """Readers may read; writing needs the editor role."""

    def get_permissions(self) -> list[Any]:
        return [IsTenantReader()] if self.request.method in ("GET", "HEAD", "OPTIONS") else [IsTenantEditor()]


class DocumentInputSerializer(ClosedSerializer):
    """One document: its id and text, optionally a title, a URI and metadata."""

    # Types and shapes only: the bounds are the RAG API's, checked once, with its messages.

    id = NewDocumentIdField(trim_whitespace=False)
    text = DocumentTextField(trim_whitespace=False)
    title = TitleField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    uri = UriField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    metadata = MetadataField(required=False, default=dict)


class DocumentIngestInputSerializer(ClosedSerializer):
    """The ingest body as the view reads it first (each document is then checked on its own)."""

    # Items are validated one by one in the view, so errors read "documents[3].text" like the RAG API's own.
    documents = serializers.ListField(allow_empty=False, min_length=1, max_length=limits.MAX_DOCUMENTS_PER_INGEST)
    tenant = TenantField()


class DocumentIngestSchemaSerializer(ClosedSerializer):
    """Documents to index now, each replacing an earlier version of the same id."""

    # What the schema shows for the ingest body; the view checks the items one by one.

    documents = DocumentInputSerializer(many=True, allow_empty=False, min_length=1, max_length=limits.MAX_DOCUMENTS_PER_INGEST, help_text=(
        f"1 to {limits.MAX_DOCUMENTS_PER_INGEST} documents with distinct ids; at most {limits.MAX_CHARS_PER_INGEST:,} "
        f"characters and {limits.MAX_CHUNKS_PER_INGEST:,} chunks in all."))
    tenant = TenantField()


class DocumentIngestOutputSerializer(serializers.Serializer):
    chunks = serializers.IntegerField()
    document_ids = serializers.ListField(child=serializers.CharField())


class DocumentListQuerySerializer(ClosedSerializer):
    """The list's query string (any other parameter is refused)."""

    status = serializers.ChoiceField(choices=API_STATUSES, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=50)
    offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)
    tenant = TenantField()


class DocumentListOutputSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    documents = DocumentSerializer(many=True)


class DocumentListApi(_ReadOrEdit):
    throttle_scope = {"POST": "ingest"}

    @extend_schema(
        operation_id="documents_list", parameters=[DocumentListQuerySerializer], responses={200: DocumentListOutputSerializer},
        summary="List the tenant's documents, newest first (paginated, filter by status)",
    )
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        query = DocumentListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        v = query.validated_data
        documents = document_list(tenant=ctx.tenant, status=v.get("status"))
        count = documents.count()
        page = list(documents[v["offset"] : v["offset"] + v["limit"]])
        url = request.build_absolute_uri()
        following = v["offset"] + v["limit"]
        return Response({
            "count": count,
            "next": replace_query_param(url, "offset", following) if following < count else None,
            "previous": replace_query_param(url, "offset", max(0, v["offset"] - v["limit"])) if v["offset"] else None,
            "documents": [document_json(d) for d in page],
        })

    @extend_schema(
        operation_id="documents_ingest", request=DocumentIngestSchemaSerializer, responses={200: DocumentIngestOutputSerializer},
        summary="Index documents now (editor): replaces earlier versions; every bound is a 400 naming it",
    )
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = DocumentIngestInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        documents = []
        for index, raw in enumerate(data.validated_data["documents"]):
            item = DocumentInputSerializer(data=raw)
            if not item.is_valid():
                raise exceptions.ValidationError({
                    f"documents[{index}]" if field == "non_field_errors" else f"documents[{index}].{field}": errors
                    for field, errors in item.errors.items()
                })
            item = item.validated_data
            try:
                documents.append(rag.RAGDocument(
                    item["id"], item["text"], title=item.get("title") or None, uri=item.get("uri") or None,
                    metadata=item.get("metadata") or {},
                ))
            except (rag.RAGValidationError, rag.RAGTypeError) as exc:
                # "documents[<id>].text" and "title" alike become "documents[<index>].<field>".
                leaf = exc.field.split("].", 1)[1] if exc.field.startswith("documents[") else exc.field
                raise exceptions.ValidationError({f"documents[{index}].{leaf}": [exc.message]}) from None
        try:
            chunks = document_ingest(tenant=ctx.tenant, documents=documents, actor=_actor(ctx))
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"chunks": chunks, "document_ids": [d.id for d in documents]})


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA, "additionalProperties": SCALAR_SCHEMA,
    "description": 'A JSON object of scalar values (a part of type application/json), applied to every file, e.g. {"team": "support"}.',
})
class MetadataJSONField(BoundedJSONField):
    """The metadata part of an upload: JSON text, parsed with the JSON bounds."""


@extend_schema_field(_string(limits.DOCUMENT_ID_PATTERN, 200))
class UploadIdField(serializers.CharField):
    pass


@extend_schema_field(_string(limits.LINE_PATTERN, limits.MAX_TITLE_CHARS, min_length=0))
class UploadTitleField(serializers.CharField):
    pass


@extend_schema_field(_string(limits.LINE_PATTERN, limits.MAX_URI_CHARS, min_length=0))
class UploadUriField(serializers.CharField):
    pass


# Django refuses a request with more files than this (DATA_UPLOAD_MAX_NUMBER_FILES, QUARRY_MAX_UPLOAD_FILES).
MAX_UPLOAD_FILES = min(limits.MAX_DOCUMENTS_PER_INGEST, settings.DATA_UPLOAD_MAX_NUMBER_FILES)


class DocumentUploadInputSerializer(ClosedSerializer):
    """Files to upload (multipart), with optional ids, metadata, and a title and URI for a single file."""

    files = serializers.ListField(child=serializers.FileField(allow_empty_file=True, use_url=False), allow_empty=False, min_length=1,
                                  max_length=MAX_UPLOAD_FILES)
    ids = serializers.ListField(child=UploadIdField(trim_whitespace=False), required=False, max_length=MAX_UPLOAD_FILES,
                                help_text="One per file, in order; replaces what holds the id. Default: from the file names (a file "
                                          "replaces only the document of the same name).")
    metadata = MetadataJSONField(required=False)
    title = UploadTitleField(required=False, allow_blank=True, default="", help_text="Single file only; default: from the file.")
    uri = UploadUriField(required=False, allow_blank=True, default="", help_text="Single file only.")
    tenant = TenantField()


class DocumentUploadOutputSerializer(serializers.Serializer):
    document_ids = serializers.ListField(child=serializers.CharField())


class DocumentUploadApi(APIView):
    permission_classes = [IsTenantEditor]
    parser_classes = [MultiPartParser, FormParser]
    throttle_scope = "ingest"

    @extend_schema(
        operation_id="documents_upload",
        request={"multipart/form-data": OpenApiRequest(DocumentUploadInputSerializer, encoding={"metadata": {"contentType": "application/json"}})},
        responses={202: DocumentUploadOutputSerializer},
        summary="Upload files for background processing (editor); poll GET /v1/documents/{id}",
        description="Each file at most QUARRY_UPLOAD_MAX_BYTES (a larger one: 413, and nothing is stored); `ids` "
                    "(one per file) default to ids from the file names (`café.txt` -> `cafe.txt`; letters an id cannot hold give "
                    "8 hex digits of the name's hash: `笔记.txt` -> `cda88b16.txt`); a file replaces only the document of the "
                    "same file name, and takes the hashed id when its readable one belongs to another file. `title` and `uri` apply to a single file only. "
                    f"A file's text may hold up to {limits.MAX_CHARS_PER_DOCUMENT:,} characters and be cut into up to "
                    f"{limits.MAX_CHUNKS_PER_INGEST:,} chunks: one over a bound ends `failed`, before any embedding, "
                    "with an `error` that states these limits.",
    )
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = DocumentUploadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            documents = document_upload_create(
                tenant=ctx.tenant, files=v["files"], actor=_actor(ctx), document_ids=v.get("ids") or None,
                title=v["title"], uri=v["uri"], metadata=v.get("metadata"),
            )
        except DocumentInputError as exc:
            raise _input_error(exc) from None
        return Response({"document_ids": [d.external_id for d in documents]}, status=status.HTTP_202_ACCEPTED)


DOCUMENT_ID_PARAMETER = OpenApiParameter(
    "document_id", OpenApiTypes.STR, OpenApiParameter.PATH,
    description="The document's id (it may contain '/'; send it percent-encoded).",
    pattern=limits.DOCUMENT_ID_LOOKUP_PATTERN,
)
TENANT_PARAMETER = OpenApiParameter(
    "tenant", {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"}, OpenApiParameter.QUERY, required=False,
    description="Tenant slug; default: the token's tenant.",
)


class DocumentDetailApi(_ReadOrEdit):
    @extend_schema(operation_id="documents_retrieve", parameters=[DOCUMENT_ID_PARAMETER, TENANT_PARAMETER],
                   responses={200: DocumentSerializer}, summary="One document's status and progress")
    def get(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document = get_for_tenant(Document.objects.all(), tenant=ctx.tenant, external_id=document_id_in_url(document_id))
        return Response(document_json(document))

    @extend_schema(operation_id="documents_destroy", parameters=[DOCUMENT_ID_PARAMETER, TENANT_PARAMETER],
                   responses={204: None}, summary="Delete a document and its chunks (editor; audited)")
    def delete(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document = get_for_tenant(Document.objects.all(), tenant=ctx.tenant, external_id=document_id_in_url(document_id))
        document_delete_many(documents=[document], actor=_actor(ctx))
        return Response(status=status.HTTP_204_NO_CONTENT)


def _actor(ctx: TenantContext) -> str:
    """The audit actor: the user, and the token when one was used."""
    name = ctx.user.get_username() if ctx.user.is_authenticated else "anonymous"
    return f"{name} (token {ctx.token.prefix})" if ctx.token else name
