"""Read replicas (DATABASE_REPLICA_URLS) against a real streaming replica of the test database.

The replica (tests/replica.py, one per session) streams from the test run's own PostgreSQL. Every test
serves the app in a real uvicorn process pointed at both, so routing, health checks, pins and the
fall-back to the primary are the production code paths. Which server answered is told by the data:
with the replica's replay paused, a document written since exists on the primary only.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx
import pytest

from accounts.models import Role
from common.replicas import ReplicaRouter
from tests.factories import make_member, make_tenant, make_token
from tests.replica import StreamingReplica
from tests.servers import asgi_server, child_env, read_log, wait_for
from tests.test_settings import GOOD_KEY, import_settings

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Callers:
    base: str
    editor: str  # a token that writes
    reader: str  # a token of another user ("looker") that only reads
    admin: str  # a token of the tenant's admin ("boss"), who manages groups and access lists


@contextmanager
def served(replica: StreamingReplica, *, max_lag: float, log_name: str, slug: str = "replicated") -> Iterator[Callers]:
    """The app on the test database with ``replica`` as its read replica; waits until it uses the replica."""
    tenant = make_tenant(slug)
    editor = make_token(tenant, make_member(tenant, Role.EDITOR, "writer"))
    reader = make_token(tenant, make_member(tenant, Role.READER, "looker"))
    admin = make_token(tenant, make_member(tenant, Role.ADMIN, "boss"))
    replica.wait_caught_up()
    env = child_env(DATABASE_REPLICA_URLS=replica.url, QUARRY_REPLICA_MAX_LAG_SECONDS=str(max_lag),
                    QUARRY_EMBEDDING_MODEL="none", QUARRY_WARM_UP="0")
    with asgi_server(env, log_name=log_name) as base:
        wait_for(lambda: replica_state(base)["usable"], timeout=30, what="the server to find its replica healthy")
        yield Callers(base=base, editor=editor, reader=reader, admin=admin)


def replica_state(base: str) -> dict[str, object]:
    body = httpx.get(f"{base}/readyz", timeout=10).json()
    return body["replicas"]["replica_1"]


def ingest(callers: Callers, doc_id: str, text: str, *, token: str | None = None, access: dict[str, list[str]] | None = None) -> None:
    body: dict[str, object] = {"documents": [{"id": doc_id, "text": text}]}
    if access is not None:
        body["access"] = access
    response = httpx.post(f"{callers.base}/v1/documents", headers={"Authorization": f"Bearer {token or callers.editor}"},
                          json=body, timeout=60)
    assert response.status_code == 200, response.text


def call(callers: Callers, method: str, path: str, body: dict[str, object] | None = None) -> None:
    """One request of the tenant's admin that must succeed."""
    response = httpx.request(method, f"{callers.base}{path}", headers={"Authorization": f"Bearer {callers.admin}"}, json=body,
                             timeout=60)
    assert response.status_code < 300, response.text


def found(callers: Callers, token: str, words: str) -> list[str]:
    response = httpx.post(f"{callers.base}/v1/search", headers={"Authorization": f"Bearer {token}"},
                          json={"query": words, "mode": "keyword", "limit": 5}, timeout=60)
    assert response.status_code == 200, response.text
    return [hit["document_id"] for hit in response.json()["hits"]]


def listed(callers: Callers, token: str) -> set[str]:
    response = httpx.get(f"{callers.base}/v1/documents", headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert response.status_code == 200, response.text
    return {d["id"] for d in response.json()["documents"]}


def mcp_text(callers: Callers, token: str, tool: str, arguments: dict[str, object]) -> str:
    """The result of one MCP tool call (JSON-RPC over /mcp), as text."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
               "Authorization": f"Bearer {token}"}
    response = httpx.post(f"{callers.base}/mcp", json=body, headers=headers, timeout=60)
    assert response.status_code == 200 and '"isError":false' in response.text.replace(" ", ""), response.text
    return response.text


def chat_retrieved(callers: Callers, token: str, prompt: str) -> set[str]:
    """The documents a chat answer (the built-in offline model) was given, cited or not."""
    headers = {"Authorization": f"Bearer {token}"}
    session = httpx.post(f"{callers.base}/v1/chat/sessions", json={}, headers=headers, timeout=60)
    assert session.status_code == 201, session.text
    response = httpx.post(f"{callers.base}/v1/chat/completions", headers=headers, timeout=120,
                          json={"session_id": session.json()["session_id"], "prompt": prompt})
    assert response.status_code == 200, response.text
    body = response.json()
    return {c["document_id"] for c in body["citations"] + body.get("also_retrieved", [])}


def on_replica(replica: StreamingReplica, doc_id: str) -> bool:
    with replica.connect() as conn:
        return conn.execute("SELECT EXISTS (SELECT 1 FROM knowledge_document WHERE external_id = %s)", [doc_id]).fetchone()[0]


@contextmanager
def replay_paused(replica: StreamingReplica) -> Iterator[None]:
    replica.pause_replay()
    try:
        yield
    finally:
        replica.resume_replay()
        replica.wait_caught_up()


def test_searches_and_lists_read_the_replica_while_the_writer_reads_its_own_write(streaming_replica: StreamingReplica) -> None:
    with served(streaming_replica, max_lag=3600, log_name="uvicorn-replica-routing") as callers:
        ingest(callers, "settled", "granite settles slowly")
        streaming_replica.wait_caught_up()
        assert found(callers, callers.reader, "granite") == ["settled"]
        with replay_paused(streaming_replica):
            ingest(callers, "fresh", "zebraquartz is a fresh word")
            assert not on_replica(streaming_replica, "fresh")
            # The reader's search and list come from the replica (healthy within the bound, replay paused).
            assert found(callers, callers.reader, "zebraquartz") == []
            assert listed(callers, callers.reader) == {"settled"}
            # Chat's retrieval too, although the exchange itself is written (on the primary) meanwhile.
            assert "fresh" not in chat_retrieved(callers, callers.reader, "What is zebraquartz?")
            assert "fresh" in chat_retrieved(callers, callers.editor, "What is zebraquartz?")
            # MCP's reads too: the same backend search, and its own document list.
            assert "zebraquartz" not in mcp_text(callers, callers.reader, "keyword_search", {"query": "zebraquartz"})
            assert '\\"fresh\\"' not in mcp_text(callers, callers.reader, "list_documents", {})
            assert "settled" in mcp_text(callers, callers.reader, "list_documents", {})
            # The writer is pinned to the primary: it sees its own document at once.
            assert found(callers, callers.editor, "zebraquartz") == ["fresh"]
            assert listed(callers, callers.editor) == {"settled", "fresh"}
            assert "zebraquartz" in mcp_text(callers, callers.editor, "keyword_search", {"query": "zebraquartz"})
            assert '\\"fresh\\"' in mcp_text(callers, callers.editor, "list_documents", {})
        # Replayed: the reader's replica has it now.
        assert found(callers, callers.reader, "zebraquartz") == ["fresh"]


def test_an_access_change_sends_the_whole_tenant_to_the_primary(streaming_replica: StreamingReplica) -> None:
    # Another tenant, whose reads must keep using the replica meanwhile.
    other = make_tenant("elsewhere")
    other_editor = make_token(other, make_member(other, Role.EDITOR, "other-writer"))
    other_reader = make_token(other, make_member(other, Role.READER, "other-looker"))
    try:
        with served(streaming_replica, max_lag=3600, log_name="uvicorn-replica-access", slug="guarded") as callers:
            _revoke_while_replay_is_paused(streaming_replica, callers, other_editor, other_reader)
    finally:
        from django.core.cache import cache

        cache.clear()  # the tenant's pin (an hour here) lives in the cache table, which no test flush empties


def _revoke_while_replay_is_paused(streaming_replica: StreamingReplica, callers: Callers, other_editor: str, other_reader: str) -> None:
    """The payroll document narrowed and a member taken out of the board, each while the replica lags behind it."""
    from django.core.cache import cache

    call(callers, "POST", "/v1/groups", {"name": "payroll"})
    call(callers, "POST", "/v1/groups", {"name": "board"})
    for group in ("payroll", "board"):
        call(callers, "POST", f"/v1/groups/{group}/members", {"username": "looker"})
    ingest(callers, "salaries", "quillwort salaries are paid on the 25th", token=callers.admin, access={"groups": ["payroll"]})
    ingest(callers, "minutes", "marrowfen minutes of the board", token=callers.admin, access={"groups": ["board"]})
    streaming_replica.wait_caught_up()
    cache.clear()  # the setup's own pins spent, as after the bound (an hour here)
    assert found(callers, callers.reader, "quillwort") == ["salaries"]
    assert found(callers, callers.reader, "marrowfen") == ["minutes"]
    with replay_paused(streaming_replica):
        # Before any change the reader reads the replica: a document written since is not found there.
        ingest(callers, "since", "heronsbill arrived since the pause")
        assert not on_replica(streaming_replica, "since")
        assert found(callers, callers.reader, "heronsbill") == []
        # The admin narrows the salaries to themselves; the replica still holds the old list...
        call(callers, "PATCH", "/v1/documents/salaries", {"access": {"users": ["boss"]}})
        with streaming_replica.connect() as conn:
            held = conn.execute("SELECT access FROM knowledge_document WHERE external_id = 'salaries'").fetchone()[0]
        assert held and all(principal.startswith("g:") for principal in held)
        # ...but no read of the tenant uses it now: search, list, MCP's search and list, chat's retrieval.
        assert found(callers, callers.reader, "quillwort") == []
        assert "salaries" not in listed(callers, callers.reader)
        assert "quillwort" not in mcp_text(callers, callers.reader, "keyword_search", {"query": "quillwort"})
        assert '\\"salaries\\"' not in mcp_text(callers, callers.reader, "list_documents", {})
        assert "salaries" not in chat_retrieved(callers, callers.reader, "When are quillwort salaries paid?")
        assert found(callers, callers.reader, "heronsbill") == ["since"]  # the primary's answer

        # A member taken out of a group: the same, once the first change's pin is spent.
        cache.clear()
        assert found(callers, callers.reader, "heronsbill") == []  # on the replica again
        call(callers, "DELETE", "/v1/groups/board/members/looker")
        assert found(callers, callers.reader, "marrowfen") == []
        assert '\\"minutes\\"' not in mcp_text(callers, callers.reader, "list_documents", {})
        assert found(callers, callers.reader, "heronsbill") == ["since"]

        # Another tenant still reads the replica: its reader does not see its editor's new document.
        response = httpx.post(f"{callers.base}/v1/documents", headers={"Authorization": f"Bearer {other_editor}"},
                              json={"documents": [{"id": "elsewhere-new", "text": "duckweed grows elsewhere"}]}, timeout=60)
        assert response.status_code == 200, response.text
        assert found(callers, other_reader, "duckweed") == []
    assert found(callers, other_reader, "duckweed") == ["elsewhere-new"]
    assert found(callers, callers.reader, "quillwort") == []


def test_a_replica_lagging_past_the_bound_is_skipped(streaming_replica: StreamingReplica) -> None:
    with served(streaming_replica, max_lag=2, log_name="uvicorn-replica-lag") as callers:
        # An idle primary: the last replayed commit grows older than the bound, yet nothing is pending.
        time.sleep(3)
        assert replica_state(callers.base) == {"usable": True, "lag_seconds": 0.0, "error": None}
        with replay_paused(streaming_replica):
            ingest(callers, "late", "lagwort grows late")
            assert not on_replica(streaming_replica, "late")
            # Past the bound (and one check later) the replica is skipped: the reader reads the primary.
            wait_for(lambda: not replica_state(callers.base)["usable"], timeout=15, what="the replica to count as lagging")
            assert replica_state(callers.base)["lag_seconds"] > 2
            assert found(callers, callers.reader, "lagwort") == ["late"]
            assert "late" in listed(callers, callers.reader)
        wait_for(lambda: replica_state(callers.base)["usable"], timeout=15, what="the replica to be used again once caught up")


def test_reads_keep_succeeding_when_the_replica_stops_mid_load(streaming_replica: StreamingReplica) -> None:
    with served(streaming_replica, max_lag=5, log_name="uvicorn-replica-stop") as callers:
        ingest(callers, "steady", "basalt stays steady under load")
        streaming_replica.wait_caught_up()
        statuses: Counter[str] = Counter()
        stop_at = time.monotonic() + 8
        lock = threading.Lock()

        def client() -> None:
            with httpx.Client(timeout=30) as http:
                while time.monotonic() < stop_at:
                    try:
                        r = http.post(f"{callers.base}/v1/search", headers={"Authorization": f"Bearer {callers.reader}"},
                                      json={"query": "basalt", "mode": "keyword", "limit": 5})
                        outcome = str(r.status_code) if r.status_code != 200 or r.json()["hits"] else "200-empty"
                    except httpx.HTTPError as exc:
                        outcome = type(exc).__name__
                    with lock:
                        statuses[outcome] += 1

        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        try:
            time.sleep(3)
            before = sum(statuses.values())
            streaming_replica.stop("fast")
            for t in threads:
                t.join()
            after = sum(statuses.values()) - before
            assert set(statuses) == {"200"}, statuses
            assert before > 10 and after > 10, statuses  # load on both sides of the stop
            assert not replica_state(callers.base)["usable"]
            # Reads were on the replica when it stopped: some failed there and ran again on the primary.
            assert "during a read; reading the primary" in read_log("uvicorn-replica-stop")
        finally:
            if not streaming_replica.running():
                streaming_replica.start()


def test_without_replica_urls_nothing_is_routed() -> None:
    from django.conf import settings

    from common import replicas

    assert settings.DATABASE_ROUTERS == [] and "config.middleware.ReplicaRoutingMiddleware" not in settings.MIDDLEWARE
    assert replicas.begin("token:x") is None and replicas.read_alias(tenant="t") == "default"


def test_replica_urls_are_checked_naming_the_variable() -> None:
    result = import_settings(DEBUG="0", SECRET_KEY=GOOD_KEY, DATABASE_REPLICA_URLS="mysql://x@h/db")
    assert result.returncode != 0 and "DATABASE_REPLICA_URLS: item 1 must point at PostgreSQL" in result.stderr
    lag = import_settings(DEBUG="0", SECRET_KEY=GOOD_KEY, QUARRY_REPLICA_MAX_LAG_SECONDS="soon")
    assert lag.returncode != 0 and "QUARRY_REPLICA_MAX_LAG_SECONDS" in lag.stderr


def test_every_way_of_changing_access_pins_its_tenant_and_only_it(settings) -> None:  # type: ignore[no-untyped-def]
    """The services, the API's document PATCH and the admin's forms: each change pins its tenant (not another)."""
    from django.contrib.auth.models import User
    from django.core.cache import cache
    from django.test import Client
    from rest_framework.test import APIClient

    from accounts.models import Group
    from accounts.services import group_member_remove, membership_set
    from common import replicas
    from knowledge.models import Document

    settings.QUARRY_REPLICA_ALIASES = ("replica_1",)  # pins are kept only with replicas configured
    tenant = make_tenant("pinned")
    make_tenant("unpinned")
    boss = make_member(tenant, Role.ADMIN, "boss")
    looker = make_member(tenant, Role.READER, "looker")
    User.objects.filter(pk=boss.pk).update(is_staff=True)
    group = Group.objects.create(tenant=tenant, name="payroll")
    group.members.add(looker)
    Document.objects.create(tenant=tenant, external_id="salaries", status="ready")
    admin = Client()
    admin.force_login(User.objects.get(pk=boss.pk))
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(tenant, boss)}")

    def pins(change: object) -> bool:
        cache.clear()
        assert not replicas.tenant_pinned("pinned")
        if callable(change):
            change()
        return replicas.tenant_pinned("pinned") and not replicas.tenant_pinned("unpinned")

    def admin_change() -> None:
        response = admin.post(f"/admin/accounts/group/{group.pk}/change/", {"tenant": tenant.pk, "name": "payroll", "members": []})
        assert response.status_code == 302 and not group.members.exists()

    def patch_access() -> None:
        response = api.patch("/v1/documents/salaries", {"access": {"users": ["boss"]}}, format="json")
        assert response.status_code == 200, response.content

    assert not pins(None)
    assert pins(admin_change)
    assert pins(lambda: group.members.add(looker) or group_member_remove(group=group, user=looker))
    assert pins(lambda: membership_set(user=looker, tenant=tenant, role=Role.EDITOR))
    assert pins(patch_access)
    assert pins(lambda: admin.post(f"/admin/accounts/group/{group.pk}/delete/", {"post": "yes"}))
    assert not Group.objects.filter(pk=group.pk).exists()
    cache.clear()


def test_migrations_and_writes_go_to_the_primary_only(settings) -> None:  # type: ignore[no-untyped-def]
    from knowledge.models import Document

    settings.QUARRY_REPLICA_ALIASES = ("replica_1",)
    router = ReplicaRouter()
    assert router.allow_migrate("replica_1", "knowledge") is False
    assert router.allow_migrate("default", "knowledge") is None
    assert router.db_for_write(Document) == "default"
    assert router.db_for_read(Document) is None  # outside replica_read: Django's default, the primary
