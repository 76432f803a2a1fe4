"""Reading back conversations: sessions (list, read, rename, delete) and agent runs.

- ``GET /v1/chat/sessions`` / ``GET /v1/agent/sessions``: the caller's sessions of that kind, newest first (paged).
- ``GET / PATCH / DELETE /v1/chat/sessions/{id}`` (and ``/v1/agent/sessions/{id}``): the turns with their
  citations; a new title; the session with everything in it.
- ``GET /v1/agent/runs/{run_id}``: a run's status, stop reason, steps and answer.

Sessions belong to one principal in one tenant (a user's web chat and their tokens share them); another
principal's or tenant's ids are 404, like unknown ones. Responses are never cacheable.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantReader
from chat.agent.selectors import RunDetail, agent_run_detail, agent_runs_of
from chat.api.admission import ClosedInputSerializer, is_run_id, is_session_id
from chat.api.agent import AgentSessionCreateApi
from chat.api.chat import COMPONENTS, NO_STORE, ChatErrorSerializer, ChatSessionCreateApi
from chat.models import ChatSession, SessionKind
from chat.retrieval import withhold_unreadable
from chat.selectors import (
    SEARCH_MAX_CHARS,
    SessionListItem,
    Transcript,
    chat_session_item,
    chat_session_page,
    chat_sessions_of,
    chat_transcript,
)
from chat.services import TITLE_MAX_CHARS, chat_session_delete, chat_session_rename
from common.serializers import StrictCharField, TenantField
from common.typed_serializers import typed_serializer
from knowledge import rag
from knowledge.rag import limits

PAGE_LIMIT = 100
MAX_OFFSET = 1_000_000  # far past any real list; keeps OFFSET a small integer for the database

SessionListItemSerializer = typed_serializer(SessionListItem, name="ConversationSummary")
TranscriptSerializer = typed_serializer(Transcript, name="Conversation")
RunDetailSerializer = typed_serializer(RunDetail, name="AgentRunDetail", names=COMPONENTS)


class SessionPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    sessions = SessionListItemSerializer(many=True)


@extend_schema_field({"type": "string", "maxLength": SEARCH_MAX_CHARS, "pattern": limits.LINE_PATTERN})
class SearchQueryField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if limits.LINE_CONTROL_RE.search(value) or limits.UNSTORABLE_RE.search(value):
            raise serializers.ValidationError("Must be one line of text, without control characters.")
        return value


class SessionListQuerySerializer(ClosedInputSerializer):
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_LIMIT, default=20)
    offset = serializers.IntegerField(min_value=0, max_value=MAX_OFFSET, default=0)
    q = SearchQueryField(max_length=SEARCH_MAX_CHARS, required=False, allow_blank=True, default="", trim_whitespace=False,
                         help_text="Only the sessions whose title or messages (every version) contain these words, "
                                   "in this order, ignoring case.")
    tenant = TenantField()


@extend_schema_field({"type": "string", "maxLength": TITLE_MAX_CHARS, "pattern": limits.LINE_PATTERN})
class TitleField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if limits.LINE_CONTROL_RE.search(value) or limits.UNSTORABLE_RE.search(value):
            raise serializers.ValidationError("Must be one line of text, without control characters.")
        return value


class SessionRenameSerializer(ClosedInputSerializer):
    title = TitleField(max_length=TITLE_MAX_CHARS, allow_blank=True, trim_whitespace=False,
                       help_text="Blank: go back to the title derived from the first question. One line.")
    tenant = TenantField()


ERRORS: dict[int, Any] = {400: ChatErrorSerializer, 401: ChatErrorSerializer, 403: ChatErrorSerializer, 404: ChatErrorSerializer}


def _private(body: Any, code: int = status.HTTP_200_OK) -> Response:
    return Response(body, status=code, headers={"Cache-Control": NO_STORE})


def _page(request: Request, kind: SessionKind) -> Response:
    ctx = resolve_tenant_context(request)
    query = SessionListQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    limit, offset = query.validated_data["limit"], query.validated_data["offset"]
    count, sessions = chat_session_page(tenant=ctx.tenant, principal=ctx.principal, kind=kind, limit=limit, offset=offset,
                                        query=query.validated_data["q"])
    url = request.build_absolute_uri()
    following = offset + limit
    return _private({
        "count": count,
        "next": replace_query_param(url, "offset", following) if following < count else None,
        "previous": replace_query_param(url, "offset", max(0, offset - limit)) if offset else None,
        "sessions": sessions,
    })


class ChatSessionsApi(ChatSessionCreateApi):
    @extend_schema(operation_id="chat_sessions_list", parameters=[SessionListQuerySerializer],
                   responses={200: SessionPageSerializer, **ERRORS}, summary="List your chat sessions, newest first")
    def get(self, request: Request) -> Response:
        return _page(request, SessionKind.CHAT)


class AgentSessionsApi(AgentSessionCreateApi):
    @extend_schema(operation_id="agent_sessions_list", parameters=[SessionListQuerySerializer],
                   responses={200: SessionPageSerializer, **ERRORS}, summary="List your agent sessions, newest first")
    def get(self, request: Request) -> Response:
        return _page(request, SessionKind.AGENT)


class _SessionDetailApi(APIView):
    permission_classes = [IsTenantReader]
    kind: SessionKind

    def _session(self, request: Request, session_id: str) -> tuple[TenantContext, ChatSession]:
        ctx = resolve_tenant_context(request)
        if not is_session_id(session_id):
            raise exceptions.NotFound()  # no session could have this id (a NUL, a path): no query either
        sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal, kind=self.kind)
        return ctx, get_for_tenant(sessions, tenant=ctx.tenant, public_id=session_id)

    @extend_schema(responses={200: TranscriptSerializer, **ERRORS},
                   summary="Read one of your sessions: its turns (an agent session's runs) with their citations")
    def get(self, request: Request, session_id: str) -> Response:
        ctx, session = self._session(request, session_id)
        return _private(withhold_unreadable(chat_transcript(session=session), tenant_id=ctx.tenant.pk, reader=rag.reader_of(ctx)))

    @extend_schema(request=SessionRenameSerializer, responses={200: SessionListItemSerializer, **ERRORS},
                   summary="Rename one of your sessions (an empty object changes nothing)")
    def patch(self, request: Request, session_id: str) -> Response:
        ctx, session = self._session(request, session_id)
        # A PATCH names what changes: an object without a title changes nothing.
        data = SessionRenameSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        if "title" in data.validated_data:
            session = chat_session_rename(session=session, title=data.validated_data["title"])
        return _private(chat_session_item(session=session))

    @extend_schema(responses={204: None, **ERRORS}, summary="Delete one of your sessions with everything in it")
    def delete(self, request: Request, session_id: str) -> Response:
        _, session = self._session(request, session_id)
        chat_session_delete(session=session)
        return _private(None, status.HTTP_204_NO_CONTENT)


class ChatSessionDetailApi(_SessionDetailApi):
    kind = SessionKind.CHAT


class AgentSessionDetailApi(_SessionDetailApi):
    kind = SessionKind.AGENT


class AgentRunDetailApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(responses={200: RunDetailSerializer, **ERRORS}, summary="Read one of your agent runs: status, steps, answer")
    def get(self, request: Request, run_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        if not is_run_id(run_id):
            raise exceptions.NotFound()
        runs = agent_runs_of(tenant=ctx.tenant, principal=ctx.principal).select_related("session")
        run = get_for_tenant(runs, tenant=ctx.tenant, public_id=run_id)
        detail = agent_run_detail(run=run)
        # Its citations and the chunk ids of its steps, as this request reads (in place).
        withhold_unreadable({"turns": [detail]}, tenant_id=ctx.tenant.pk, reader=rag.reader_of(ctx))
        return _private(detail)
