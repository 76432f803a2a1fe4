"""The bounded agent loop: model turns with tools, tool steps run concurrently, one answer with citations.

``agent_stream`` (a new run) and ``agent_resume_stream`` (a run claimed with
``agent_run_claim``) are the async generators every transport forwards (SSE,
WebSocket); ``collect_agent`` turns one into the JSON response. None of them
checks access: callers pass a session (and run) they loaded through the access
helper for the caller's tenant and principal, and the caller's reader as their
request reads (``rag.reader_of(ctx)``).

Bounds of one invocation: at most ``max_steps`` tool-using steps, then one turn
without tools to write the answer (``max_steps``); a call identical to an
earlier one ends the research the same way (``repeated_call``), and so does the
run's token budget (``token_budget``); the wall clock (``timeout``) and a
failing model (``provider_error``) stop it without an answer. Runs that stop
for ``max_steps``, ``timeout``, ``provider_error`` (or a client that left,
``cancelled``) can be resumed from their last completed step.

Privacy, as in ``chat.pipeline``: nothing here logs a prompt, a tool argument,
a passage or a model output; errors reach the caller as fixed codes and sentences.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from pathlib import Path
from typing import Any, TypeVar, cast

from django.conf import settings
from django.db import DatabaseError

from chat.agent.events import (
    AgentErrorData,
    AgentErrorEvent,
    AgentEvent,
    AgentResponse,
    ToolCallSummary,
    ToolResultData,
)
from chat.agent.model import ToolCallRequest, TurnResult, stream_turn
from chat.agent.selectors import agent_memory
from chat.agent.services import RunProgress, agent_run_answer, agent_run_checkpoint, agent_run_start, agent_run_stop
from chat.agent.tools import ParsedCall, Source, Toolbox, ToolOutcome, tool_specs, withhold_passages
from chat.events import AGENT_ERRORS, Citation, Usage
from chat.llm import CatalogError, ModelUnavailable, ReasoningDelta, TextDelta
from chat.models import AgentRun, ChatSession, StopReason
from chat.retrieval import unreadable_chunks
from common.db import db_step
from knowledge import rag
from knowledge.rag import limits

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_MAX_STEPS = 4
MAX_STEPS_LIMIT = 8

# What the model is told when it must answer without tools. A system message at the end: it is
# not the user's question (the offline model, for one, answers the last user message).
_WIND_DOWN: dict[str, str] = {
    StopReason.MAX_STEPS: "The research steps of this run are used up, so no more tools can be called.",
    StopReason.TOKEN_BUDGET: "The token budget of this run is used up, so no more tools can be called.",
    StopReason.REPEATED_CALL: "A tool call repeated an earlier one, so the research ends here and no more tools can be called.",
}
_ANSWER_NOW = (
    " Answer the question now from the passages the tools returned, citing their sources like [1]. "
    "If they do not answer it, say that the knowledge base does not answer the question."
)
_CITATION = re.compile(r"\[([^\[\]\n]{1,400})\]")


@functools.cache
def system_prompt() -> str:
    return (Path(__file__).resolve().parent / "system.md").read_text(encoding="utf-8").strip()


def agent_greeting(*, tenant_name: str) -> str:
    return (
        f"Hello! I research questions about the documents in {tenant_name}: I search them in several steps, "
        "answer only from what I find, cite the passages I use, and tell you when they do not answer your question."
    )


class AgentFailed(Exception):
    """``collect_agent``'s stream ended without an answer; ``error`` is the normalized error (with ``run_id``)."""

    def __init__(self, error: AgentErrorData) -> None:
        super().__init__(error["error"])
        self.error = error


def cite(answer: str, sources: list[Source]) -> list[Citation]:
    """The sources ``answer`` cites as ``[n]`` (or ``[chunk id]``), in order of first citation.

    Only chunks a tool returned in this run are sources; any other marker cites nothing.
    """
    by_number = {s["source"]: s for s in sources}
    by_chunk = {s["chunk_id"]: s for s in sources}
    cited: dict[str, Citation] = {}
    for match in _CITATION.finditer(answer):
        for token in re.split(r"[,;\s]+", match.group(1).strip()):
            token = token.strip().lstrip("#")
            source = by_number.get(int(token)) if token.isdigit() else by_chunk.get(token)
            if source is not None and source["chunk_id"] not in cited:
                cited[source["chunk_id"]] = {
                    "document_id": source["document_id"], "chunk_id": source["chunk_id"], "score": source["score"],
                }
    return list(cited.values())


def _check_request(*, max_steps: int, prompt: str | None = None) -> None:
    if not 1 <= max_steps <= MAX_STEPS_LIMIT:
        raise ValueError(f"max_steps must be between 1 and {MAX_STEPS_LIMIT}, got {max_steps}")
    if prompt is not None and (not prompt.strip() or len(prompt) > limits.MAX_QUERY_CHARS):
        raise ValueError(f"the prompt must be non-blank and at most {limits.MAX_QUERY_CHARS} characters")


async def _tenant_of(session: ChatSession) -> Any:
    # The views load the session with its tenant; anything else pays one query.
    return session.tenant if ChatSession.tenant.is_cached(session) else await db_step(lambda: session.tenant)


async def agent_stream(
    *, session: ChatSession, prompt: str, reader: rag.Reader | None, max_steps: int = DEFAULT_MAX_STEPS,
    graph_search: bool = False,
) -> AsyncIterator[AgentEvent]:
    """Start a run of ``prompt`` in the agent ``session`` and stream it (see ``chat.agent.events``).

    Preconditions: ``session`` was loaded for the caller's tenant and principal and
    is an agent session; ``prompt`` is non-blank and at most 16,384 characters;
    ``1 <= max_steps <= 8``. ``reader``: who asks, as the request reads (``rag.reader_of(ctx)``, read for
    this request: an API token's role cap and a membership or access change count from this invocation
    on; None only for who reads everything): every tool reads as them. Closing the stream early (a client
    that left) stops the run as ``cancelled``, resumable.
    """
    _check_request(max_steps=max_steps, prompt=prompt)
    tenant = await _tenant_of(session)

    def begin() -> AgentRun:
        memory = agent_memory(session=session, limit=settings.QUARRY_CHAT_MEMORY_TURNS)
        return agent_run_start(session=session, prompt=prompt, memory=memory, max_steps=max_steps, graph_search=graph_search)

    try:
        run = await db_step(begin)
    except DatabaseError as exc:
        logger.error("agent run not started: %s", type(exc).__name__)
        yield {"event": "error", "data": {"error": "database_unavailable", "detail": AGENT_ERRORS["database_unavailable"]}}
        return
    async with aclosing(_Invocation(run=run, session=session, tenant=tenant, resumed=False, reader=reader).events()) as events:
        async for event in events:
            yield event


async def agent_resume_stream(*, session: ChatSession, run: AgentRun, reader: rag.Reader | None) -> AsyncIterator[AgentEvent]:
    """Continue ``run`` from its last completed step and stream it, like ``agent_stream``.

    Precondition: ``run`` belongs to ``session`` (loaded for the caller) and was
    claimed with ``chat.agent.services.agent_run_claim`` (which set this
    invocation's ``max_steps`` and ``graph_search``). ``reader``: as for ``agent_stream``, read for this
    request; what the run's tools returned earlier that it may no longer read is neither replayed to the
    model (``withhold_passages``) nor citable.
    """
    _check_request(max_steps=run.max_steps)
    tenant = await _tenant_of(session)
    async with aclosing(_Invocation(run=run, session=session, tenant=tenant, resumed=True, reader=reader).events()) as events:
        async for event in events:
            yield event


async def collect_agent(events: AsyncIterator[AgentEvent]) -> AgentResponse:
    """The ``completed`` response of an agent event stream; raises ``AgentFailed`` on its ``error`` event."""
    async with aclosing(events):  # type: ignore[type-var]
        async for event in events:
            if event["event"] == "completed":
                return event["data"]  # type: ignore[return-value]
            if event["event"] == "error":
                raise AgentFailed(event["data"])  # type: ignore[arg-type]
    raise AgentFailed({"error": "internal_error", "detail": AGENT_ERRORS["internal_error"]})  # pragma: no cover


class _Invocation:
    """One invocation of a run: a new run, or one resume. Holds what it accumulates until it is saved."""

    def __init__(self, *, run: AgentRun, session: ChatSession, tenant: Any, resumed: bool, reader: rag.Reader | None) -> None:
        self.run = run
        self.session = session
        self.tenant = tenant
        self.resumed = resumed
        self.reader = reader
        self.withheld: frozenset[str] = frozenset()  # the run's earlier passages the reader may no longer read
        self.progress = RunProgress.of(run)
        self.tools = tool_specs(graph_search=run.graph_search)
        self.toolbox = Toolbox(tenant=tenant, graph_search=run.graph_search, sources=self.progress.sources, reader=reader)
        self.started = time.monotonic()
        self.deadline = asyncio.get_running_loop().time() + settings.QUARRY_AGENT_TIMEOUT_SECONDS
        self.steps_taken = 0  # tool-using steps of this invocation (max_steps bounds these)
        self.pending: str | None = None  # a reason to stop researching, found during a step
        self.last: TurnResult | None = None

    # --- the loop ------------------------------------------------------------------------------

    async def events(self) -> AsyncIterator[AgentEvent]:
        run = self.run
        final: TurnResult | None = None
        stop_reason: str = StopReason.COMPLETED
        try:
            yield {"event": "run", "data": {
                "session_id": self.session.public_id, "run_id": run.public_id, "resumed": self.resumed,
                "max_steps": run.max_steps, "graph_search": run.graph_search,
                "tools": [t["function"]["name"] for t in self.tools],
            }}
            if self.resumed:
                await self._withhold_unreadable()
            while final is None:
                reason = self._wind_down_reason()
                if reason is not None:
                    async with aclosing(self._turn(tools=False, note=_WIND_DOWN[reason] + _ANSWER_NOW)) as events:
                        async for event in events:
                            yield event
                    final, stop_reason = self._last(), reason
                    continue
                async with aclosing(self._turn(tools=True)) as events:
                    async for event in events:
                        yield event
                turn = self._last()
                if not turn.tool_calls:
                    final = turn
                    continue
                async with aclosing(self._step(turn)) as events:
                    async for event in events:
                        yield event
        except TimeoutError:
            logger.warning("agent run %s timed out after %.0f ms", run.public_id, self._elapsed_ms())
            yield await self._stopped(StopReason.TIMEOUT, "agent_timeout")
            return
        except (ModelUnavailable, CatalogError) as exc:
            logger.error("agent run %s: the model failed in tenant %s: %s", run.public_id, self.tenant.slug, exc)
            yield await self._stopped(StopReason.PROVIDER_ERROR, "model_unavailable")
            return
        except DatabaseError as exc:
            logger.error("agent run %s: the database failed: %s", run.public_id, type(exc).__name__)
            yield self._error("database_unavailable")
            return
        except (asyncio.CancelledError, GeneratorExit):
            logger.info("agent run %s cancelled after %.0f ms (the client left)", run.public_id, self._elapsed_ms())
            await self._save_stop(StopReason.CANCELLED, "cancelled")
            raise
        except Exception:
            logger.exception("agent run %s failed in tenant %s", run.public_id, self.tenant.slug)
            yield await self._stopped("", "internal_error")
            return
        finally:
            await self.toolbox.close()

        assert final is not None  # the loop ends only with an answer, or returns above
        answer = final.text
        # A withheld passage keeps its number (the run's numbering is stable) but is never cited.
        citations = cite(answer, [s for s in self.progress.sources if s["chunk_id"] not in self.withheld])
        if stop_reason != StopReason.MAX_STEPS:
            # A finished run keeps its answer in the conversation; a resumable one continues researching instead.
            self.progress.messages.append({"role": "assistant", "content": answer})
        try:
            await db_step(
                agent_run_answer, run=run, progress=self.progress, stop_reason=stop_reason, answer=answer, citations=citations
            )
        except DatabaseError as exc:
            logger.error("agent run %s: the answer was not stored: %s", run.public_id, type(exc).__name__)
            yield self._error("database_unavailable")
            return
        finished = final.finished
        usage = cast(Usage, dict(self.progress.usage))
        yield {"event": "citations", "data": {"session_id": self.session.public_id, "run_id": run.public_id, "citations": citations}}
        yield {"event": "usage", "data": usage}
        response: AgentResponse = {
            "id": finished.id, "run_id": run.public_id, "model": finished.model, "provider": finished.provider,
            "provider_model": finished.provider_model, "message": {"role": "assistant", "content": answer},
            "finish_reason": finished.finish_reason, "stop_reason": stop_reason, "usage": usage,  # type: ignore[typeddict-item]
            "turns": self.progress.turns, "tool_call_count": self.progress.tool_call_count,
            "tool_calls": self._tool_call_summaries(), "session_id": self.session.public_id, "citations": citations,
        }
        logger.info(
            "agent run %s answered in tenant %s: stop %s, %d steps (%d now), %d tool calls, %d turns, %d+%d tokens, "
            "%d citations, model %s via %s/%s, %.0f ms",
            run.public_id, self.tenant.slug, stop_reason, len(self.progress.steps), self.steps_taken,
            self.progress.tool_call_count, self.progress.turns, usage["prompt_tokens"], usage["completion_tokens"],
            len(citations), finished.model, finished.provider, finished.provider_model, self._elapsed_ms(),
        )
        yield {"event": "completed", "data": response}

    async def _withhold_unreadable(self) -> None:
        """Before a resumed run's first turn: find the passages its tools returned that the reader may no longer
        read (one query on the chunks' access) and take them out of what the model is sent again."""
        sources = self.progress.sources
        self.withheld = frozenset(await db_step(
            unreadable_chunks, tenant_id=self.tenant.pk, chunk_ids=[s["chunk_id"] for s in sources], reader=self.reader,
        ))
        if self.withheld:
            self.progress.messages = withhold_passages(self.progress.messages, withheld=self.withheld, sources=sources)

    def _wind_down_reason(self) -> str | None:
        if self.pending is not None:
            return self.pending
        if self.progress.usage["total_tokens"] >= settings.QUARRY_AGENT_TOKEN_BUDGET:
            return StopReason.TOKEN_BUDGET
        if self.steps_taken >= self.run.max_steps:
            return StopReason.MAX_STEPS
        return None

    async def _turn(self, *, tools: bool, note: str | None = None) -> AsyncIterator[AgentEvent]:
        """One model call; its deltas as events. Sets ``self.last`` and counts the turn and its usage."""
        number = self.progress.turns + 1
        messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()}, *self.progress.messages]
        if note is not None:
            messages.append({"role": "system", "content": note})
        self.last = None
        stream = stream_turn(messages, tools=self.tools if tools else None)
        async with aclosing(stream):
            while True:
                try:
                    item = await self._within(anext(stream))
                except StopAsyncIteration:
                    break
                if isinstance(item, TextDelta):
                    yield {"event": "text_delta", "data": {"text": item.text, "turn": number}}
                elif isinstance(item, ReasoningDelta):
                    yield {"event": "reasoning_delta", "data": {"text": item.text, "turn": number}}
                elif isinstance(item, TurnResult):
                    self.last = item
        result = self._last()
        if not tools and result.tool_calls:
            # A model that calls tools it was not offered gets no tools: only its text counts.
            self.last = TurnResult(text=result.text, tool_calls=(), finished=result.finished)
        self.progress.turns = number
        for key, value in result.finished.usage.as_dict().items():
            self.progress.usage[key] = self.progress.usage.get(key, 0) + value
        self.progress.model = f"{result.finished.provider}/{result.finished.provider_model}"

    async def _step(self, turn: TurnResult) -> AsyncIterator[AgentEvent]:
        """Run the tool calls of ``turn`` (concurrently), add them and their results to the run, save it."""
        self.steps_taken += 1
        step = len(self.progress.steps) + 1
        calls = self._parse_calls(turn.tool_calls)
        yield {"event": "step", "data": {"step": step, "turn": self.progress.turns, "calls": [
            {"id": c.id, "tool": c.name, "arguments": c.arguments} for c in calls
        ]}}
        outcomes: dict[int, ToolOutcome] = {}
        runnable: list[int] = []
        new: set[str] = set()
        cap = settings.QUARRY_AGENT_MAX_TOOL_CALLS_PER_STEP
        for index, call in enumerate(calls):
            if index >= cap:
                outcomes[index] = ToolOutcome.failure(f"At most {cap} tool calls run per turn; this one did not run.")
            elif call.signature in self.progress.seen or call.signature in new:
                outcomes[index] = ToolOutcome.failure(
                    "This exact call was made before and did not run again; its result is above. The research ends here."
                )
                self.pending = StopReason.REPEATED_CALL
            else:
                runnable.append(index)
                new.add(call.signature)
        if runnable:
            results = await self._within(self.toolbox.run_all([calls[i] for i in runnable]))
            outcomes.update(zip(runnable, results, strict=True))
        self.progress.seen |= new

        self.progress.messages.append({
            "role": "assistant", "content": turn.text or None,
            "tool_calls": [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _arguments_json(c)}}
                           for c in calls],
        })
        records = []
        for index, call in enumerate(calls):
            outcome = outcomes[index]
            self.progress.messages.append(outcome.message_for(call.id))
            record: dict[str, Any] = {"id": call.id, "tool": call.name, "arguments": call.arguments, "ok": outcome.ok,
                                      "chunk_ids": outcome.chunk_ids}
            if outcome.error is not None:
                record["error"] = outcome.error
            records.append(record)
        self.progress.steps.append({"step": step, "turn": self.progress.turns, "calls": records})
        self.progress.tool_call_count += len(calls)
        await db_step(agent_run_checkpoint, run=self.run, progress=self.progress)
        for record in records:
            data: ToolResultData = {"step": step, "id": record["id"], "tool": record["tool"], "ok": record["ok"],
                                    "chunk_ids": record["chunk_ids"]}
            if "error" in record:
                data["error"] = record["error"]
            yield {"event": "tool_result", "data": data}

    def _parse_calls(self, requests: tuple[ToolCallRequest, ...]) -> list[ParsedCall]:
        """Parsed calls with ids unique in the run's conversation (providers may omit or reuse them)."""
        used = {m["tool_call_id"] for m in self.progress.messages if m.get("role") == "tool"}
        calls = []
        for index, request in enumerate(requests, start=1):
            call_id = request.id
            if not call_id or call_id in used or len(call_id) > 64:
                call_id = f"call_{self.progress.turns}_{index}"
            used.add(call_id)
            calls.append(ParsedCall.of(request, call_id=call_id))
        return calls

    # --- helpers -------------------------------------------------------------------------------

    async def _within(self, awaitable: Awaitable[T]) -> T:
        """``awaitable``, cancelled with ``TimeoutError`` at the invocation's deadline."""
        async with asyncio.timeout_at(self.deadline):
            return await awaitable

    def _last(self) -> TurnResult:
        if self.last is None:  # pragma: no cover - stream_turn always ends with a TurnResult or raises
            raise ModelUnavailable("the model stream ended without a result")
        return self.last

    def _tool_call_summaries(self) -> list[ToolCallSummary]:
        return [{"step": s["step"], "tool": c["tool"], "ok": c["ok"]} for s in self.progress.steps for c in s["calls"]]

    def _elapsed_ms(self) -> float:
        return 1000 * (time.monotonic() - self.started)

    def _error(self, code: str, stop_reason: str | None = None) -> AgentErrorEvent:
        data: AgentErrorData = {"error": code, "detail": AGENT_ERRORS[code], "run_id": self.run.public_id}
        if stop_reason:
            data["stop_reason"] = stop_reason
        return {"event": "error", "data": data}

    async def _save_stop(self, stop_reason: str, error: str) -> bool:
        """Record the stop (progress so far: completed steps only); best effort, it may run while cancelled."""
        try:
            await asyncio.shield(db_step(
                agent_run_stop, run=self.run, progress=self.progress, stop_reason=stop_reason, error=error,
            ))
        except DatabaseError as exc:
            logger.error("agent run %s: the stop was not stored: %s", self.run.public_id, type(exc).__name__)
            return False
        return True

    async def _stopped(self, stop_reason: str, code: str) -> AgentErrorEvent:
        if not await self._save_stop(stop_reason, code):
            return self._error("database_unavailable", stop_reason or None)
        return self._error(code, stop_reason or None)


def _arguments_json(call: ParsedCall) -> str:
    """The arguments as they go back to the provider: always a JSON object (some providers parse them)."""
    return json.dumps(call.arguments if isinstance(call.arguments, dict) else {}, ensure_ascii=False)
