"""The retrieval agent over HTTP: ``POST /v1/agent/sessions``, ``/v1/agent/completions`` and
``/v1/agent/runs/{run_id}/resume`` (JSON or SSE).

Same access rules as chat (``chat.api.admission``: DRF's authenticators, the
reader permission, the tenant resolved once), same error shape and privacy
(no-store, server-owned model, tools and sampling). The runs are served by async
views forwarding ``chat.agent``'s event stream, as JSON or Server-Sent Events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import exceptions, status
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
from chat.agent.events import AgentErrorData, AgentEvent, AgentResponse, ToolCallSummary
from chat.api.admission import (
    AsyncEndpointApi,
    ClosedInputSerializer,
    SessionIdField,
    admit,
    is_run_id,
    serves,
)
from chat.api.requests import PromptField
from chat.api.chat import (
    COMPONENTS,
    ERROR_RESPONSES,
    ChatErrorSerializer,
    ChatSessionInputSerializer,
    ChatSessionOutputSerializer,
    private,
    session_created,
    session_input,
    sse_response,
    sse_schema,
    unavailable,
)
from chat.models import AgentRun, ChatSession, SessionKind
from chat.selectors import chat_sessions_of
from chat.services import chat_session_create
from common.db import db_step
from common.serializers import StrictBooleanField, StrictIntegerField, TenantField
from common.typed_serializers import typed_serializer
from knowledge import rag

AgentCompletionOutputSerializer = typed_serializer(
    AgentResponse, name="AgentCompletionOutput", names={**COMPONENTS, ToolCallSummary: "AgentToolCall"}
)
AgentErrorSerializer = typed_serializer(AgentErrorData, name="AgentError")


class AgentSessionCreateApi(APIView):
    permission_classes = [IsTenantReader]

    @extend_schema(request=ChatSessionInputSerializer, responses={201: ChatSessionOutputSerializer},
                   summary="Start an agent session")
    def post(self, request: Request) -> Response:
        ctx = resolve_tenant_context(request)
        session_input(request)
        session = chat_session_create(tenant=ctx.tenant, principal=ctx.principal, kind=SessionKind.AGENT)
        return session_created({
            "session_id": session.public_id, "greeting": agent_greeting(tenant_name=ctx.tenant.name or ctx.tenant.slug),
        })


class _AgentRunInputSerializer(ClosedInputSerializer):
    session_id = SessionIdField(help_text="From POST /v1/agent/sessions.")
    tenant = TenantField()
    graph_search = StrictBooleanField(
        default=False, help_text="Offer the model the graph tools too (graph_triplet_search, graph_neighbors), and give "
                                 "hybrid_search the knowledge graph's leg; false removes both.",
    )
    max_steps = StrictIntegerField(
        min_value=1, max_value=MAX_STEPS_LIMIT, default=DEFAULT_MAX_STEPS,
        help_text="Tool-using steps this invocation may take before the model must answer (1-8).",
    )
    stream = StrictBooleanField(default=False, help_text="true: answer as Server-Sent Events.")


class AgentCompletionInputSerializer(_AgentRunInputSerializer):
    prompt = PromptField()


class AgentResumeInputSerializer(_AgentRunInputSerializer):
    pass


AGENT_SSE_RESPONSE = OpenApiResponse(
    sse_schema(AgentEvent, "Server-Sent Events (stream: true): frames `event: <name>\\ndata: <json>\\n\\n`; "
                           "`x-sse-events` gives each event's data."),
    description="Server-Sent Events (stream: true).",
)

AGENT_DESCRIPTION = """\
The agent answers in several steps: the model calls read-only retrieval tools over the caller's tenant
(`hybrid_search`, `keyword_search`, `semantic_search`, `fetch_chunks`; with `graph_search: true` also
`graph_triplet_search` and `graph_neighbors`, whose facts cite the passages that state them), several at once when they are independent, then answers from what they returned, citing passages as [n].
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

_AGENT_RESPONSES: dict[Any, Any] = {
    (200, "application/json"): AgentCompletionOutputSerializer,
    (200, "text/event-stream"): AGENT_SSE_RESPONSE,
    **ERROR_RESPONSES,
    503: OpenApiResponse(AgentErrorSerializer, description="The model failed or the run timed out (stream: false); "
                                                           "the body names the run to resume."),
}


@extend_schema_view(post=extend_schema(
    request=AgentCompletionInputSerializer, responses=_AGENT_RESPONSES,
    summary="Ask the retrieval agent a question (a new run)", description=AGENT_DESCRIPTION,
))
class AgentCompletionApi(AsyncEndpointApi):
    """Access rules and schema of ``POST /v1/agent/completions``; requests are served by ``agent_completions``."""

    throttle_scope = "agent"


class RunNotResumableError(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "run_finished"
    default_detail = "This run has finished and cannot be resumed."


@extend_schema_view(post=extend_schema(
    request=AgentResumeInputSerializer,
    responses={**_AGENT_RESPONSES, 409: OpenApiResponse(ChatErrorSerializer, description=(
        "The run finished (run_finished) or is running (run_in_progress)."))},
    summary="Continue an agent run that stopped before finishing",
    description="Continues the run from its last completed step, with a fresh `max_steps` budget, the same bounds "
                "and the same response (or stream) as POST /v1/agent/completions. Runs that finished "
                "(completed, repeated_call, token_budget) answer 409.",
))
class AgentResumeApi(AsyncEndpointApi):
    """Access rules and schema of ``POST /v1/agent/runs/{run_id}/resume``; served by ``agent_run_resume``."""

    throttle_scope = "agent"


@dataclass(frozen=True)
class AgentAdmission:
    session: ChatSession
    stream: bool
    max_steps: int
    graph_search: bool
    # The caller as this request reads (rag.reader_of: the token's role cap, the groups read now).
    reader: rag.Reader | None
    prompt: str = ""
    run: AgentRun | None = None


def _agent_session(ctx: TenantContext, session_id: str) -> ChatSession:
    sessions = chat_sessions_of(tenant=ctx.tenant, principal=ctx.principal, kind=SessionKind.AGENT)
    return get_for_tenant(sessions.select_related("tenant"), tenant=ctx.tenant, public_id=session_id)


def _admit_completion(request: Request, ctx: TenantContext) -> AgentAdmission:
    data = AgentCompletionInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    return AgentAdmission(session=_agent_session(ctx, v["session_id"]), stream=v["stream"], max_steps=v["max_steps"],
                          graph_search=v["graph_search"], prompt=v["prompt"], reader=rag.reader_of(ctx))


def _admit_resume(request: Request, ctx: TenantContext, *, run_id: str) -> AgentAdmission:
    data = AgentResumeInputSerializer(data=request.data)
    data.is_valid(raise_exception=True)
    v = data.validated_data
    session = _agent_session(ctx, v["session_id"])
    if not is_run_id(run_id):
        raise exceptions.NotFound()  # no run could have this id
    runs = agent_runs_of(tenant=ctx.tenant, principal=ctx.principal).filter(session=session)
    run: AgentRun = get_for_tenant(runs, tenant=ctx.tenant, public_id=run_id)
    try:
        run = agent_run_claim(run=run, max_steps=v["max_steps"], graph_search=v["graph_search"])
    except RunNotResumable as refused:
        raise RunNotResumableError(refused.detail, code=refused.code) from None
    return AgentAdmission(session=session, stream=v["stream"], max_steps=v["max_steps"],
                          graph_search=v["graph_search"], run=run, reader=rag.reader_of(ctx))


async def _respond(admitted: AgentAdmission, events: AsyncIterator[AgentEvent]) -> HttpResponse:
    if admitted.stream:
        return sse_response(events)
    try:
        body = await collect_agent(events)
    except AgentFailed as failure:
        return unavailable(failure.error)
    return private(JsonResponse(body))


@serves(AgentCompletionApi)
async def agent_completions(request: HttpRequest) -> HttpResponse:
    admitted = await db_step(admit, AgentCompletionApi, request, _admit_completion)
    if isinstance(admitted, HttpResponse):
        return private(admitted)
    events = agent_stream(session=admitted.session, prompt=admitted.prompt, reader=admitted.reader,
                          max_steps=admitted.max_steps, graph_search=admitted.graph_search)
    return await _respond(admitted, events)


@serves(AgentResumeApi)
async def agent_run_resume(request: HttpRequest, run_id: str) -> HttpResponse:
    admitted = await db_step(admit, AgentResumeApi, request, _admit_resume, run_id=run_id)
    if isinstance(admitted, HttpResponse):
        return private(admitted)
    assert admitted.run is not None
    return await _respond(admitted, agent_resume_stream(session=admitted.session, run=admitted.run, reader=admitted.reader))
