"""Chat over HTTP: ``POST /v1/chat/sessions`` and ``POST /v1/chat/completions`` (JSON or SSE).

Also what every endpoint of ``chat.api`` answers with: the session shapes, the
error shape, private (``no-store``) responses, the SSE response and the 503 of a
failed answer. Response serializers are derived from the TypedDicts in
``chat.events``, so the schema describes exactly what the code sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, get_args, get_type_hints

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantReader
from chat.api.admission import AsyncEndpointApi, ClosedInputSerializer, SessionIdField, admit, serves
from chat.api.requests import ChatRetrievalOptionsSerializer, PromptField, retrieval_options, unknown_file_error
from chat.events import ChatEvent, ChatResponse, Citation, ErrorData, Message, SessionCreated, Usage, sse_frame
from chat.models import ChatSession
from chat.pipeline import Branch, ChatFailed, answer, answer_stream
from chat.prompting import greeting
from chat.retrieval import RetrievalOptions
from chat.selectors import chat_sessions_of
from chat.services import chat_session_create
from common.db import db_step
from common.serializers import ClosedSerializer, StrictBooleanField, TenantField
from common.typed_serializers import typed_json_schema, typed_serializer
from knowledge import rag

NO_STORE = "no-store"
# Component names of the shapes nested in chat and agent responses, as the schema has always called them.
COMPONENTS: dict[type, str] = {Citation: "ChatCitation", Usage: "ChatUsage", Message: "ChatMessage"}

ChatSessionOutputSerializer = typed_serializer(SessionCreated, name="ChatSessionOutput")
ChatCompletionOutputSerializer = typed_serializer(ChatResponse, name="ChatCompletionOutput", names=COMPONENTS)
ChatErrorSerializer = typed_serializer(ErrorData, name="ChatError")


def private(response: HttpResponse) -> HttpResponse:
    """Answers are per caller and may quote private documents: never cache them anywhere."""
    response["Cache-Control"] = NO_STORE
    return response


def sse_response(events: AsyncIterator[Mapping[str, Any]]) -> HttpResponse:
    """A private ``text/event-stream`` response forwarding ``events``; closing it closes the stream."""

    async def frames() -> AsyncIterator[bytes]:
        async with aclosing(events):  # type: ignore[type-var]
            async for event in events:
                yield sse_frame(event)

    response = StreamingHttpResponse(frames(), content_type="text/event-stream; charset=utf-8")
    response["X-Accel-Buffering"] = "no"  # proxies (nginx) must pass frames on as they come
    return private(response)


def unavailable(error: Mapping[str, Any]) -> HttpResponse:
    """The 503 of an answer that failed after admission (the model, retrieval, the database)."""
    return private(JsonResponse(error, status=503, headers={"Retry-After": "5"}))


def session_created(body: SessionCreated) -> Response:
    return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": NO_STORE})


# --- sessions ----------------------------------------------------------------------------


class ChatSessionInputSerializer(ClosedSerializer):
    tenant = TenantField()


def session_input(request: Request) -> None:
    """Check a session-creation body: none, or a JSON object with at most ``tenant``.

    An absent body parses to an empty mapping; JSON ``null`` or any other non-object is refused.
    """
    data = request.data
    ChatSessionInputSerializer(data={} if isinstance(data, dict) and not data else data).is_valid(raise_exception=True)


class ChatSessionCreateApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=ChatSessionInputSerializer, responses={201: ChatSessionOutputSerializer},
                   summary="Start a chat session")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        session_input(request)
        session = chat_session_create(tenant=ctx.tenant, principal=ctx.principal)
        return session_created({
            "session_id": session.public_id, "greeting": greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug),
        })


# --- completions -------------------------------------------------------------------------


class ChatCompletionInputSerializer(ChatRetrievalOptionsSerializer, ClosedInputSerializer):
    session_id = SessionIdField(help_text="From POST /v1/chat/sessions.")
    prompt = PromptField()
    tenant = TenantField()
    stream = StrictBooleanField(default=False, help_text="true: answer as Server-Sent Events.")


SSE_DESCRIPTION = """\
With `stream: true` the answer is `text/event-stream`, frames `event: <name>\\ndata: <json>\\n\\n`,
in order: one `citations` (`{session_id, citations}`: the passages given to the model as context, in
retrieval order; a marker [n] in the streamed text is the n-th), then the model's frames,
`reasoning_delta` / `text_delta` (`{text}`, as the model wrote it) and `usage`, ending with `completed`
(the JSON response: `message` as stored, its markers renumbered [1], [2], ... in order of first use;
`citations`, the passages it cites in that order; `also_retrieved`, the rest of the context) or one
`error` (`{error, detail}`; e.g. `model_unavailable`, `retrieval_unavailable`). Failures after the stream
opened are reported in-band; access errors (401/403/404) and bad input (400) are plain JSON responses.

Answers are grounded: the tenant is searched (hybrid) for the prompt, and the model is told to answer
only from the retrieved passages, citing them as [1], [2], ... The last two turns of the session are
part of the prompt. With `graph_search: true`, retrieval also follows the knowledge graph: passages found
through entities join the context (the model sees through which) and the citations (`graph_path`), and
the responses carry a `graph_search` diagnostic (`used`, `detail`, `graph_nodes`, `graph_relations`).
Responses are never cacheable (`Cache-Control: no-store`).
"""

ERROR_RESPONSES: dict[Any, Any] = {
    400: ChatErrorSerializer, 401: ChatErrorSerializer, 403: ChatErrorSerializer, 404: ChatErrorSerializer,
}
def sse_schema(events: Any, description: str) -> dict[str, Any]:
    """The schema of a ``text/event-stream`` body: a string of frames, with each event's ``data`` payload
    described (``x-sse-events``: event name -> JSON Schema), derived from the stream's event TypedDicts."""
    payloads: dict[str, Any] = {}
    for event in get_args(events):
        hints = get_type_hints(event)
        (name,) = get_args(hints["event"])
        payloads[name] = typed_json_schema(hints["data"])
    return {"type": "string", "description": description, "x-sse-events": payloads}


SSE_RESPONSE = OpenApiResponse(
    sse_schema(ChatEvent, "Server-Sent Events (stream: true): frames `event: <name>\\ndata: <json>\\n\\n`; "
                          "`x-sse-events` gives each event's data."),
    description="Server-Sent Events (stream: true).",
)


@extend_schema_view(post=extend_schema(
    request=ChatCompletionInputSerializer,
    responses={
        (200, "application/json"): ChatCompletionOutputSerializer,
        (200, "text/event-stream"): SSE_RESPONSE,
        **ERROR_RESPONSES,
        503: OpenApiResponse(ChatErrorSerializer, description="The model or retrieval failed (stream: false)."),
    },
    summary="Ask a grounded question in a chat session",
    description=SSE_DESCRIPTION,
))
class ChatCompletionApi(AsyncEndpointApi):
    """Access rules and schema of ``POST /v1/chat/completions``; requests are served by ``chat_completions``."""

    throttle_scope = "chat"


@dataclass(frozen=True)
class ChatAdmission:
    session: ChatSession
    prompt: str
    stream: bool
    options: RetrievalOptions
    # The caller as this request reads (rag.reader_of: the token's role cap, the groups read now).
    reader: rag.Reader | None


def _admit_completion(request: Request, ctx: TenantContext) -> ChatAdmission:
    data = ChatCompletionInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal).select_related("tenant")
    session: ChatSession = get_for_tenant(sessions, tenant=ctx.tenant, public_id=v["session_id"])
    if (error := unknown_file_error(session, v["identifier"])) is not None:
        raise serializers.ValidationError(error)
    return ChatAdmission(session=session, prompt=v["prompt"], stream=v["stream"],
                         options=retrieval_options(v), reader=rag.reader_of(ctx))


@serves(ChatCompletionApi)
async def chat_completions(request: HttpRequest) -> HttpResponse:
    admitted = await db_step(admit, ChatCompletionApi, request, _admit_completion)
    if isinstance(admitted, HttpResponse):
        return private(admitted)
    return await respond(admitted.session, admitted.prompt, stream=admitted.stream, options=admitted.options,
                         reader=admitted.reader)


async def respond(
    session: ChatSession, prompt: str, *, stream: bool, options: RetrievalOptions, reader: rag.Reader | None,
    branch: Branch | None = None,
) -> HttpResponse:
    """An admitted question's answer: Server-Sent Events when ``stream``, else the JSON response (503 when it failed).
    ``reader``: the request's (``rag.reader_of(ctx)``, read at admission)."""
    if stream:
        return sse_response(answer_stream(session=session, prompt=prompt, reader=reader, options=options, branch=branch))
    try:
        body = await answer(session=session, prompt=prompt, reader=reader, options=options, branch=branch)
    except ChatFailed as failure:
        return unavailable(failure.error)
    return private(JsonResponse(body))
