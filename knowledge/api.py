"""REST endpoints for the knowledge base: search and fetch (readers)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import resolve_tenant_context
from accounts.permissions import IsTenantReader
from knowledge import rag
from knowledge.rag import limits
from knowledge.selectors import chunk_fetch, chunk_search


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
        tenant = serializers.CharField(required=False)

    class HitSerializer(ChunkOutputSerializer):
        score = serializers.FloatField()
        rrf_rank = serializers.IntegerField(allow_null=True)
        semantic_similarity = serializers.FloatField(allow_null=True)

    class OutputSerializer(serializers.Serializer):
        hits = serializers.ListField(child=serializers.DictField())

    @extend_schema(request=InputSerializer, responses={200: OutputSerializer}, summary="Search the tenant's chunks")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        try:
            hits = chunk_search(tenant=ctx.tenant, query=v["query"], mode=v["mode"], limit=v["limit"],
                                filters=v["filters"], min_score=v["min_score"])
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"hits": [
            {**chunk_json(h.chunk), "score": h.score, "rrf_rank": h.rrf_rank, "semantic_similarity": h.semantic_similarity}
            for h in hits
        ]})


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
