"""The MCP tools: Quarry's read-only retrieval over one tenant, as JSON-schema tools with structured results.

Thin adapters. The search, fetch and graph tools run through the agent's ``Toolbox``
(``chat.agent.tools``), hence through ``rag.tenant_service(tenant)`` and the RAG API's own
validation: the same bounds, the same sentences for a bad argument, the same timeouts.
``vector_search`` is the agent's ``semantic_search`` under the name MCP clients know.
``list_documents`` reads the tenant's document rows (``knowledge.models``, the one read the
RAG API has no call for), paged and filtered by status and metadata.

Every result is ``{"results": [passage, ...], ...}`` where a passage is ``{title, uri,
document_id, chunk_id, score, text}`` plus the hit's extras (``rrf_score``,
``semantic_similarity``, ``graph_path``...) and its ``metadata``. A failure is a
``ToolError`` whose message names the argument; the server turns it into a tool result with
``isError: true``, never a protocol error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from accounts.access import TenantContext
from accounts.models import Role
from chat.agent.tools import SEARCH_TOOLS, Found, Toolbox, ToolFailure, tool_specs
from common import replicas
from knowledge import rag
from knowledge.models import API_STATUSES, Document

# MCP name -> the agent tool it adapts.
_AGENT_NAMES: dict[str, str] = {
    "hybrid_search": "hybrid_search",
    "keyword_search": "keyword_search",
    "vector_search": "semantic_search",
    "fetch_chunks": "fetch_chunks",
    "graph_triplet_search": "graph_triplet_search",
    "graph_neighbors": "graph_neighbors",
}
LIST_DOCUMENTS = "list_documents"
GRAPH_TOOL_NAMES = ("graph_triplet_search", "graph_neighbors")
# list_documents pages: the REST API's bounds (GET /v1/documents).
MAX_PAGE = 100
DEFAULT_PAGE = 20
MAX_OFFSET = 1_000_000_000
MAX_METADATA_FIELDS = 64

_SEARCH_TEXT = {
    "hybrid_search": "Search the knowledge base by meaning and by words together (the best default).",
    "keyword_search": "Search the knowledge base for words (BM25): best for exact names, codes, numbers or phrases.",
    "vector_search": "Search the knowledge base by meaning (embedding cosine similarity): best for paraphrases.",
}
_RESULT_TEXT = (
    " Returns passages best first: title, uri, document_id, chunk_id, score, text, metadata and the search's "
    "own scores. Read neighbouring passages with fetch_chunks ('<document id>:<n+1>')."
)


class ToolError(Exception):
    """A tool call that cannot be answered; the message is one sentence for the caller, naming the argument."""


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


def _agent_schema(agent_name: str, *, graph: bool) -> dict[str, Any]:
    for spec in tool_specs(graph_search=graph):
        if spec["function"]["name"] == agent_name:
            return spec["function"]
    raise KeyError(agent_name)


def _list_documents_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": list(API_STATUSES),
                       "description": "Only documents in this state (cancelled: an editor cancelled the latest request)."},
            "metadata": {
                "type": "object", "maxProperties": MAX_METADATA_FIELDS,
                "description": "Only documents whose metadata has all these field: value pairs.",
                "additionalProperties": {"type": ["string", "number", "boolean"]},
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "description": f"Page size (default {DEFAULT_PAGE})."},
            "offset": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET, "description": "Documents to skip (default 0)."},
        },
        "additionalProperties": False,
    }


def tool_list(*, graph: bool) -> list[ToolSpec]:
    """The tools of this deployment, in a stable order; the graph tools only when ``graph``."""
    specs = []
    for name, agent_name in _AGENT_NAMES.items():
        if name in GRAPH_TOOL_NAMES and not graph:
            continue
        agent = _agent_schema(agent_name, graph=True)
        description = _SEARCH_TEXT[name] + _RESULT_TEXT if name in _SEARCH_TEXT else agent["description"]
        if name == "hybrid_search" and graph:
            description += " The knowledge graph adds up to a few passages beyond the limit, each with its graph_path."
        specs.append(ToolSpec(name, description, agent["parameters"]))
    specs.append(ToolSpec(
        LIST_DOCUMENTS,
        "List the knowledge base's documents, newest first, a page at a time: document_id, title, uri, status, "
        "chunk_count, metadata. Filter by status and by metadata values.",
        _list_documents_schema(),
    ))
    return specs


def input_schema(name: str) -> dict[str, Any] | None:
    """A tool's argument schema by name, whatever the deployment (None for an unknown name)."""
    for spec in tool_list(graph=True):
        if spec.name == name:
            return spec.input_schema
    return None


def graph_enabled(ctx: TenantContext) -> bool:
    """Whether this deployment offers graph search (``QUARRY_MCP_GRAPH_SEARCH``) and the backend keeps a graph."""
    if not settings.QUARRY_MCP_GRAPH_SEARCH:
        return False
    service = rag.tenant_service(ctx.tenant.slug)
    return service.has_graph


async def call_tool(ctx: TenantContext, name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """Run tool ``name`` for ``ctx``; the structured result, or ``ToolError`` with a sentence.

    Preconditions: ``ctx`` is resolved (authenticated, its tenant readable by it).
    """
    if not ctx.has_role(Role.READER):
        raise ToolError("This token may not read the knowledge base.")
    arguments = {} if arguments is None else arguments
    if not isinstance(arguments, dict):
        raise ToolError("arguments: must be a JSON object")
    graph = graph_enabled(ctx)
    known = [spec.name for spec in tool_list(graph=graph)]
    if name not in known:
        raise ToolError(f"There is no tool called {name[:64]!r}. The tools are: {', '.join(known)}.")
    if name == LIST_DOCUMENTS:
        return await _list_documents(ctx, arguments)
    reader = await sync_to_async(rag.reader_of)(ctx)  # the token's owner and their groups, read for this call
    toolbox = Toolbox(tenant=ctx.tenant, graph_search=graph, sources=[], reader=reader)
    try:
        found = await toolbox.find(_AGENT_NAMES[name], arguments)
    finally:
        await toolbox.close()
    if isinstance(found, ToolFailure):
        raise ToolError(str(found))
    return _present(found, scored=_AGENT_NAMES[name] in SEARCH_TOOLS)


def _present(found: Found, *, scored: bool) -> dict[str, Any]:
    limit = settings.QUARRY_MCP_MAX_TEXT_CHARS
    results = []
    for chunk, score in found.hits:
        passage: dict[str, Any] = {
            "title": chunk.title, "uri": chunk.uri, "document_id": chunk.document_id, "chunk_id": chunk.chunk_id,
            "score": score if scored else None, "text": chunk.text if len(chunk.text) <= limit else chunk.text[:limit],
            "metadata": dict(chunk.metadata),
            **found.details.get(chunk.chunk_id, {}),
        }
        if len(chunk.text) > limit:
            passage["truncated"] = True  # the whole passage: fetch_chunks has the same cap; the document page has all
            passage["length"] = len(chunk.text)
        results.append(passage)
    return {"results": results, **found.extra, **found.refs}


# --- list_documents --------------------------------------------------------------------------


def _int_argument(arguments: dict[str, Any], name: str, default: int, lowest: int, highest: int) -> int:
    value = arguments.get(name, default)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name}: must be an integer")
    if not lowest <= value <= highest:
        raise ToolError(f"{name}: must be between {lowest} and {highest}, got {value}")
    return value


def _metadata_filter(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolError("metadata: must be an object of field: value pairs")
    if len(value) > MAX_METADATA_FIELDS:
        raise ToolError(f"metadata: at most {MAX_METADATA_FIELDS} fields, got {len(value)}")
    for field_name, item in value.items():
        if not field_name or len(field_name) > 200:
            raise ToolError("metadata: field names must be 1 to 200 characters")
        if isinstance(item, float) and not math.isfinite(item):
            raise ToolError(f"metadata.{field_name}: must be a finite number")
        if not isinstance(item, str | int | float | bool):
            # A list or object would be read as containment, a wider match than the caller asked for.
            raise ToolError(f"metadata.{field_name}: must be a string, number or boolean")
    return value


async def _list_documents(ctx: TenantContext, arguments: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(arguments) - {"status", "metadata", "limit", "offset"})
    if unknown:
        raise ToolError(f"unexpected argument(s) {', '.join(unknown)}; this tool takes status, metadata, limit, offset")
    status = arguments.get("status")
    if status is not None and status not in API_STATUSES:
        raise ToolError(f"status: must be one of {', '.join(API_STATUSES)}")
    metadata = _metadata_filter(arguments.get("metadata"))
    limit = _int_argument(arguments, "limit", DEFAULT_PAGE, 1, MAX_PAGE)
    offset = _int_argument(arguments, "offset", 0, 0, MAX_OFFSET)
    # The caller's groups, read on the primary before the list may go to a replica: a membership change holds at once.
    reader = await sync_to_async(rag.reader_of)(ctx)
    # On the request's replica when it has one (common.replicas); MCP never writes, so it is never pinned by itself.
    return await sync_to_async(replicas.replica_read)(
        lambda _alias: _document_page(ctx, reader, status=status, metadata=metadata, limit=limit, offset=offset), tenant=ctx.tenant.slug)


def _document_page(ctx: TenantContext, reader: rag.Reader | None, *, status: str | None, metadata: dict[str, Any], limit: int,
                   offset: int) -> dict[str, Any]:
    # Newest first, like GET /v1/documents; the tenant filter comes first, always.
    # Only what the caller may read: a restricted document is neither listed nor counted.
    documents = Document.objects.for_tenant(ctx.tenant.pk).readable_by(None if reader is None else reader.principals).order_by("-updated_at", "-id")
    if status:
        documents = documents.in_api_status(status)
    if metadata:
        documents = documents.filter(metadata__contains=metadata)  # JSONB containment: every pair must match
    count = documents.count()
    rows = documents.only("external_id", "title", "uri", "status", "cancelled", "chunk_count", "metadata", "error", "updated_at")
    page = [
        {"document_id": d.external_id, "title": d.title or None, "uri": d.uri or None, "status": d.api_status,
         "chunk_count": d.chunk_count, "metadata": d.metadata, "error": d.error or None, "updated_at": d.updated_at.isoformat()}
        for d in rows[offset : offset + limit]
    ]
    following = offset + limit
    return {"count": count, "offset": offset, "limit": limit, "next_offset": following if following < count else None,
            "documents": page}
