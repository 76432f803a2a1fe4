"""Files attached to a conversation: ``/v1/chat/sessions/{id}/files``.

- ``GET``: the conversation's files with their processing state (status, phase, progress, error).
- ``POST`` (multipart, field ``files``, one or more): attach; 202, then the workers extract, chunk
  and embed each file as they do editors' uploads. Poll ``GET`` for progress.
- ``GET / DELETE .../files/{file_id}``: one file; delete it with its passages.
- ``POST .../files/passages`` ``{ids}``: the text of the conversation's own passages (for citations).

Only the session's owner (principal, in its tenant) reaches any of this: another principal's or
tenant's session id is 404, like an unknown one. Bounds per conversation: QUARRY_CHAT_FILES_MAX_FILES,
QUARRY_CHAT_FILES_MAX_BYTES (a request or file over it is refused while it arrives, 413), and
QUARRY_CHAT_FILES_MAX_CHUNKS (a file that would pass it ends ``failed`` with that reason).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler
from drf_spectacular.utils import OpenApiRequest, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.parsers import JSONParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantReader
from chat.api.admission import is_session_id
from chat.api.chat import NO_STORE, ChatErrorSerializer
from chat.files.selectors import FileItem, FilePassage, is_file_id, session_file_get, session_file_list, session_file_passages
from chat.files.services import FileLimitExceeded, session_file_delete, session_files_attach
from chat.models import ChatSession, SessionKind
from common.serializers import ClosedSerializer, TenantField
from common.typed_serializers import typed_serializer
from common.uploads import UploadTooLarge, describe_bytes
from knowledge import rag
from knowledge.rag import limits

FileItemSerializer = typed_serializer(FileItem, name="ConversationFile")
FilePassageSerializer = typed_serializer(FilePassage, name="ConversationFilePassage")
ERRORS: dict[int, Any] = {400: ChatErrorSerializer, 401: ChatErrorSerializer, 403: ChatErrorSerializer, 404: ChatErrorSerializer}
# A conversation holds at most this many files, and Django refuses a request with more (DATA_UPLOAD_MAX_NUMBER_FILES).
MAX_FILES_PER_REQUEST = min(settings.QUARRY_CHAT_FILES_MAX_FILES, settings.DATA_UPLOAD_MAX_NUMBER_FILES)
# Multipart framing around the files (boundaries, part headers, small fields) a request may add to its files' bytes.
MULTIPART_SLACK_BYTES = 64 * 1024


class ConversationBytesLimit(FileUploadHandler):
    """First upload handler of an attach request: refuses it, while it arrives, once its files pass
    ``QUARRY_CHAT_FILES_MAX_BYTES`` (no conversation can hold more), or at once when its declared
    length does. What the conversation already holds is counted when the parse completes."""

    def handle_raw_input(self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: Any = None) -> None:
        limit = settings.QUARRY_CHAT_FILES_MAX_BYTES
        if content_length > limit + MULTIPART_SLACK_BYTES:
            raise UploadTooLarge("files", too_large_message(limit))
        self.received = 0
        return None

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received = getattr(self, "received", 0) + len(raw_data)
        if self.received > settings.QUARRY_CHAT_FILES_MAX_BYTES:
            raise UploadTooLarge(self.field_name or "files", too_large_message(settings.QUARRY_CHAT_FILES_MAX_BYTES))
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None  # the next handler builds the file


def too_large_message(limit: int) -> str:
    return (f"A conversation's files hold at most {describe_bytes(limit)} (QUARRY_CHAT_FILES_MAX_BYTES); "
            "this upload is larger. Nothing was uploaded.")


class FileUploadInputSerializer(ClosedSerializer):
    # More files than a conversation may hold: the same sentence as the service's bound (check_file_bounds), naming
    # the setting, not DRF's "Ensure this field has no more than 10 elements". (A request past
    # DATA_UPLOAD_MAX_NUMBER_FILES, when that is the smaller bound, is refused by Django before this, naming its own.)
    files = serializers.ListField(
        child=serializers.FileField(allow_empty_file=True, use_url=False), allow_empty=False, min_length=1,
        max_length=MAX_FILES_PER_REQUEST, help_text="One or more files (the formats editors can upload).",
        error_messages={"max_length": "A conversation holds at most {max_length} files (QUARRY_CHAT_FILES_MAX_FILES); "
                                      "this upload has more. Nothing was stored."},
    )
    tenant = TenantField()


class FileListSerializer(serializers.Serializer):
    files = FileItemSerializer(many=True)
    limits = serializers.DictField(child=serializers.IntegerField(), help_text="max_files, max_bytes and max_chunks per conversation.")


class PassagesInputSerializer(ClosedSerializer):
    ids = serializers.ListField(child=serializers.CharField(max_length=207), allow_empty=False, min_length=1, max_length=limits.MAX_FETCH_IDS)
    tenant = TenantField()


class PassagesOutputSerializer(serializers.Serializer):
    chunks = FilePassageSerializer(many=True)


def _private(body: Any, code: int = status.HTTP_200_OK) -> Response:
    return Response(body, status=code, headers={"Cache-Control": NO_STORE})


def _bounds() -> dict[str, int]:
    return {"max_files": settings.QUARRY_CHAT_FILES_MAX_FILES, "max_bytes": settings.QUARRY_CHAT_FILES_MAX_BYTES,
            "max_chunks": settings.QUARRY_CHAT_FILES_MAX_CHUNKS}


class _SessionFilesBase(APIView):
    permission_classes = [IsTenantReader]
    parser_classes = [JSONParser]

    def _session(self, request: Request, session_id: str) -> tuple[TenantContext, ChatSession]:
        ctx = resolve_tenant_context(request)
        if not is_session_id(session_id):
            raise exceptions.NotFound()
        # Any of the caller's sessions: an agent session lists no files (the agent does not search them yet).
        sessions = ChatSession.objects.owned_by(tenant_id=ctx.tenant.pk, principal=ctx.principal).select_related("tenant")
        return ctx, get_for_tenant(sessions, tenant=ctx.tenant, public_id=session_id)


class SessionFilesApi(_SessionFilesBase):
    parser_classes = [MultiPartParser]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before authentication, which may already read the body (a session's CSRF check does).
        if request.method == "POST":
            request._request.upload_handlers.insert(0, ConversationBytesLimit(request._request))
        super().initial(request, *args, **kwargs)

    @extend_schema(responses={200: FileListSerializer, **ERRORS}, summary="List the files attached to one of your chat sessions")
    def get(self, request: Request, session_id: str) -> Response:
        _, session = self._session(request, session_id)
        return _private({"files": session_file_list(session=session), "limits": _bounds()})

    @extend_schema(
        request={"multipart/form-data": OpenApiRequest(FileUploadInputSerializer)},
        responses={202: FileListSerializer, **ERRORS, 409: ChatErrorSerializer, 413: ChatErrorSerializer},
        summary="Attach files to one of your chat sessions (processed in the background)",
        description="The files go through the editors' pipeline (extraction, chunking, embedding by the workers); poll GET "
                    "for each file's status, phase and progress. Their passages are searched only in this conversation "
                    "(with the knowledge base, fused by RRF; `sources` / `identifier` of POST /v1/chat/completions narrow "
                    "it), by nobody else. Bounds per conversation: QUARRY_CHAT_FILES_MAX_FILES files (400), "
                    "QUARRY_CHAT_FILES_MAX_BYTES bytes (413, refused while the upload arrives; nothing is stored) and "
                    "QUARRY_CHAT_FILES_MAX_CHUNKS passages (a file that would pass it ends `failed` saying so). A file "
                    "that cannot be extracted ends `failed` with the reason and never blocks the conversation.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        ctx, session = self._session(request, session_id)
        data = FileUploadInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        if session.kind != SessionKind.CHAT:
            return _private({"error": "conflict", "detail": "This is an agent session: files attach to chat sessions "
                                                            "(the agent does not search them)."}, status.HTTP_409_CONFLICT)
        try:
            documents = session_files_attach(session=session, files=data.validated_data["files"], actor=f"{ctx.principal} (conversation)")
        except FileLimitExceeded as exc:
            if exc.too_large:
                raise UploadTooLarge("files", exc.message) from None
            raise exceptions.ValidationError({"files": [exc.message]}) from None
        files = [session_file_get(session=session, file_id=d.external_id) for d in documents]
        return _private({"files": [f for f in files if f is not None], "limits": _bounds()}, status.HTTP_202_ACCEPTED)


class SessionFileDetailApi(_SessionFilesBase):
    @extend_schema(responses={200: FileItemSerializer, **ERRORS}, summary="One file attached to one of your chat sessions")
    def get(self, request: Request, session_id: str, file_id: str) -> Response:
        _, session = self._session(request, session_id)
        found = session_file_get(session=session, file_id=file_id)
        if found is None:
            raise exceptions.NotFound()
        return _private(found)

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete a file attached to one of your chat sessions, with its passages")
    def delete(self, request: Request, session_id: str, file_id: str) -> Response:
        ctx, session = self._session(request, session_id)
        if not session_file_delete(session=session, file_id=file_id, actor=f"{ctx.principal} (conversation)"):
            raise exceptions.NotFound()
        return _private(None, status.HTTP_204_NO_CONTENT)


class SessionFilePassagesApi(_SessionFilesBase):
    @extend_schema(request=PassagesInputSerializer, responses={200: PassagesOutputSerializer, **ERRORS},
                   summary="The text of passages of your chat session's attached files, by chunk id, in order")
    def post(self, request: Request, session_id: str) -> Response:
        _, session = self._session(request, session_id)
        data = PassagesInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        ids = [i for i in data.validated_data["ids"] if is_file_id(i.rpartition(":")[0])]
        try:
            chunks = session_file_passages(session=session, chunk_ids=ids)
        except rag.RAGError as exc:
            raise exceptions.ValidationError({"ids": [str(exc)]}) from None
        return _private({"chunks": chunks})
