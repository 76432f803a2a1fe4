"""The retrieval agent: bounded multi-step tool use over the caller's tenant, persisted runs, resume.

    async for event in agent_stream(session=session, prompt="...", reader=rag.reader_of(ctx), max_steps=4, graph_search=False):
        ...  # run, text_delta, step, tool_result, ..., citations, usage, completed | error (chat.agent.events)

    run = agent_run_claim(run=run, max_steps=4, graph_search=False)   # sync; raises RunNotResumable
    async for event in agent_resume_stream(session=session, run=run, reader=rag.reader_of(ctx)):
        ...

``collect_agent(events)`` turns either stream into the JSON response (raising
``AgentFailed``). Modules: ``model`` (one model turn with tools, through the
chat catalog's Router), ``tools`` (the tool surface and its execution),
``loop`` (bounds and events), ``services`` / ``selectors`` (``AgentRun`` rows).
"""

from __future__ import annotations

from chat.agent.loop import (
    DEFAULT_MAX_STEPS,
    MAX_STEPS_LIMIT,
    AgentFailed,
    agent_greeting,
    agent_resume_stream,
    agent_stream,
    collect_agent,
)
from chat.agent.selectors import agent_memory, agent_runs_of
from chat.agent.services import RunNotResumable, agent_run_claim

__all__ = [
    "DEFAULT_MAX_STEPS", "MAX_STEPS_LIMIT", "AgentFailed", "RunNotResumable", "agent_greeting", "agent_memory",
    "agent_resume_stream", "agent_run_claim", "agent_runs_of", "agent_stream", "collect_agent",
]
