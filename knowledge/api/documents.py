"""Documents: synchronous ingest, background uploads, status, list, access and delete (readers read, editors write).

A document the caller may not read (its access list names neither them nor a group of theirs) is a 404
here exactly as another tenant's is, and lists leave it out (issue 34)."""
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

from accounts.access import TenantContext, resolve_tenant_context
from accounts.models import Role
from accounts.permissions import IsTenantEditor, IsTenantReader
from common import replicas
from common.parsers import BoundedJSONField
from common.serializers import ClosedSerializer, TenantField
from knowledge import rag
from knowledge.api.fields import (
    DocumentTextField,
    FIELDS_SCHEMA,
    MetadataField,
    NewDocumentIdField,
    SCALAR_SCHEMA,
    TitleField,
    UriField,
    string_schema,
    document_id_in_url,
    rag_error_to_api,
)
from knowledge.models import API_STATUSES, CANCELLED_PHASES, Document
from knowledge.rag import limits
from knowledge.selectors import document_get, document_list
from knowledge.services.access import AccessError, access_describe, access_from_input, document_access_set
from knowledge.services.documents import (
    DocumentInputError,
    DocumentNotReadable,
    document_delete_many,
    document_ingest,
    document_upload_create,
)


# Offsets past this are refused (PostgreSQL's OFFSET is a bigint; no tenant holds a billion documents).
MAX_OFFSET = 1_000_000_000


# --- Documents: synchronous ingest, background uploads, status, delete -----------------------------


ACCESS_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "groups": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 64}, "maxItems": 100},
        "users": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 150}, "maxItems": 100},
    },
    "description": "Who may read the documents: groups (POST /v1/groups) and usernames of the tenant's members; "
                   "both empty or omitted: the whole tenant. Tenant admins read everything. An unknown group or user is a 400 naming it.",
}


@extend_schema_field(ACCESS_SCHEMA)
class AccessField(serializers.JSONField):
    """An access list ``{"groups": [...], "users": [...]}``; checked against the tenant by the view."""


class AccessOutputSerializer(serializers.Serializer):
    groups = serializers.ListField(child=serializers.CharField())
    users = serializers.ListField(child=serializers.CharField())


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
    access = AccessOutputSerializer(required=False, help_text=(
        "Who may read it: groups and users of the tenant (both empty: the whole tenant). Shown to those who may "
        "change it (editors and admins); a deleted group shows as #<id> and still restricts."))


def document_json(document: Document, ctx: TenantContext | None = None) -> dict[str, Any]:
    """The document as the API shows it; with ``ctx`` of an editor (who may change it), its access list too."""
    out: dict[str, Any] = {
        "id": document.external_id, "title": document.title, "uri": document.uri, "status": document.api_status,
        "progress": document.progress, "error": document.error,
        "cancelled": {"phase": document.phase or None} if document.cancelled else None,
        "chunk_count": document.chunk_count, "metadata": document.metadata, "updated_at": document.updated_at,
    }
    if ctx is not None and ctx.has_role(Role.EDITOR):
        out["access"] = access_describe(tenant=ctx.tenant, principals=document.access)
    return out


def readable_document(ctx: TenantContext, document_id: str) -> Document:
    """THE lookup of a document by id for an API caller: 404 for another tenant's and for one the caller may not read."""
    document = document_get(tenant=ctx.tenant, external_id=document_id_in_url(document_id), reader=rag.reader_of(ctx))
    if document is None:
        raise exceptions.NotFound()
    return document


def access_input(ctx: TenantContext, value: object, field: str = "access") -> list[str] | None:
    """An access list of the request as principals (None: not given); a 400 naming unknown groups or users."""
    try:
        return access_from_input(tenant=ctx.tenant, value=value)
    except AccessError as exc:
        raise exceptions.ValidationError({field: [exc.message]}) from None


def refuse_unreadable_ids(ctx: TenantContext, document_ids: list[str]) -> None:
    """A write that would replace a document the caller may not read is refused as a 404, as reading it is."""
    reader = rag.reader_of(ctx)
    if reader is None or not document_ids:
        return
    existing = Document.objects.for_tenant(ctx.tenant.pk).filter(external_id__in=document_ids)
    if existing.exclude(pk__in=existing.readable_by(reader.principals).values("pk")).exists():
        raise exceptions.NotFound()


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
    access = AccessField(required=False)
    tenant = TenantField()


class DocumentIngestSchemaSerializer(ClosedSerializer):
    """Documents to index now, each replacing an earlier version of the same id."""

    # What the schema shows for the ingest body; the view checks the items one by one.

    documents = DocumentInputSerializer(many=True, allow_empty=False, min_length=1, max_length=limits.MAX_DOCUMENTS_PER_INGEST, help_text=(
        f"1 to {limits.MAX_DOCUMENTS_PER_INGEST} documents with distinct ids; at most {limits.MAX_CHARS_PER_INGEST:,} "
        f"characters and {limits.MAX_CHUNKS_PER_INGEST:,} chunks in all."))
    access = AccessField(required=False, help_text="Applies to every document of the request; omitted: each keeps its own "
                                                   "(a new one: the whole tenant).")
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
        reader = rag.reader_of(ctx)  # the caller's groups, read on the primary: a membership change holds at once

        def read(_alias: str) -> tuple[int, list[Any]]:
            documents = document_list(tenant=ctx.tenant, status=v.get("status"), reader=reader)
            return documents.count(), list(documents[v["offset"] : v["offset"] + v["limit"]])

        # A list may lag the primary by the replica bound; a caller that just wrote, or whose tenant's access
        # just changed, reads the primary.
        count, page = replicas.replica_read(read, tenant=ctx.tenant.slug)
        url = request.build_absolute_uri()
        following = v["offset"] + v["limit"]
        return Response({
            "count": count,
            "next": replace_query_param(url, "offset", following) if following < count else None,
            "previous": replace_query_param(url, "offset", max(0, v["offset"] - v["limit"])) if v["offset"] else None,
            "documents": [document_json(d, ctx) for d in page],
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
        access = access_input(ctx, data.validated_data.get("access"))
        refuse_unreadable_ids(ctx, [d.id for d in documents])
        try:
            chunks = document_ingest(tenant=ctx.tenant, documents=documents, actor=ctx.actor, access=access)
        except rag.RAGError as exc:
            raise rag_error_to_api(exc) from None
        return Response({"chunks": chunks, "document_ids": [d.id for d in documents]})


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA, "additionalProperties": SCALAR_SCHEMA,
    "description": 'A JSON object of scalar values (a part of type application/json), applied to every file, e.g. {"team": "support"}.',
})
class MetadataJSONField(BoundedJSONField):
    """The metadata part of an upload: JSON text, parsed with the JSON bounds."""


@extend_schema_field({**ACCESS_SCHEMA, "description": "JSON text (a part of type application/json): " + str(ACCESS_SCHEMA["description"])})
class AccessJSONField(BoundedJSONField):
    """The access part of an upload: JSON text ``{"groups": [...], "users": [...]}``, applied to every file."""


@extend_schema_field(string_schema(limits.DOCUMENT_ID_PATTERN, 200))
class UploadIdField(serializers.CharField):
    pass


@extend_schema_field(string_schema(limits.LINE_PATTERN, limits.MAX_TITLE_CHARS, min_length=0))
class UploadTitleField(serializers.CharField):
    pass


@extend_schema_field(string_schema(limits.LINE_PATTERN, limits.MAX_URI_CHARS, min_length=0))
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
    access = AccessJSONField(required=False)
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
        access = access_input(ctx, v.get("access"))
        refuse_unreadable_ids(ctx, list(v.get("ids") or []))
        reader = rag.reader_of(ctx)
        try:
            documents = document_upload_create(
                tenant=ctx.tenant, files=v["files"], actor=ctx.actor, document_ids=v.get("ids") or None,
                title=v["title"], uri=v["uri"], metadata=v.get("metadata"), access=access,
                readable=None if reader is None else reader.principals,
            )
        except DocumentInputError as exc:
            raise _input_error(exc) from None
        except DocumentNotReadable:
            raise exceptions.NotFound() from None
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


class DocumentPatchSerializer(ClosedSerializer):
    access = AccessField(help_text="The new access list; takes effect for the next request (nothing is re-extracted or re-embedded).")
    tenant = TenantField()


class DocumentDetailApi(_ReadOrEdit):
    @extend_schema(operation_id="documents_retrieve", parameters=[DOCUMENT_ID_PARAMETER, TENANT_PARAMETER],
                   responses={200: DocumentSerializer}, summary="One document's status and progress")
    def get(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        return Response(document_json(readable_document(ctx, document_id), ctx))

    @extend_schema(operation_id="documents_partial_update", parameters=[DOCUMENT_ID_PARAMETER, TENANT_PARAMETER],
                   request=DocumentPatchSerializer, responses={200: DocumentSerializer},
                   summary="Change who may read a document (editor); its chunks follow in the same transaction")
    def patch(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document = readable_document(ctx, document_id)
        data = DocumentPatchSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        access = access_input(ctx, data.validated_data["access"])
        if access is None:
            raise exceptions.ValidationError({"access": ['must be an object {"groups": [...], "users": [...]}, not null']})
        document_access_set(documents=[document], principals=access, actor=ctx.actor)
        document.refresh_from_db()
        return Response(document_json(document, ctx))

    @extend_schema(operation_id="documents_destroy", parameters=[DOCUMENT_ID_PARAMETER, TENANT_PARAMETER],
                   responses={204: None}, summary="Delete a document and its chunks (editor; audited)")
    def delete(self, request: Request, document_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        document_delete_many(documents=[readable_document(ctx, document_id)], actor=ctx.actor)
        return Response(status=status.HTTP_204_NO_CONTENT)

