"""Chat over HTTP: ``POST /v1/chat/sessions`` and ``POST /v1/chat/completions`` (JSON or SSE).

The completions endpoint is an async Django view, so a streamed answer holds no
thread while it waits on the model, and a client that disconnects cancels the
generation (Django raises ``CancelledError`` in the stream). Access is decided
exactly as in every DRF view: ``ChatCompletionApi`` runs DRF's authenticators,
the reader permission, throttles and the tenant resolution in a worker thread,
and renders any refusal with the project's JSON error shape; it is also what
the OpenAPI schema documents.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, get_for_tenant, resolve_tenant_context
from accounts.permissions import IsTenantReader
from chat.events import ChatEvent, sse_frame
from chat.models import ChatSession
from chat.pipeline import ChatFailed, answer, answer_stream
from chat.prompting import greeting
from chat.selectors import chat_sessions_of
from chat.services import chat_session_create
from knowledge.rag import limits

NO_STORE = "no-store"
# Fields a caller might try in order to steer the model; the server owns all of them.
_SERVER_OWNED = frozenset({
    "model", "models", "provider", "api_key", "api_base", "base_url", "headers", "extra_headers", "tools",
    "tool_choice", "functions", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop",
    "messages", "system", "template", "prompt_template", "fallbacks", "num_retries", "timeout",
})


def _private(response: HttpResponse) -> HttpResponse:
    """Answers are per caller and may quote private documents: never cache them anywhere."""
    response["Cache-Control"] = NO_STORE
    return response


# --- sessions ----------------------------------------------------------------------------


class ChatSessionInputSerializer(serializers.Serializer):
    tenant = serializers.CharField(required=False, help_text="Tenant slug; default: the token's tenant, or DEFAULT.")


class ChatSessionOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    greeting = serializers.CharField()


class ChatSessionCreateApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=ChatSessionInputSerializer, responses={201: ChatSessionOutputSerializer}, summary="Start a chat session")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        session = chat_session_create(tenant=ctx.tenant, principal=ctx.principal)
        body = {"session_id": session.public_id, "greeting": greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug)}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": NO_STORE})


# --- completions -------------------------------------------------------------------------


class ChatCompletionInputSerializer(serializers.Serializer):
    session_id = serializers.CharField(max_length=40, help_text="From POST /v1/chat/sessions.")
    prompt = serializers.CharField(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False)
    tenant = serializers.CharField(required=False, help_text="Tenant slug; default: the token's tenant, or DEFAULT.")
    stream = serializers.BooleanField(default=False, help_text="true: answer as Server-Sent Events.")
    graph_search = serializers.BooleanField(
        allow_null=True, default=None,
        help_text="Override QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH for this request. No knowledge graph exists yet: "
                  "true only adds a `graph_search` diagnostic saying so; retrieval is hybrid search either way.",
    )

    def validate_prompt(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        extra = sorted(set(self.initial_data) - set(self.fields)) if isinstance(self.initial_data, dict) else []
        if extra:
            raise serializers.ValidationError({
                key: ["Not accepted: the server chooses the model, credentials, base URL, headers, tools and sampling."]
                if key in _SERVER_OWNED else ["Unknown field."]
                for key in extra
            })
        return attrs


class ChatCitationSerializer(serializers.Serializer):
    document_id = serializers.CharField()
    chunk_id = serializers.CharField()
    score = serializers.FloatField()


class ChatUsageSerializer(serializers.Serializer):
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()


class ChatMessageSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["assistant"])
    content = serializers.CharField()


class ChatCompletionOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The provider's completion id.")
    model = serializers.CharField(help_text="The catalog model that answered (config/models.yaml).")
    provider = serializers.CharField(help_text="e.g. openai, anthropic, or quarry for the built-in offline model.")
    provider_model = serializers.CharField(help_text="The provider's model, e.g. offline-extractive.")
    message = ChatMessageSerializer()
    finish_reason = serializers.CharField()
    usage = ChatUsageSerializer()
    retry_count = serializers.IntegerField(help_text="Retries litellm's Router made for this answer.")
    fallback_count = serializers.IntegerField(help_text="Hops to a fallback deployment or model.")
    session_id = serializers.CharField()
    citations = ChatCitationSerializer(many=True, help_text="The passages given to the model, in retrieval order.")


class ChatErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()


SSE_DESCRIPTION = """\
With `stream: true` the answer is `text/event-stream`, frames `event: <name>\\ndata: <json>\\n\\n`:
exactly one `citations` (`{session_id, citations}`), then `reasoning_delta` / `text_delta` (`{text}`) and
`usage`, ending with `completed` (the JSON response without `message`) or one `error`
(`{error, detail}`; e.g. `model_unavailable`, `retrieval_unavailable`). Failures after the stream opened
are reported in-band; access errors (401/403/404) and bad input (400) are plain JSON responses.

Answers are grounded: the tenant is searched (hybrid) for the prompt, and the model is told to answer
only from the retrieved passages, citing them as [1], [2], ... The last two turns of the session are
part of the prompt. With `graph_search: true`, responses carry a `graph_search` diagnostic: no knowledge
graph exists yet, so it changes nothing else. Responses are never cacheable (`Cache-Control: no-store`).
"""


class ChatCompletionApi(APIView):
    """Access rules and schema of ``POST /v1/chat/completions``; requests are served by ``chat_completions``."""

    permission_classes = [IsTenantReader]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        # Refusals are JSON even for a client that accepts only text/event-stream.
        return (JSONRenderer(), JSONRenderer.media_type)

    @extend_schema(
        request=ChatCompletionInputSerializer,
        responses={
            (200, "application/json"): ChatCompletionOutputSerializer,
            (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description="Server-Sent Events (stream: true)."),
            400: ChatErrorSerializer, 401: ChatErrorSerializer, 403: ChatErrorSerializer, 404: ChatErrorSerializer,
            503: OpenApiResponse(ChatErrorSerializer, description="The model or retrieval failed (stream: false)."),
        },
        summary="Ask a grounded question in a chat session",
        description=SSE_DESCRIPTION,
    )
    def post(self, request: Request) -> Response:  # pragma: no cover - never dispatched
        raise exceptions.MethodNotAllowed("POST", detail="Served by the async view chat_completions.")


@dataclass(frozen=True)
class Admission:
    ctx: TenantContext
    session: ChatSession
    prompt: str
    stream: bool
    graph_search: bool | None


def _admit(django_request: HttpRequest) -> Admission | HttpResponse:
    """DRF's dispatch up to the handler: authenticate, permit, resolve the tenant, validate, find the session."""
    view = ChatCompletionApi()
    view.args, view.kwargs = (), {}
    request = view.initialize_request(django_request)
    view.request = request
    view.headers = view.default_response_headers
    try:
        if django_request.method != "POST":
            raise exceptions.MethodNotAllowed(django_request.method or "")
        view.initial(request)
        ctx = resolve_tenant_context(request)
        data = ChatCompletionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal).select_related("tenant")
        session = get_for_tenant(sessions, tenant=ctx.tenant, public_id=v["session_id"])
        return Admission(ctx=ctx, session=session, prompt=v["prompt"], stream=v["stream"], graph_search=v["graph_search"])
    except Exception as exc:
        response = view.handle_exception(exc)  # re-raises what is not an API error (a bug: 500)
    response = view.finalize_response(request, response)
    response.render()
    return response


async def _sse(events: AsyncIterator[ChatEvent]) -> AsyncIterator[bytes]:
    async with aclosing(events):  # type: ignore[type-var]
        async for event in events:
            yield sse_frame(event)


@csrf_exempt  # DRF's SessionAuthentication enforces CSRF itself, as in every APIView
async def chat_completions(request: HttpRequest) -> HttpResponse:
    admitted = await sync_to_async(_admit)(request)
    if isinstance(admitted, HttpResponse):
        return _private(admitted)
    if admitted.stream:
        events = answer_stream(session=admitted.session, prompt=admitted.prompt, graph_search=admitted.graph_search)
        response = StreamingHttpResponse(_sse(events), content_type="text/event-stream; charset=utf-8")
        response["X-Accel-Buffering"] = "no"  # proxies (nginx) must pass frames on as they come
        return _private(response)
    try:
        body = await answer(session=admitted.session, prompt=admitted.prompt, graph_search=admitted.graph_search)
    except ChatFailed as failure:
        return _private(JsonResponse(failure.error, status=503, headers={"Retry-After": "5"}))
    return _private(JsonResponse(body))


# drf-spectacular documents views whose callback carries an APIView class.
chat_completions.cls = ChatCompletionApi  # type: ignore[attr-defined]
chat_completions.initkwargs = {}  # type: ignore[attr-defined]
