"""The MCP server through the SDK's own client: /mcp on a real uvicorn (streamable HTTP), and ``manage.py mcp`` (stdio).

acme and globex both hold a document ``guide`` (so the same chunk id ``guide:0`` exists in
both, with different text): no call of one tenant's token may ever return the other's.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from rest_framework.test import APIClient

from accounts.models import ApiToken
from knowledge import rag
from tests.conftest import World
from tests.factories import make_token
from tests.servers import ROOT, asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)

RETRIEVAL_TOOLS = ["hybrid_search", "keyword_search", "vector_search", "fetch_chunks", "list_documents"]
GLOBEX_SECRET = "Globex confidential"


@pytest.fixture(scope="module")
def base(django_db_setup: None) -> Iterator[str]:
    with asgi_server(child_env(QUARRY_MCP_GRAPH_SEARCH="false"), log_name="uvicorn-mcp") as url:
        yield url


@pytest.fixture
def indexed(world: World) -> World:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                        title="Uploading", uri="https://docs.example/guide", metadata={"team": "support"}),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings.",
                        title="Search modes", metadata={"team": "search"}),
    ])
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="globex").ingest)(
        [rag.RAGDocument("guide", f"{GLOBEX_SECRET}: quarterly upload numbers for the board.", title="Board")]
    )
    return world


@pytest.fixture
def acme_token(indexed: World) -> str:
    """A reader's token of acme (made here: async tests cannot touch the database)."""
    return make_token(indexed.acme, indexed.teammate)


@pytest.fixture
def globex_token(indexed: World) -> str:
    return make_token(indexed.globex, indexed.outsider)


@asynccontextmanager
async def mcp_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with create_mcp_http_client(headers=headers) as http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    # The text block carries the same JSON, for clients that read only text.
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


async def test_lists_the_retrieval_tools_and_no_graph_tool_when_graph_search_is_off(base: str, acme_token: str) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as client:
        listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == RETRIEVAL_TOOLS
    schemas = {tool.name: tool.input_schema for tool in listed.tools}
    assert schemas["hybrid_search"]["required"] == ["query"]
    assert set(schemas["hybrid_search"]["properties"]) == {"query", "limit", "filters", "rerank"}
    assert schemas["list_documents"]["properties"]["status"]["enum"] == ["queued", "processing", "ready", "failed", "cancelled"]
    assert all(tool.annotations.read_only_hint for tool in listed.tools)


async def test_hybrid_search_returns_structured_passages_of_the_callers_tenant(base: str, acme_token: str) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as client:
        found = structured(await client.call_tool("hybrid_search", {"query": "how are uploads processed", "limit": 3}))
        keyword = structured(await client.call_tool("keyword_search", {"query": "BM25"}))
        vector = structured(await client.call_tool("vector_search", {"query": "background workers"}))
    top = found["results"][0]
    assert top["chunk_id"] == "guide:0" and top["document_id"] == "guide"
    assert top["title"] == "Uploading" and top["uri"] == "https://docs.example/guide"
    assert top["text"].startswith("Editors upload files") and top["metadata"] == {"team": "support"}
    assert top["score"] > 0 and "rrf_score" in top and "rrf_rank" in top
    assert [hit["score"] for hit in found["results"]] == sorted((hit["score"] for hit in found["results"]), reverse=True)
    assert [hit["chunk_id"] for hit in keyword["results"]] == ["modes:0"] and "keyword_score" in keyword["results"][0]
    assert vector["results"] and all("semantic_similarity" in hit for hit in vector["results"])
    everything = json.dumps([found, keyword, vector])
    assert GLOBEX_SECRET not in everything


async def test_search_filters_by_metadata(base: str, acme_token: str) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as client:
        found = structured(await client.call_tool("hybrid_search", {"query": "search uploads", "filters": {"team": "search"}}))
    assert [hit["document_id"] for hit in found["results"]] == ["modes"]


async def test_fetch_chunks_reads_the_callers_tenant_only(base: str, acme_token: str, globex_token: str) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as acme:
        ours = structured(await acme.call_tool("fetch_chunks", {"ids": ["guide:0", "nothing:0", "nope"]}))
    async with mcp_client(f"{base}/mcp", globex_token) as globex:
        theirs = structured(await globex.call_tool("fetch_chunks", {"ids": ["guide:0", "modes:0"]}))
    assert [c["chunk_id"] for c in ours["results"]] == ["guide:0"] and ours["missing"] == ["nothing:0", "nope"]
    assert ours["results"][0]["text"].startswith("Editors upload") and ours["results"][0]["score"] is None
    assert [c["text"] for c in theirs["results"]] == [f"{GLOBEX_SECRET}: quarterly upload numbers for the board."]
    assert theirs["missing"] == ["modes:0"]  # acme's document does not exist for globex


async def test_list_documents_pages_and_filters(base: str, acme_token: str) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as client:
        first = structured(await client.call_tool("list_documents", {"limit": 1}))
        second = structured(await client.call_tool("list_documents", {"limit": 1, "offset": first["next_offset"]}))
        support = structured(await client.call_tool("list_documents", {"metadata": {"team": "support"}, "status": "ready"}))
        failed = structured(await client.call_tool("list_documents", {"status": "failed"}))
    assert first["count"] == 2 and first["next_offset"] == 1 and second["next_offset"] is None
    assert {first["documents"][0]["document_id"], second["documents"][0]["document_id"]} == {"guide", "modes"}
    assert [(d["document_id"], d["status"], d["chunk_count"], d["title"]) for d in support["documents"]] == [
        ("guide", "ready", 1, "Uploading")]
    assert failed == {"count": 0, "offset": 0, "limit": 20, "next_offset": None, "documents": []}


@pytest.fixture
def modes_cancelled(acme_token: str, indexed: World) -> str:
    """acme's "modes" with its latest request cancelled by an editor (stored as failed, cancelled)."""
    from knowledge.models import Document

    Document.objects.filter(tenant=indexed.acme, external_id="modes").update(status="failed", cancelled=True, phase="embedding")
    return acme_token


async def test_list_documents_reports_a_cancelled_request_as_cancelled_as_rest_does(base: str, modes_cancelled: str) -> None:
    async with mcp_client(f"{base}/mcp", modes_cancelled) as client:
        cancelled = structured(await client.call_tool("list_documents", {"status": "cancelled"}))
        failed = structured(await client.call_tool("list_documents", {"status": "failed"}))
    assert [(d["document_id"], d["status"]) for d in cancelled["documents"]] == [("modes", "cancelled")]
    assert failed["documents"] == []


@pytest.mark.parametrize(("tool", "arguments", "named"), [
    ("hybrid_search", {}, "query"),
    ("hybrid_search", {"query": "uploads", "limit": "lots"}, "limit"),
    ("hybrid_search", {"query": "uploads", "limit": 0}, "limit: must be between 1 and 10 (QUARRY_AGENT_TOOL_MAX_RESULTS), got 0"),
    ("hybrid_search", {"query": "uploads", "limit": 999}, "limit: must be between 1 and 10 (QUARRY_AGENT_TOOL_MAX_RESULTS), got 999"),
    ("keyword_search", {"query": "uploads", "filters": {"team": {"nested": 1}}}, "filters"),
    ("hybrid_search", {"query": "uploads", "colour": "red"}, "colour"),
    ("fetch_chunks", {"ids": ["not an id"]}, "ids"),
    ("list_documents", {"status": "archived"}, "status"),
    ("list_documents", {"limit": 0}, "limit"),
    ("list_documents", {"metadata": {"team": ["a", "b"]}}, "metadata.team"),
    ("graph_neighbors", {"entity": "Quarry"}, "graph_neighbors"),  # not offered when graph search is off
])
async def test_bad_arguments_are_tool_errors_naming_the_argument(
    base: str, acme_token: str, tool: str, arguments: dict[str, Any], named: str
) -> None:
    async with mcp_client(f"{base}/mcp", acme_token) as client:
        result = await client.call_tool(tool, arguments)
        still_serving = structured(await client.call_tool("list_documents", {}))
    assert result.is_error
    assert named in result.content[0].text, result.content[0].text
    assert still_serving["count"] == 2


def test_without_a_valid_token_it_is_401_with_www_authenticate(base: str, indexed: World) -> None:
    revoked = make_token(indexed.acme, indexed.teammate)
    ApiToken.objects.filter(owner=indexed.teammate).update(revoked_at=timezone.now())
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    for auth in ({}, {"Authorization": "Bearer qk_not-a-token"}, {"Authorization": f"Bearer {revoked}"}):
        response = httpx.post(f"{base}/mcp", json=body, headers={**headers, **auth})
        assert response.status_code == 401, (auth, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer ")
        assert "tools" not in response.text


def test_unknown_tokens_are_429_past_the_address_allowance_but_a_valid_token_still_passes(base: str, acme_token: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    misses = [httpx.post(f"{base}/mcp", json=body, headers={**headers, "Authorization": f"Bearer qry_guess{n}"})
              for n in range(31)]  # the default allowance: 30/min
    assert [r.status_code for r in misses] == [401] * 30 + [429]
    refused = misses[-1]
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.json()["error"] == "throttled" and "invalid API tokens from this address" in refused.json()["detail"]
    valid = httpx.post(f"{base}/mcp", json=body, headers={**headers, "Authorization": f"Bearer {acme_token}"})
    assert valid.status_code == 200 and "hybrid_search" in valid.text


async def test_the_sdk_client_fails_without_a_token(base: str, acme_token: str) -> None:
    with pytest.raises(BaseException):  # noqa: B017 - the SDK surfaces the 401 as its own error type
        async with mcp_client(f"{base}/mcp", None) as client:
            await client.list_tools()


def test_a_tenant_the_token_cannot_read_is_404_never_its_data(base: str, indexed: World) -> None:
    token = make_token(indexed.acme, indexed.owner)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "fetch_chunks", "arguments": {"ids": ["guide:0"]}}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
               "Authorization": f"Bearer {token}"}
    other = httpx.post(f"{base}/mcp?tenant=globex", json=body, headers=headers)
    assert other.status_code == 404 and other.json()["error"] == "tenant_not_found"
    assert GLOBEX_SECRET not in other.text
    own = httpx.post(f"{base}/mcp?tenant=acme", json=body, headers=headers)
    assert own.status_code == 200, own.text
    assert "Editors upload files" in own.text and GLOBEX_SECRET not in own.text


def test_a_body_over_the_bound_is_413(base: str, acme_token: str) -> None:
    huge = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "hybrid_search", "arguments": {"query": "x" * 300_000}}}
    response = httpx.post(f"{base}/mcp", json=huge, headers={
        "Authorization": f"Bearer {acme_token}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18"})
    assert response.status_code == 413, response.text


def test_an_unknown_host_header_is_refused(base: str, indexed: World) -> None:
    token = make_token(indexed.acme, indexed.owner)
    response = httpx.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers={
        "Host": "evil.example", "Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-06-18"})
    assert response.status_code in (400, 421), response.text
    assert "tools" not in response.text


def test_graph_tools_are_listed_when_graph_search_is_on(acme_token: str) -> None:
    token = acme_token

    async def names(url: str) -> list[str]:
        async with mcp_client(url, token) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            neighbors = await client.call_tool("graph_neighbors", {"entity": "Editors"})
            assert neighbors.content  # an answer (found or "no such entity"), not a protocol failure
            return tools

    with asgi_server(child_env(QUARRY_MCP_GRAPH_SEARCH="true"), log_name="uvicorn-mcp-graph") as url:
        listed = async_to_sync(names)(f"{url}/mcp")
    assert listed == [*RETRIEVAL_TOOLS[:4], "graph_triplet_search", "graph_neighbors", "list_documents"]


async def test_stdio_serves_the_same_tools_for_one_tenant(indexed: World) -> None:  # the 'cli' principal
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--tenant", "acme"],
                                   env=child_env(), cwd=str(ROOT))
    async with Client(params) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        found = structured(await client.call_tool("hybrid_search", {"query": "uploads processed"}))
        fetched = structured(await client.call_tool("fetch_chunks", {"ids": ["guide:0"]}))
        bad = await client.call_tool("hybrid_search", {"query": ""})
    assert listed == RETRIEVAL_TOOLS
    assert found["results"][0]["chunk_id"] == "guide:0"
    assert fetched["results"][0]["text"].startswith("Editors upload") and GLOBEX_SECRET not in json.dumps(found)
    assert bad.is_error and "query" in bad.content[0].text


async def test_stdio_with_a_token_serves_the_tokens_tenant(globex_token: str) -> None:
    token = globex_token
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"],
                                   env=child_env(QUARRY_MCP_TOKEN=token), cwd=str(ROOT))
    async with Client(params) as client:
        fetched = structured(await client.call_tool("fetch_chunks", {"ids": ["guide:0"]}))
    assert fetched["results"][0]["text"].startswith(GLOBEX_SECRET)


def test_stdio_refuses_a_tenant_the_token_cannot_read(globex_token: str) -> None:
    token = globex_token
    done = subprocess.run([sys.executable, "manage.py", "mcp", "--tenant", "acme"], cwd=ROOT, capture_output=True,
                          env=child_env(QUARRY_MCP_TOKEN=token), timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode != 0
    assert b"Tenant not found" in done.stderr and done.stdout == b""



def test_tool_calls_share_the_tokens_search_allowance_with_the_rest_api(acme_token: str, settings: Any) -> None:
    settings.QUARRY_THROTTLE_RATES = {**settings.QUARRY_THROTTLE_RATES, "search": "2/min"}
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {acme_token}")
    assert api.post("/v1/search", {"query": "uploads"}, format="json").status_code == 200

    async def two_calls() -> list[Any]:
        params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp"], cwd=str(ROOT),
                                       env=child_env(QUARRY_MCP_TOKEN=acme_token, QUARRY_THROTTLE_SEARCH="2/min"))
        async with Client(params) as client:
            return [await client.call_tool("keyword_search", {"query": "uploads"}) for _ in range(2)]

    first, second = async_to_sync(two_calls)()
    assert not first.is_error
    assert second.is_error and "Too many search requests for this token" in second.content[0].text


async def test_without_lifespan_events_the_first_request_starts_the_session_manager(acme_token: str) -> None:
    """A server run with ``--lifespan off`` (or one that never sends lifespan events) still serves /mcp."""
    from config.asgi import OuterRouter  # imported here: it builds Django's ASGI handler

    router = OuterRouter()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
               "Authorization": f"Bearer {acme_token}"}
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=router), base_url="http://127.0.0.1") as http:
            response = await http.post("/mcp", json=body, headers=headers)
            health = await http.get("/healthz")
    finally:
        await router.mcp.shutdown()
    assert response.status_code == 200, response.text
    assert [t["name"] for t in response.json()["result"]["tools"]] == RETRIEVAL_TOOLS
    assert health.status_code == 200  # everything else still goes to Django
