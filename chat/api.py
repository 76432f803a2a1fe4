"""Chat over HTTP: ``POST /v1/chat/sessions`` and ``POST /v1/chat/completions`` (JSON or SSE);
the retrieval agent: ``POST /v1/agent/sessions``, ``/v1/agent/completions`` and ``/v1/agent/runs/{id}/resume``.

The completions endpoint is an async Django view, so a streamed answer holds no
thread while it waits on the model, and a client that disconnects cancels the
generation (Django raises ``CancelledError`` in the stream). Access is decided
exactly as in every DRF view: ``ChatCompletionApi`` runs DRF's authenticators,
the reader permission, throttles and the tenant resolution in a worker thread,
and renders any refusal with the project's JSON error shape; it is also what
the OpenAPI schema documents.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
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
from chat.agent import (
    DEFAULT_MAX_STEPS,
    MAX_STEPS_LIMIT,
    AgentFailed,
    RunNotResumable,
    agent_greeting,
    agent_resume_stream,
    agent_run_claim,
    agent_runs_of,
    agent_stream,
    collect_agent,
)
from chat.agent.events import AgentEvent
from chat.events import ChatEvent, sse_frame
from chat.models import AgentRun, ChatSession, SessionKind
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


class _ClosedInputSerializer(serializers.Serializer):
    """Request bodies of chat and agent: unknown fields are errors (callers cannot smuggle
    model, credentials or sampling options), and a prompt of only whitespace is blank."""

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


class ChatCompletionInputSerializer(_ClosedInputSerializer):
    session_id = serializers.CharField(max_length=40, help_text="From POST /v1/chat/sessions.")
    prompt = serializers.CharField(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False)
    tenant = serializers.CharField(required=False, help_text="Tenant slug; default: the token's tenant, or DEFAULT.")
    stream = serializers.BooleanField(default=False, help_text="true: answer as Server-Sent Events.")
    graph_search = serializers.BooleanField(
        allow_null=True, default=None,
        help_text="Override QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH for this request. No knowledge graph exists yet: "
                  "true only adds a `graph_search` diagnostic saying so; retrieval is hybrid search either way.",
    )


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


class _StreamingApi(APIView):
    """Access rules and schema of an endpoint served by an async view (JSON or SSE).

    Only a reader is admitted; refusals are JSON even for a client that accepts
    only text/event-stream.
    """

    permission_classes = [IsTenantReader]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        return (JSONRenderer(), JSONRenderer.media_type)


class ChatCompletionApi(_StreamingApi):
    """Access rules and schema of ``POST /v1/chat/completions``; requests are served by ``chat_completions``."""

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


# --- the retrieval agent: sessions, completions, resume ------------------------------------------
#
# Same access rules as chat (DRF's authenticators, the reader permission, the tenant resolved once),
# same error shape and privacy (no-store, server-owned model, tools and sampling). The runs are
# served by async views forwarding ``chat.agent``'s event stream, as JSON or Server-Sent Events.


class AgentSessionCreateApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=ChatSessionInputSerializer, responses={201: ChatSessionOutputSerializer},
                   summary="Start an agent session")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        session = chat_session_create(tenant=ctx.tenant, principal=ctx.principal, kind=SessionKind.AGENT)
        body = {"session_id": session.public_id, "greeting": agent_greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug)}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": NO_STORE})


class _AgentRunInputSerializer(_ClosedInputSerializer):
    session_id = serializers.CharField(max_length=40, help_text="From POST /v1/agent/sessions.")
    tenant = serializers.CharField(required=False, help_text="Tenant slug; default: the token's tenant, or DEFAULT.")
    graph_search = serializers.BooleanField(
        default=False, help_text="Offer the model the graph tools too. No knowledge graph exists yet: they report so.",
    )
    max_steps = serializers.IntegerField(
        min_value=1, max_value=MAX_STEPS_LIMIT, default=DEFAULT_MAX_STEPS,
        help_text="Tool-using steps this invocation may take before the model must answer (1-8).",
    )
    stream = serializers.BooleanField(default=False, help_text="true: answer as Server-Sent Events.")


class AgentCompletionInputSerializer(_AgentRunInputSerializer):
    prompt = serializers.CharField(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False)


class AgentResumeInputSerializer(_AgentRunInputSerializer):
    pass


class AgentToolCallSerializer(serializers.Serializer):
    step = serializers.IntegerField()
    tool = serializers.CharField()
    ok = serializers.BooleanField()


class AgentCompletionOutputSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="The provider's id of the completion that answered.")
    run_id = serializers.CharField(help_text="The run (run-...): resume it with POST /v1/agent/runs/{run_id}/resume.")
    model = serializers.CharField(help_text="The catalog model that answered (config/models.yaml).")
    provider = serializers.CharField()
    provider_model = serializers.CharField()
    message = ChatMessageSerializer()
    finish_reason = serializers.CharField()
    stop_reason = serializers.ChoiceField(
        choices=["completed", "max_steps", "repeated_call", "token_budget"],
        help_text="completed: the model answered; max_steps: the step budget was spent (resumable); "
                  "repeated_call / token_budget: the research stopped there. The answer comes from a final turn without tools.",
    )
    usage = ChatUsageSerializer(help_text="The whole run's tokens, over all its turns and resumes.")
    turns = serializers.IntegerField(help_text="Model turns of the whole run.")
    tool_call_count = serializers.IntegerField()
    tool_calls = AgentToolCallSerializer(many=True)
    session_id = serializers.CharField()
    citations = ChatCitationSerializer(many=True, help_text="The passages the answer cites, in order of citation.")


class AgentErrorSerializer(serializers.Serializer):
    error = serializers.CharField()
    detail = serializers.CharField()
    run_id = serializers.CharField(required=False, help_text="The run that stopped, when it exists: resume it.")
    stop_reason = serializers.CharField(required=False, help_text="timeout or provider_error (both resumable).")


AGENT_DESCRIPTION = """\
The agent answers in several steps: the model calls read-only retrieval tools over the caller's tenant
(`hybrid_search`, `keyword_search`, `semantic_search`, `fetch_chunks`; with `graph_search: true` also the graph
tools), several at once when they are independent, then answers from what they returned, citing passages as [n].
At most `max_steps` tool-using steps, then one turn without tools to answer (`stop_reason: max_steps`); a repeated
identical call (`repeated_call`) and the run's token budget (`token_budget`) end the research the same way.
Citations are only chunks some tool returned. Runs are saved after every step; one that stopped on a timeout, a
model failure (503 with `run_id`) or `max_steps` continues with POST /v1/agent/runs/{run_id}/resume.

With `stream: true` the answer is `text/event-stream`, frames `event: <name>\\ndata: <json>\\n\\n`: `run`
(`{session_id, run_id, resumed, max_steps, graph_search, tools}`), then per model turn `reasoning_delta` /
`text_delta` (`{text, turn}`); a turn that calls tools is followed by `step` (`{step, turn, calls}`) and one
`tool_result` per call (`{step, id, tool, ok, chunk_ids, error?}`); text of such a turn is a note, not the answer.
It ends with `citations`, `usage` and `completed` (the JSON response) or one `error` (`{error, detail, run_id?,
stop_reason?}`). Responses are never cacheable (`Cache-Control: no-store`).
"""


class _AgentAsyncApi(_StreamingApi):
    """Access rules and schema of an agent endpoint; requests are served by the async view named below."""


_AGENT_RESPONSES: dict[Any, Any] = {
    (200, "application/json"): AgentCompletionOutputSerializer,
    (200, "text/event-stream"): OpenApiResponse(OpenApiTypes.STR, description="Server-Sent Events (stream: true)."),
    400: ChatErrorSerializer, 401: ChatErrorSerializer, 403: ChatErrorSerializer, 404: ChatErrorSerializer,
    503: OpenApiResponse(AgentErrorSerializer, description="The model failed or the run timed out (stream: false); "
                                                           "the body names the run to resume."),
}


class AgentCompletionApi(_AgentAsyncApi):
    @extend_schema(request=AgentCompletionInputSerializer, responses=_AGENT_RESPONSES,
                   summary="Ask the retrieval agent a question (a new run)", description=AGENT_DESCRIPTION)
    def post(self, request: Request) -> Response:  # pragma: no cover - never dispatched
        raise exceptions.MethodNotAllowed("POST", detail="Served by the async view agent_completions.")


class RunNotResumableError(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "run_finished"
    default_detail = "This run has finished and cannot be resumed."


class AgentResumeApi(_AgentAsyncApi):
    @extend_schema(
        request=AgentResumeInputSerializer,
        responses={**_AGENT_RESPONSES, 409: OpenApiResponse(ChatErrorSerializer, description=(
            "The run finished (run_finished) or is running (run_in_progress)."))},
        summary="Continue an agent run that stopped before finishing",
        description="Continues the run from its last completed step, with a fresh `max_steps` budget, the same bounds "
                    "and the same response (or stream) as POST /v1/agent/completions. Runs that finished "
                    "(completed, repeated_call, token_budget) answer 409.",
    )
    def post(self, request: Request, run_id: str) -> Response:  # pragma: no cover - never dispatched
        raise exceptions.MethodNotAllowed("POST", detail="Served by the async view agent_run_resume.")


@dataclass(frozen=True)
class AgentAdmission:
    session: ChatSession
    stream: bool
    max_steps: int
    graph_search: bool
    prompt: str = ""
    run: AgentRun | None = None


def _drf_admit(view: APIView, django_request: HttpRequest, admit: Callable[[Request, TenantContext], Any]) -> Any:
    """DRF's dispatch up to the handler (authenticate, permit, resolve the tenant), then ``admit``; refusals rendered."""
    request = view.initialize_request(django_request)
    view.request = request
    view.headers = view.default_response_headers
    try:
        if django_request.method != "POST":
            raise exceptions.MethodNotAllowed(django_request.method or "")
        view.initial(request)
        return admit(request, resolve_tenant_context(request))
    except Exception as exc:
        response = view.handle_exception(exc)  # re-raises what is not an API error (a bug: 500)
    response = view.finalize_response(request, response)
    response.render()
    return response


def _agent_session(ctx: TenantContext, session_id: str) -> ChatSession:
    sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal, kind=SessionKind.AGENT).select_related("tenant")
    return get_for_tenant(sessions, tenant=ctx.tenant, public_id=session_id)


def _admit_completion(django_request: HttpRequest) -> AgentAdmission | HttpResponse:
    def admit(request: Request, ctx: TenantContext) -> AgentAdmission:
        data = AgentCompletionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        return AgentAdmission(session=_agent_session(ctx, v["session_id"]), stream=v["stream"], max_steps=v["max_steps"],
                              graph_search=v["graph_search"], prompt=v["prompt"])

    view = AgentCompletionApi()
    view.args, view.kwargs = (), {}
    return _drf_admit(view, django_request, admit)


def _admit_resume(django_request: HttpRequest, run_id: str) -> AgentAdmission | HttpResponse:
    def admit(request: Request, ctx: TenantContext) -> AgentAdmission:
        data = AgentResumeInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        session = _agent_session(ctx, v["session_id"])
        runs = agent_runs_of(tenant=ctx.tenant, principal=ctx.principal).filter(session=session)
        run = get_for_tenant(runs, tenant=ctx.tenant, public_id=run_id)
        try:
            run = agent_run_claim(run=run, max_steps=v["max_steps"], graph_search=v["graph_search"])
        except RunNotResumable as refused:
            raise RunNotResumableError(refused.detail, code=refused.code) from None
        return AgentAdmission(session=session, stream=v["stream"], max_steps=v["max_steps"],
                              graph_search=v["graph_search"], run=run)

    view = AgentResumeApi()
    view.args, view.kwargs = (), {"run_id": run_id}
    return _drf_admit(view, django_request, admit)


async def _agent_respond(admitted: AgentAdmission, events: AsyncIterator[AgentEvent]) -> HttpResponse:
    if admitted.stream:
        response = StreamingHttpResponse(_sse(events), content_type="text/event-stream; charset=utf-8")  # type: ignore[arg-type]
        response["X-Accel-Buffering"] = "no"
        return _private(response)
    try:
        body = await collect_agent(events)
    except AgentFailed as failure:
        return _private(JsonResponse(failure.error, status=503, headers={"Retry-After": "5"}))
    return _private(JsonResponse(body))


@csrf_exempt  # DRF's SessionAuthentication enforces CSRF itself, as in every APIView
async def agent_completions(request: HttpRequest) -> HttpResponse:
    admitted = await sync_to_async(_admit_completion)(request)
    if isinstance(admitted, HttpResponse):
        return _private(admitted)
    events = agent_stream(session=admitted.session, prompt=admitted.prompt, max_steps=admitted.max_steps,
                          graph_search=admitted.graph_search)
    return await _agent_respond(admitted, events)


@csrf_exempt
async def agent_run_resume(request: HttpRequest, run_id: str) -> HttpResponse:
    admitted = await sync_to_async(_admit_resume)(request, run_id)
    if isinstance(admitted, HttpResponse):
        return _private(admitted)
    assert admitted.run is not None
    return await _agent_respond(admitted, agent_resume_stream(session=admitted.session, run=admitted.run))


agent_completions.cls = AgentCompletionApi  # type: ignore[attr-defined]
agent_completions.initkwargs = {}  # type: ignore[attr-defined]
agent_run_resume.cls = AgentResumeApi  # type: ignore[attr-defined]
agent_run_resume.initkwargs = {}  # type: ignore[attr-defined]
