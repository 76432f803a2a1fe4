"""The MCP server (the SDK's low-level ``Server``): ``tools/list`` and ``tools/call`` over ``chat.mcp.tools``.

Whose call it is comes from ``CALLER``, a context variable the transport sets before the SDK
sees the message: the HTTP app per request, after the bearer token and the tenant are resolved
(``chat.mcp.http``); ``manage.py mcp`` once, for the whole stdio connection. A handler that
finds no caller refuses: no code path serves a tool without a resolved tenant.
"""

from __future__ import annotations

import contextvars
import json
import logging
from types import SimpleNamespace
from typing import Any

import mcp_types as types
from asgiref.sync import sync_to_async
from django.db import DatabaseError
from mcp.server import Server, ServerRequestContext

from accounts.access import TenantContext
from chat.mcp import tools
from common.throttling import ScopedTokenThrottle, Throttled

logger = logging.getLogger(__name__)

CALLER: contextvars.ContextVar[TenantContext | None] = contextvars.ContextVar("quarry_mcp_caller", default=None)

INSTRUCTIONS = (
    "Quarry's knowledge base: search it with hybrid_search (or keyword_search / vector_search), read passages "
    "by chunk id with fetch_chunks, and browse documents with list_documents. Cite passages by their uri or "
    "document_id and chunk_id."
)


def _caller() -> TenantContext:
    ctx = CALLER.get()
    if ctx is None:
        raise tools.ToolError("No authenticated caller: send an API token.")
    return ctx


async def _list_tools(ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    caller = CALLER.get()
    graph = caller is not None and await sync_to_async(tools.graph_enabled)(caller)
    return types.ListToolsResult(tools=[
        types.Tool(
            name=spec.name, description=spec.description, input_schema=spec.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True,
                                              open_world_hint=False),
        )
        for spec in tools.tool_list(graph=graph)
    ])


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


# Every tool call counts against the token's "search" allowance, the one POST /v1/search uses:
# a client cannot get around the REST API's limit by asking through MCP.
THROTTLE_SCOPE = "search"


def _throttle(caller: TenantContext) -> None:
    """Raise ``Throttled`` when the caller's token used up its allowance (stdio as the shell has no token: no limit)."""
    if caller.token is None:
        return
    request = SimpleNamespace(auth=caller.token, user=caller.user, method="POST", META={})
    ScopedTokenThrottle().allow_request(request, SimpleNamespace(throttle_scope=THROTTLE_SCOPE))


async def _call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    try:
        caller = _caller()
        await sync_to_async(_throttle)(caller)
        result = await tools.call_tool(caller, params.name, params.arguments)
    except tools.ToolError as exc:
        return _error(str(exc))
    except Throttled as exc:
        return _error(str(exc.detail))
    except DatabaseError:
        logger.exception("mcp tool %s: database error", params.name)
        return _error("The knowledge base is unavailable right now; try again shortly.")
    except Exception:
        # A tool's failure is the caller's result to read, never a crashed connection.
        logger.exception("mcp tool %s failed", params.name)
        return _error("The tool failed unexpectedly.")
    return types.CallToolResult(
        content=[types.TextContent(text=json.dumps(result, ensure_ascii=False, default=str))],
        structured_content=result,
    )


def build_server() -> Server[Any]:
    """A new server; the HTTP app keeps one per process, ``manage.py mcp`` one per connection."""
    return Server(
        "quarry",
        version="1",
        title="Quarry knowledge base",
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools,
        on_call_tool=_call_tool,
        # Argument schemas by name, for the SDK's header validation (before any caller is known).
        get_tool_input_schema=tools.input_schema,
    )
