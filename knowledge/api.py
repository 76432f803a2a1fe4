"""REST endpoints for the knowledge base: search and fetch (readers); documents (readers read, editors write)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantEditor, IsTenantReader
from knowledge import rag
from knowledge.models import Document, DocumentStatus
from knowledge.services.documents import DocumentInputError, document_delete_many, document_ingest, document_upload_create
from knowledge.rag import limits
from knowledge.selectors import chunk_fetch, chunk_graph_search, chunk_search, document_list, graph_picture


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


class ChunkOutputSerializer(serializers.Serializer):
    chunk_id = serializers.CharField()
    document_id = serializers.CharField()
    title = serializers.CharField(allow_null=True)
    uri = serializers.CharField(allow_null=True)
    text = serializers.CharField()
    metadata = serializers.DictField()
    start_char = serializers.IntegerField(allow_null=True)
    end_char = serializers.IntegerField(allow_null=True)


def chunk_json(chunk: rag.RAGChunk) -> dict[str, Any]:
    return {
        "chunk_id": chunk.chunk_id, "document_id": chunk.document_id, "title": chunk.title, "uri": chunk.uri,
        "text": chunk.text, "metadata": dict(chunk.metadata), "start_char": chunk.start_char, "end_char": chunk.end_char,
    }


class SearchApi(APIView):
    permission_classes = [IsTenantReader]

    class InputSerializer(serializers.Serializer):
        query = serializers.CharField(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False)
        mode = serializers.ChoiceField(choices=[m.value for m in rag.SearchMode], default=rag.SearchMode.HYBRID.value)
        limit = serializers.IntegerField(min_value=1, max_value=limits.MAX_LIMIT, default=8)
        filters = serializers.DictField(required=False, default=dict)
        min_score = serializers.FloatField(required=False, allow_null=True, default=None)
        graph_search = serializers.BooleanField(
            default=False, help_text="Hybrid mode only: fuse in the knowledge graph's leg (chunks reached through the entities "
                                     "the query and its top hits name); hits it ranked carry graph_path.",
        )
        tenant = serializers.CharField(required=False)

    class HitSerializer(ChunkOutputSerializer):
        score = serializers.FloatField()
        rrf_rank = serializers.IntegerField(allow_null=True)
        semantic_similarity = serializers.FloatField(allow_null=True)
        graph_path = serializers.ListField(child=serializers.CharField(), required=False, help_text="With graph_search: the entities that led to it.")

    class OutputSerializer(serializers.Serializer):
        hits = serializers.ListField(child=serializers.DictField())
        graph = serializers.DictField(required=False, help_text="With graph_search: {used, nodes, relations} of the graph leg.")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer}, summary="Search the tenant's chunks")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        if v["graph_search"] and v["mode"] != rag.SearchMode.HYBRID.value:
            raise exceptions.ValidationError({"graph_search": [f"graph search joins hybrid search; it cannot be used with mode {v['mode']}"]})
        graph: dict[str, Any] | None = None
        try:
            if v["graph_search"]:
                result = chunk_graph_search(tenant=ctx.tenant, query=v["query"], limit=v["limit"], filters=v["filters"],
                                            min_score=v["min_score"])
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
                                    filters=v["filters"], min_score=v["min_score"])
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
    if hit.graph_path:
        out["graph_path"] = list(hit.graph_path)
    return out


class GraphPictureApi(APIView):
    """How passages connect through the entities they mention (the pages' graph picture)."""

    permission_classes = [IsTenantReader]

    class InputSerializer(serializers.Serializer):
        ids = serializers.ListField(child=serializers.CharField(max_length=210), allow_empty=False, max_length=limits.MAX_LIMIT)
        expand = serializers.BooleanField(default=False, help_text="Also the other documents' passages that mention the entities.")
        tenant = serializers.CharField(required=False)

    class OutputSerializer(serializers.Serializer):
        passages = serializers.ListField(child=serializers.DictField(), help_text="{chunk_id, document_id, title, focus}")
        entities = serializers.ListField(child=serializers.DictField(), help_text="{id, name, type}")
        links = serializers.ListField(child=serializers.DictField(), help_text="{chunk_id, entity}: the passage mentions the entity")

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer}, summary="How passages connect through entities")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            picture = graph_picture(tenant=ctx.tenant, chunk_ids=data.validated_data["ids"], expand=data.validated_data["expand"])
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response(picture.as_json())


class ChunkFetchApi(APIView):
    permission_classes = [IsTenantReader]

    class InputSerializer(serializers.Serializer):
        ids = serializers.ListField(child=serializers.CharField(max_length=210), allow_empty=False, max_length=limits.MAX_FETCH_IDS)
        tenant = serializers.CharField(required=False)

    @extend_schema(request=InputSerializer, responses={200: ChunkOutputSerializer(many=True)}, summary="Fetch chunks by id, in order")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            chunks = chunk_fetch(tenant=ctx.tenant, ids=data.validated_data["ids"])
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"chunks": [chunk_json(c) for c in chunks]})


# --- Documents: synchronous ingest, background uploads, status, delete -----------------------------


class DocumentOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The id the caller chose.")
    title = serializers.CharField()
    uri = serializers.CharField()
    status = serializers.ChoiceField(choices=DocumentStatus.choices)
    progress = serializers.FloatField(help_text="0..1 while processing; 1 when ready.")
    error = serializers.CharField(help_text="Why the latest request failed, as a sentence naming the file; empty otherwise.")
    chunk_count = serializers.IntegerField(help_text="Chunks currently searchable (the last version that landed).")
    metadata = serializers.DictField()
    updated_at = serializers.DateTimeField()


def document_json(document: Document) -> dict[str, Any]:
    return {
        "id": document.external_id, "title": document.title, "uri": document.uri, "status": document.status,
        "progress": document.progress, "error": document.error, "chunk_count": document.chunk_count,
        "metadata": document.metadata, "updated_at": document.updated_at,
    }


def _input_error(exc: DocumentInputError) -> exceptions.ValidationError:
    return exceptions.ValidationError({exc.field: [exc.message]})


class _ReadOrEdit(APIView):
    """Readers may read; writing needs the editor role."""

    def get_permissions(self) -> list[Any]:
        return [IsTenantReader()] if self.request.method in ("GET", "HEAD", "OPTIONS") else [IsTenantEditor()]


class DocumentInputSerializer(serializers.Serializer):
    """Types only: the bounds are the RAG API's, checked once, with its messages."""

    id = serializers.CharField(trim_whitespace=False)
    text = serializers.CharField(trim_whitespace=False)
    title = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    uri = serializers.CharField(required=False, allow_null=True, allow_blank=True, trim_whitespace=False)
    metadata = serializers.DictField(required=False, default=dict)


class DocumentListApi(_ReadOrEdit):
    class InputSerializer(serializers.Serializer):
        # Items are validated one by one in the view, so errors read "documents[3].text" like the RAG API's own.
        documents = serializers.ListField(allow_empty=False, max_length=limits.MAX_DOCUMENTS_PER_INGEST)
        tenant = serializers.CharField(required=False)

    class DocumentIngestInputSerializer(serializers.Serializer):
        documents = DocumentInputSerializer(many=True)
        tenant = serializers.CharField(required=False)

    class DocumentIngestOutputSerializer(serializers.Serializer):
        chunks = serializers.IntegerField()
        document_ids = serializers.ListField(child=serializers.CharField())

    class DocumentListQuerySerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=DocumentStatus.choices, required=False)
        limit = serializers.IntegerField(min_value=1, max_value=100, default=50)
        offset = serializers.IntegerField(min_value=0, default=0)
        tenant = serializers.CharField(required=False)

    class DocumentListOutputSerializer(serializers.Serializer):
        count = serializers.IntegerField()
        next = serializers.URLField(allow_null=True)
        previous = serializers.URLField(allow_null=True)
        documents = DocumentOutputSerializer(many=True)

    @extend_schema(
        operation_id="documents_list", parameters=[DocumentListQuerySerializer], responses={200: DocumentListOutputSerializer},
        summary="List the tenant's documents, newest first (paginated, filter by status)",
    )
    def get(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        query = self.DocumentListQuerySerializer(data=request.query_params)
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
        operation_id="documents_ingest", request=DocumentIngestInputSerializer, responses={200: DocumentIngestOutputSerializer},
        summary="Index documents now (editor): replaces earlier versions; every bound is a 400 naming it",
    )
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.InputSerializer(data=request.data)
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


class DocumentUploadApi(APIView):
    permission_classes = [IsTenantEditor]
    parser_classes = [MultiPartParser, FormParser]

    class DocumentUploadInputSerializer(serializers.Serializer):
        files = serializers.ListField(child=serializers.FileField(allow_empty_file=True, use_url=False), allow_empty=False)
        ids = serializers.ListField(child=serializers.CharField(), required=False, help_text="One per file, in order; default: from the file names.")
        metadata = serializers.JSONField(required=False, help_text="A JSON object of scalar values, applied to every file.")
        title = serializers.CharField(required=False, allow_blank=True, default="", help_text="Single file only; default: from the file.")
        uri = serializers.CharField(required=False, allow_blank=True, default="", help_text="Single file only.")
        tenant = serializers.CharField(required=False)

    class DocumentUploadOutputSerializer(serializers.Serializer):
        document_ids = serializers.ListField(child=serializers.CharField())

    @extend_schema(
        operation_id="documents_upload", request={"multipart/form-data": DocumentUploadInputSerializer}, responses={202: DocumentUploadOutputSerializer},
        summary="Upload files for background processing (editor); poll GET /v1/documents/{id}",
    )
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.DocumentUploadInputSerializer(data=request.data)
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


class DocumentDetailApi(_ReadOrEdit):
    @extend_schema(operation_id="documents_retrieve", responses={200: DocumentOutputSerializer}, summary="One document's status and progress")
    def get(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document = get_for_tenant(Document.objects.all(), tenant=ctx.tenant, external_id=document_id)
        return Response(document_json(document))

    @extend_schema(operation_id="documents_destroy", responses={204: None}, summary="Delete a document and its chunks (editor; audited)")
    def delete(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document = get_for_tenant(Document.objects.all(), tenant=ctx.tenant, external_id=document_id)
        document_delete_many(documents=[document], actor=_actor(ctx))
        return Response(status=status.HTTP_204_NO_CONTENT)


def _actor(ctx: TenantContext) -> str:
    """The audit actor: the user, and the token when one was used."""
    name = ctx.user.get_username() if ctx.user.is_authenticated else "anonymous"
    return f"{name} (token {ctx.token.prefix})" if ctx.token else name
