"""Search, graph pictures and fetch (readers)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import resolve_tenant_context
from accounts.permissions import IsTenantReader
from common.db import release_connection
from common.serializers import ClosedSerializer, StrictBooleanField, StrictFloatField, StrictIntegerField, TenantField
from knowledge import rag
from knowledge.api.fields import ChunkIdField, FiltersField, MetadataField, QueryField, rag_error_to_api
from knowledge.rag import limits
from knowledge.rag.fields import FusionField, FusionWeightField, check_fusion_request
from knowledge.rag.reranking import GRAPH_NOT_RERANKED
from knowledge.selectors import chunk_fetch, chunk_graph_search, chunk_rerank, chunk_search, graph_picture


# --- Search and fetch ------------------------------------------------------------------------------


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
    rerank_score = serializers.FloatField(required=False, help_text="With rerank colbert, applied: the hit's MaxSim (mean over "
                                                                    "the query's tokens of their best cosine in the passage); "
                                                                    "score is then the blend that ordered the page.")
    fused_score = serializers.FloatField(required=False, help_text="With rerank colbert, applied: the score the mode gave the hit "
                                                                   "before re-ranking.")


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
    rerank = serializers.ChoiceField(
        choices=list(rag.RERANK_CHOICES), required=False, allow_null=True, default=None,
        help_text="A second stage after the mode's ranking: colbert re-scores the first candidates by late interaction "
                  "(answerai-colbert-small-v1) blended with their score; none keeps the mode's order. Default: the "
                  "deployment's QUARRY_RERANK (none unless configured: passages not yet cached cost ~48 ms each).",
    )
    tenant = TenantField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return check_fusion_request(attrs)


class RerankSerializer(serializers.Serializer):
    requested = serializers.CharField()
    applied = serializers.BooleanField(help_text="False: the hits are in the mode's own order, and reason says why "
                                                 "(no model, a model that failed, graph search: the graph places its "
                                                 "passages in the page).")
    model = serializers.CharField(required=False)
    depth = serializers.IntegerField(required=False, help_text="How many candidates were re-scored.")
    reason = serializers.CharField(required=False)


class SearchOutputSerializer(serializers.Serializer):
    hits = SearchHitSerializer(many=True)
    rerank = RerankSerializer(required=False, help_text="With rerank colbert: whether the stage ran.")
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
        reranking = (v["rerank"] or settings.QUARRY_RERANK) == "colbert"
        graph: dict[str, Any] | None = None
        reranked: rag.Reranked | None = None
        # Sign-in, throttle and tenant are read: give the pooled connection back while the query is
        # embedded (CPU, the longest step under load); the search takes one again for its SQL.
        reader = rag.reader_of(ctx)  # the caller's groups, read now: before the connection goes back
        release_connection()
        try:
            if v["graph_search"]:
                result = chunk_graph_search(tenant=ctx.tenant, query=v["query"], limit=v["limit"], filters=v["filters"],
                                            min_score=v["min_score"], fusion=v.get("fusion"), fusion_weight=v.get("fusion_weight"),
                                            reader=reader)
                hits = result.hits
                graph = {
                    "used": bool(result.leg.entities),
                    "named": [{"name": n.name, "type": n.type} for n in result.leg.named],
                    "nodes": [{"name": n.name, "type": n.type} for n in result.leg.nodes],
                    "relations": [{"subject": r.subject, "predicate": r.predicate, "object": r.object, "chunk_id": r.chunk_id}
                                  for r in result.leg.relations],
                }
                if reranking:
                    reranked = rag.Reranked(tuple(hits), applied=False, reason=GRAPH_NOT_RERANKED)
            else:
                hits = chunk_search(tenant=ctx.tenant, query=v["query"], mode=v["mode"],
                                    limit=rag.rerank_depth(v["limit"]) if reranking else v["limit"],
                                    filters=v["filters"], min_score=v["min_score"], fusion=v["fusion"],
                                    fusion_weight=v["fusion_weight"], reader=reader)
                if reranking:
                    reranked = chunk_rerank(query=v["query"], hits=hits, limit=v["limit"])
                    hits = reranked.hits
        except rag.ConfigurationError as exc:
            raise exceptions.ValidationError({"graph_search" if v["graph_search"] else "mode": [str(exc)]}) from None
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        body: dict[str, Any] = {"hits": [_hit_json(h) for h in hits]}
        if graph is not None:
            body["graph"] = graph
        if reranked is not None:
            body["rerank"] = reranked.as_json()
        return Response(body)


def _hit_json(hit: rag.RAGHit) -> dict[str, Any]:
    out = {**chunk_json(hit.chunk), "score": hit.score, "rrf_rank": hit.rrf_rank, "semantic_similarity": hit.semantic_similarity}
    if hit.keyword_norm is not None and hit.semantic_norm is not None:
        out["keyword_norm"], out["semantic_norm"] = hit.keyword_norm, hit.semantic_norm
    if hit.graph_path:
        out["graph_path"] = list(hit.graph_path)
    if isinstance(hit, rag.RerankedHit):
        out["rerank_score"], out["fused_score"] = hit.rerank_score, hit.fused_score
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
            picture = graph_picture(tenant=ctx.tenant, chunk_ids=data.validated_data["ids"], expand=data.validated_data["expand"],
                                    reader=rag.reader_of(ctx))
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response(picture.as_json())


class ChunkFetchInputSerializer(ClosedSerializer):
    """Chunk ids to fetch, at most 1,000."""

    ids = serializers.ListField(child=ChunkIdField(max_length=limits.MAX_CHUNK_ID_CHARS), allow_empty=False, min_length=1, max_length=limits.MAX_FETCH_IDS)
    tenant = TenantField()


class ChunkFetchOutputSerializer(serializers.Serializer):
    chunks = ChunkSerializer(many=True, help_text="In the order asked for; ids that do not exist (here), or that the caller may not read, are left out alike.")


class ChunkFetchApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(operation_id="chunks_fetch", request=ChunkFetchInputSerializer, responses={200: ChunkFetchOutputSerializer},
                   summary="Fetch chunks by id, in order")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        data = ChunkFetchInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            chunks = chunk_fetch(tenant=ctx.tenant, ids=data.validated_data["ids"], reader=rag.reader_of(ctx))
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"chunks": [chunk_json(c) for c in chunks]})
