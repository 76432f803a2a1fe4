"""Answer actions on one turn of a chat session: regenerate, edit and resend, select a version, feedback.

- ``POST /v1/chat/sessions/{id}/turns/{turn_id}/regenerate``: a new answer to the question that answer
  ``turn_id`` answered (JSON or SSE, as ``POST /v1/chat/completions``); the old answer stays a version.
- ``POST /v1/chat/sessions/{id}/turns/{turn_id}/edit`` ``{prompt}``: question ``turn_id`` asked again as
  ``prompt``; the conversation continues from there (the old question and what followed it stay a version).
- ``POST /v1/chat/sessions/{id}/turns/{turn_id}/select``: make the thread through that version the
  conversation (the "< 1/2 >" arrows); answers the conversation as ``GET /v1/chat/sessions/{id}``.
- ``PUT / DELETE /v1/chat/sessions/{id}/turns/{turn_id}/feedback``: thumbs up or down with an optional
  comment on an answer; withdraw it.

Turns belong to their session, sessions to one principal in one tenant: any other id is 404, like an
unknown one. A turn of the wrong role for the action is 400 naming ``turn_id``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantReader
from chat.api.admission import AsyncEndpointApi, ClosedInputSerializer, PromptField, admit, is_session_id, serves
from chat.api.chat import (
    ERROR_RESPONSES,
    SSE_RESPONSE,
    ChatCompletionOutputSerializer,
    ChatErrorSerializer,
    private,
    sse_response,
    unavailable,
)
from chat.api.conversations import TranscriptSerializer
from chat.models import FEEDBACK_COMMENT_MAX_CHARS, ChatSession, FeedbackRating, Turn, TurnRole
from chat.pipeline import Branch, ChatFailed, answer, answer_stream
from chat.selectors import chat_sessions_of, chat_transcript, chat_turn_find
from chat.services import chat_feedback_give, chat_feedback_remove, chat_turn_select
from config.db import db_step
from config.serializers import StrictBooleanField, StrictCharField, TenantField
from config.typed_serializers import typed_serializer
from knowledge.rag import limits

NO_STORE = "no-store"
WRONG_ROLE = {
    TurnRole.ASSISTANT: "Not an answer of this session: regenerate and feedback take an answer's turn_id.",
    TurnRole.USER: "Not a question of this session: edit takes a question's turn_id.",
}


def _session(ctx: TenantContext, session_id: str) -> ChatSession:
    if not is_session_id(session_id):
        raise exceptions.NotFound()
    sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal).select_related("tenant")
    return get_for_tenant(sessions, tenant=ctx.tenant, public_id=session_id)


def _turn(session: ChatSession, turn_id: str, role: TurnRole | None) -> Turn:
    """The session's turn ``turn_id`` (404 otherwise); of ``role`` when given (400 naming turn_id otherwise)."""
    number = int(turn_id) if turn_id.isascii() and turn_id.isdigit() and len(turn_id) < 19 else None
    turn = chat_turn_find(session=session, turn_id=number)
    if turn is None:
        raise exceptions.NotFound()
    if role is not None and turn.role != role:
        raise exceptions.ValidationError({"turn_id": [WRONG_ROLE[role]]})
    return turn


# --- regenerate, edit: answers like POST /v1/chat/completions ----------------------------------------


class RegenerateInputSerializer(ClosedInputSerializer):
    tenant = TenantField()
    stream = StrictBooleanField(default=False, help_text="true: answer as Server-Sent Events.")
    graph_search = StrictBooleanField(allow_null=True, default=None,
                                      help_text="As POST /v1/chat/completions: override the server's graph search setting.")


class EditInputSerializer(RegenerateInputSerializer):
    prompt = PromptField(help_text="The edited question.")


ACTION_RESPONSES: dict[Any, Any] = {
    (200, "application/json"): ChatCompletionOutputSerializer,
    (200, "text/event-stream"): SSE_RESPONSE,
    **ERROR_RESPONSES,
    503: OpenApiResponse(ChatErrorSerializer, description="The model or retrieval failed (stream: false)."),
}


@extend_schema_view(post=extend_schema(
    request=RegenerateInputSerializer, responses=ACTION_RESPONSES, operation_id="chat_turn_regenerate",
    summary="Answer the question of this answer again; the old answer stays a version",
    description="`turn_id`: an answer's (`versions` in the conversation lists its siblings). The new answer is "
                "made with the conversation before the question as memory, becomes the conversation's current "
                "version, and is answered as by `POST /v1/chat/completions` (JSON, or SSE with `stream: true`).",
))
class RegenerateApi(AsyncEndpointApi):
    throttle_scope = "chat"


@extend_schema_view(post=extend_schema(
    request=EditInputSerializer, responses=ACTION_RESPONSES, operation_id="chat_turn_edit",
    summary="Ask this question again, edited; the conversation continues from it",
    description="`turn_id`: a question's. A new version of the question is stored beside the old one with its "
                "answer; later turns of the old version leave the current thread but are kept (select them back).",
))
class EditApi(AsyncEndpointApi):
    throttle_scope = "chat"


@dataclass(frozen=True)
class ActionAdmission:
    session: ChatSession
    prompt: str
    stream: bool
    graph_search: bool | None
    branch: Branch


def _admit_regenerate(request: Request, ctx: TenantContext, session_id: str, turn_id: str) -> ActionAdmission:
    data = RegenerateInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    session = _session(ctx, session_id)
    answer_turn = _turn(session, turn_id, TurnRole.ASSISTANT)
    question = chat_turn_find(session=session, turn_id=answer_turn.parent_id, role=TurnRole.USER)
    if question is None:  # pragma: no cover - every stored answer follows its question
        raise exceptions.NotFound()
    v = data.validated_data
    return ActionAdmission(session=session, prompt=question.content, stream=v["stream"], graph_search=v["graph_search"],
                           branch=Branch(parent_id=question.parent_id, question_id=question.pk))


def _admit_edit(request: Request, ctx: TenantContext, session_id: str, turn_id: str) -> ActionAdmission:
    data = EditInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    session = _session(ctx, session_id)
    question = _turn(session, turn_id, TurnRole.USER)
    v = data.validated_data
    return ActionAdmission(session=session, prompt=v["prompt"], stream=v["stream"], graph_search=v["graph_search"],
                           branch=Branch(parent_id=question.parent_id))


async def _respond(admitted: ActionAdmission | HttpResponse) -> HttpResponse:
    if isinstance(admitted, HttpResponse):
        return private(admitted)
    if admitted.stream:
        return sse_response(answer_stream(session=admitted.session, prompt=admitted.prompt,
                                          graph_search=admitted.graph_search, branch=admitted.branch))
    try:
        body = await answer(session=admitted.session, prompt=admitted.prompt, graph_search=admitted.graph_search,
                            branch=admitted.branch)
    except ChatFailed as failure:
        return unavailable(failure.error)
    return private(JsonResponse(body))


@serves(RegenerateApi)
async def turn_regenerate(request: HttpRequest, session_id: str, turn_id: str) -> HttpResponse:
    return await _respond(await db_step(admit, RegenerateApi, request, _admit_regenerate, session_id=session_id, turn_id=turn_id))


@serves(EditApi)
async def turn_edit(request: HttpRequest, session_id: str, turn_id: str) -> HttpResponse:
    return await _respond(await db_step(admit, EditApi, request, _admit_edit, session_id=session_id, turn_id=turn_id))


# --- select a version -----------------------------------------------------------------------------


class TenantOnlySerializer(ClosedInputSerializer):
    tenant = TenantField()


class SelectApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=TenantOnlySerializer, responses={200: TranscriptSerializer, **ERROR_RESPONSES},
                   operation_id="chat_turn_select",
                   summary="Make the thread through this version the conversation (flip between versions)")
    def post(self, request: Request, session_id: str, turn_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        data = request.data  # no body at all parses to an empty form; JSON null or a list is refused
        TenantOnlySerializer(data={} if hasattr(data, "getlist") and not data else data).is_valid(raise_exception=True)
        session = _session(ctx, session_id)
        chat_turn_select(session=session, turn=_turn(session, turn_id, None))
        return Response(chat_transcript(session=session), headers={"Cache-Control": NO_STORE})


# --- feedback -----------------------------------------------------------------------------------------


class FeedbackOut(TypedDict):
    turn_id: int
    rating: Literal["up", "down"]
    comment: str
    updated_at: str


FeedbackOutputSerializer = typed_serializer(FeedbackOut, name="ChatFeedback")


class FeedbackInputSerializer(ClosedInputSerializer):
    rating = serializers.ChoiceField(choices=FeedbackRating.values, help_text="up or down.")
    comment = StrictCharField(max_length=FEEDBACK_COMMENT_MAX_CHARS, allow_blank=True, default="", trim_whitespace=False,
                              help_text=f"Optional: what was good or wrong (at most {FEEDBACK_COMMENT_MAX_CHARS:,} characters).")
    tenant = TenantField()

    def validate_comment(self, value: str) -> str:
        if limits.CONTROL_RE.search(value) or limits.UNSTORABLE_RE.search(value):
            raise serializers.ValidationError("Must be text, without control characters but tab and line breaks.")
        return value.strip()


class FeedbackApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=FeedbackInputSerializer, responses={200: FeedbackOutputSerializer, **ERROR_RESPONSES},
                   operation_id="chat_turn_feedback_give",
                   summary="Rate an answer: thumbs up or down, with an optional comment (replaces your earlier rating)",
                   description="Stored with the answer's question, citations and retrieval settings, for the tenant's "
                               "admins (the admin's Feedback page) and `manage.py export_feedback`.")
    def put(self, request: Request, session_id: str, turn_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        session = _session(ctx, session_id)
        answer_turn = _turn(session, turn_id, TurnRole.ASSISTANT)
        data = FeedbackInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        question_turn = chat_turn_find(session=session, turn_id=answer_turn.parent_id, role=TurnRole.USER)
        question = question_turn.content if question_turn is not None else ""
        feedback = chat_feedback_give(session=session, answer=answer_turn, rating=data.validated_data["rating"],
                                      comment=data.validated_data["comment"], question=question)
        return Response({"turn_id": answer_turn.pk, "rating": feedback.rating, "comment": feedback.comment,
                         "updated_at": feedback.updated_at.isoformat()}, headers={"Cache-Control": NO_STORE})

    @extend_schema(responses={204: None, **ERROR_RESPONSES}, operation_id="chat_turn_feedback_remove",
                   summary="Withdraw your rating of an answer (404 when there is none)")
    def delete(self, request: Request, session_id: str, turn_id: str) -> Response:
        ctx = resolve_tenant_context(request)
        session = _session(ctx, session_id)
        if not chat_feedback_remove(session=session, answer=_turn(session, turn_id, TurnRole.ASSISTANT)):
            raise exceptions.NotFound()
        return Response(status=status.HTTP_204_NO_CONTENT, headers={"Cache-Control": NO_STORE})
