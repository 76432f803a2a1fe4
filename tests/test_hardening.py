"""Hostile and careless input, in process: a 400 naming the field and nothing written, never a 5xx;
every response under /v1/ JSON in the error shape (a 500 too, with its request id); throttles.

The live-server side (pool exhaustion, a database that is down, streamed uploads, the WebSocket
handshake) is in tests/test_limits_live.py; the fuzzer over the whole schema in tests/test_schema_fuzz.py.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
import pytest
from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.test import Client
from psycopg_pool import PoolTimeout
from rest_framework.test import APIClient

from accounts.models import ApiToken
from common.db import connect_state, database_error_kind
from knowledge import rag
from knowledge.models import Document
from tests.conftest import STOCK_AVAILABLE, STOCK_DATABASE_URL, World
from tests.factories import make_token

NUL = "\x00"


@pytest.fixture
def indexed(world: World) -> World:
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([
        rag.RAGDocument("guide", "Editors upload files in the admin.", title="Guide", metadata={"team": "support"}),
    ])
    return world


def raw_post(client: APIClient, path: str, body: str) -> Any:
    """A JSON body as written (json.dumps would escape nothing we need; this keeps NULs and surrogates as sent)."""
    return client.generic("POST", path, body.encode("utf-8", "surrogatepass"), content_type="application/json")


# --- characters PostgreSQL cannot store, and control characters ------------------------------------------


def doc(**fields: Any) -> dict[str, Any]:
    return {"documents": [{"id": "x", "text": "Some text.", **fields}]}


@pytest.mark.parametrize(
    ("path", "body", "field", "phrase"),
    [
        ("/v1/documents", doc(metadata={"team": f"a{NUL}b"}), "documents[0].metadata.team", "NUL"),
        ("/v1/documents", doc(metadata={f"te{NUL}am": "a"}), "documents[0].metadata", "NUL"),
        ("/v1/documents", doc(metadata={"team": "a\x1bb"}), "documents[0].metadata.team", "control characters (found U+001B)"),
        ("/v1/documents", doc(title="Line\nbreak"), "documents[0].title", "control characters (found U+000A)"),
        ("/v1/documents", doc(uri=f"https://kb/{NUL}"), "documents[0].uri", "NUL"),
        ("/v1/documents", doc(uri="https://kb/\x7f"), "documents[0].uri", "control characters (found U+007F)"),
        ("/v1/documents", {"documents": [{"id": f"a{NUL}b", "text": "t"}]}, "documents[0].id", "NUL"),
        ("/v1/documents", {"documents": [{"id": "x", "text": f"a{NUL}b"}]}, "documents[0].text", "NUL"),
        ("/v1/search", {"query": f"up{NUL}load"}, "query", "NUL"),
        ("/v1/search", {"query": "bell\x07"}, "query", "control characters (found U+0007)"),
        ("/v1/search", {"query": "upload", "filters": {"team": f"a{NUL}"}}, "filters.team", "NUL"),
        ("/v1/search", {"query": "upload", "mode": "keyword", "filters": {"team": [f"a{NUL}"]}}, "filters.team[0]", "NUL"),
        ("/v1/search", {"query": "upload", "mode": "semantic", "filters": {"team": "\x1b[31m"}}, "filters.team", "control characters"),
        ("/v1/chunks/fetch", {"ids": [f"guide{NUL}:0"]}, "ids[0]", "NUL"),
        ("/v1/tokens", {"name": f"ci{NUL}"}, "name", "NUL"),
    ],
)
def test_unstorable_and_control_characters_are_400_naming_the_field(
    indexed: World, path: str, body: dict[str, Any], field: str, phrase: str,
) -> None:
    client = indexed.client(indexed.owner)
    response = client.post(path, body, format="json")
    assert response.status_code == 400, response.content
    payload = response.json()
    assert payload["error"] == "invalid" and field in payload["fields"], payload
    assert phrase in " ".join(payload["fields"][field])
    assert list(Document.objects.filter(tenant=indexed.acme).values_list("external_id", flat=True)) == ["guide"]


def test_an_unpaired_surrogate_is_400_naming_the_field(indexed: World) -> None:
    response = raw_post(indexed.client(indexed.teammate), "/v1/search", '{"query": "up\\ud800load"}')
    assert response.status_code == 400
    assert response.json()["fields"] == {"query": ["must not contain unpaired surrogates"]}


def test_ids_in_urls_are_checked_like_ids_in_bodies(indexed: World) -> None:
    client = indexed.client(indexed.editor)
    for method in ("get", "delete"):
        response = getattr(client, method)("/v1/documents/a%00b")
        assert response.status_code == 400, response.content
        assert list(response.json()["fields"]) == ["document_id"]
    assert client.get("/v1/documents/guide").status_code == 200


def test_document_page_refuses_ids_no_document_could_have(indexed: World) -> None:
    browser = Client()
    browser.force_login(indexed.teammate)
    bad_id = browser.get("/documents/a%00b?tenant=acme")
    assert bad_id.status_code == 400 and b"not a document id" in bad_id.content
    bad_chunk = browser.get("/documents/guide?tenant=acme&chunk=%00")
    assert bad_chunk.status_code == 400 and b"not a passage id" in bad_chunk.content
    assert browser.get("/documents/guide?tenant=acme&chunk=guide:0").status_code == 200


# --- bounds -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("offset", ["9223372036854775808", "1000000001", "-1", "1e3"])
def test_list_offsets_out_of_range_are_400(indexed: World, offset: str) -> None:
    response = indexed.client(indexed.teammate).get("/v1/documents", {"offset": offset})
    assert response.status_code == 400 and list(response.json()["fields"]) == ["offset"]


def test_a_token_id_past_bigint_is_404(indexed: World) -> None:
    response = indexed.client(indexed.owner).delete("/v1/tokens/99999999999999999999")
    assert response.status_code == 404 and response.json()["error"] == "not_found"


def test_deeply_nested_json_is_a_parse_error(indexed: World) -> None:
    client = indexed.client(indexed.teammate)
    flood = raw_post(client, "/v1/search", "[" * 100_000 + "]" * 100_000)
    assert flood.status_code == 400 and flood.json()["error"] == "parse_error"
    assert "nested deeper than 32 levels" in flood.json()["detail"]
    nested: Any = "deep"
    for _ in range(40):
        nested = [nested]
    response = client.post("/v1/search", {"query": "x", "filters": {"team": nested}}, format="json")
    assert response.status_code == 400 and "nested deeper" in response.json()["detail"]


def test_deeply_nested_metadata_in_an_upload_is_400_naming_it(indexed: World) -> None:
    metadata = '{"a": ' * 5000 + "1" + "}" * 5000
    response = indexed.client(indexed.editor).post(
        "/v1/documents/upload", {"files": [SimpleUploadedFile("a.txt", b"a")], "metadata": metadata}, format="multipart",
    )
    assert response.status_code == 400 and "nested deeper" in " ".join(response.json()["fields"]["metadata"])
    assert not Document.objects.filter(external_id="a.txt").exists()


# --- closed bodies, exact types, ids ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/search", {"query": "upload", "foo": 1}, "foo"),
        ("/v1/chunks/fetch", {"ids": ["guide:0"], "foo": 1}, "foo"),
        ("/v1/documents", {"documents": [{"id": "x", "text": "t"}], "foo": 1}, "foo"),
        ("/v1/documents", {"documents": [{"id": "x", "text": "t", "foo": 1}]}, "documents[0].foo"),
        ("/v1/tokens", {"role": "reader", "model": "gpt"}, "model"),
    ],
)
def test_unknown_fields_are_refused(indexed: World, path: str, body: dict[str, Any], field: str) -> None:
    response = indexed.client(indexed.owner).post(path, body, format="json")
    assert response.status_code == 400, response.content
    (message,) = response.json()["fields"][field]
    assert message.startswith("Not accepted. This takes: ")  # then the fields the object does take
    taken = message.removeprefix("Not accepted. This takes: ").rstrip(".").split(", ")
    assert field.rsplit(".", 1)[-1] not in taken and ("query" in taken if path == "/v1/search" else taken)
    assert ApiToken.objects.filter(tenant=indexed.acme).count() == 1
    assert not Document.objects.filter(external_id="x").exists()


def test_unknown_query_parameters_of_the_list_are_refused(indexed: World) -> None:
    response = indexed.client(indexed.teammate).get("/v1/documents", {"foo": "1"})
    assert response.status_code == 400 and list(response.json()["fields"]) == ["foo"]
    assert response.json()["fields"]["foo"][0].startswith("Not accepted. This takes: ") and "status" in response.json()["fields"]["foo"][0]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/documents", {"documents": [{"id": 5, "text": "t"}]}, "documents[0].id"),
        ("/v1/documents", {"documents": [{"id": "x", "text": 5}]}, "documents[0].text"),
        ("/v1/chunks/fetch", {"ids": [5]}, "ids[0]"),
        ("/v1/search", {"query": 5}, "query"),
        ("/v1/search", {"query": "x", "limit": "5"}, "limit"),
        ("/v1/search", {"query": "x", "limit": 5.5}, "limit"),  # 5.0 is an integer to JSON Schema, and accepted
        ("/v1/search", {"query": "x", "limit": True}, "limit"),
        ("/v1/search", {"query": "x", "min_score": "0.5"}, "min_score"),
        ("/v1/search", {"query": "x", "tenant": 5}, "tenant"),
        ("/v1/tokens", {"name": 5}, "name"),
    ],
)
def test_values_of_the_wrong_json_type_are_refused_not_converted(indexed: World, path: str, body: dict[str, Any], field: str) -> None:
    response = indexed.client(indexed.owner).post(path, body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"], response.json()
    assert not Document.objects.filter(external_id__in=["5", "x"]).exists()


@pytest.mark.parametrize("tenant", [{"tenant": ""}, {"tenant": "acme\n"}])
def test_tenant_is_never_empty_or_padded(indexed: World, tenant: dict[str, str]) -> None:
    client = indexed.client(indexed.teammate)
    body = client.post("/v1/search", {"query": "upload", **tenant}, format="json")
    assert body.status_code == 400 and "tenant" in body.json()["fields"]
    query = client.get("/v1/documents", tenant)
    assert query.status_code == 400 and "tenant" in query.json()["fields"]


@pytest.mark.parametrize("bad", ["a/../b", "a/./b", "a//b", "a/", "a/..", "docs/...", "x\n"])
def test_document_ids_that_no_url_could_reach_are_refused(indexed: World, bad: str) -> None:
    client = indexed.client(indexed.editor)
    ingest = client.post("/v1/documents", {"documents": [{"id": bad, "text": "t"}]}, format="json")
    assert ingest.status_code == 400 and "documents[0].id" in ingest.json()["fields"]
    upload = client.post("/v1/documents/upload", {"files": [SimpleUploadedFile("a.txt", b"a")], "ids": [bad]}, format="multipart")
    assert upload.status_code == 400 and "ids" in upload.json()["fields"]
    assert set(Document.objects.values_list("external_id", flat=True)) == {"guide"}
    assert client.post("/v1/documents", {"documents": [{"id": "a/.b/c.d", "text": "t"}]}, format="json").status_code == 200


# --- every response under /v1/ is JSON -----------------------------------------------------------------------


def json_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The API's error shape, as JSON: the body, for further checks."""
    assert response.status_code == status, response.content[:300]
    assert response["Content-Type"] == "application/json", response.content[:300]
    body = response.json()
    assert body["error"] == code and body["detail"], body
    return body


# pytest runs with DEBUG off; `make run` runs with it on, where Django answers with its technical pages.
debug_modes = pytest.mark.parametrize("debug", [False, True], ids=["debug-off", "debug-on"])


@debug_modes
def test_what_no_view_answers_is_json_under_v1(indexed: World, settings, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    client = indexed.client(indexed.teammate)
    json_error(client.get("/v1/nope"), 404, "not_found")
    json_error(client.post("/v1/nope/deeper", {}, format="json"), 404, "not_found")
    json_error(client.get("/v1/search"), 405, "method_not_allowed")
    json_error(client.get("/v1/chat/completions"), 405, "method_not_allowed")
    media = client.generic("POST", "/v1/search", "query=x", content_type="application/x-www-form-urlencoded")
    json_error(media, 415, "unsupported_media_type")
    json_error(client.get("/v1/me", HTTP_ACCEPT="text/html"), 406, "not_acceptable")
    json_error(client.get("/v1/me", HTTP_HOST="evil.example"), 400, "bad_request")
    json_error(Client().get("/v1/nope", HTTP_HOST="evil.example"), 400, "bad_request")
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(indexed.teammate)
    csrf = browser.post("/v1/search", {"query": "upload"}, content_type="application/json")
    assert "CSRF" in json_error(csrf, 403, "permission_denied")["detail"]


@debug_modes
def test_a_bug_is_a_json_500_whose_request_id_finds_the_traceback(indexed: World, settings, caplog, debug: bool) -> None:  # type: ignore[no-untyped-def]
    settings.DEBUG = debug
    settings.QUARRY_RAG_BACKEND = {"CLASS": "tests.backends.BuggyDriver", "OPTIONS": {}}
    # The tenant's admin: a member's search needs a backend that enforces access lists (issue 34), and
    # this seed-shaped driver is refused before it runs; the admin's search reaches its bug.
    client = indexed.client(indexed.owner)
    with caplog.at_level(logging.ERROR, logger="config.middleware"):
        response = client.post("/v1/search", {"query": "upload", "mode": "keyword"}, format="json", HTTP_X_REQUEST_ID="trace-1234abcd")
    body = json_error(response, 500, "internal_error")
    assert body["request_id"] == "trace-1234abcd" == response["X-Request-ID"]
    logged = [r for r in caplog.records if "trace-1234abcd" in r.getMessage()]
    assert logged and logged[0].exc_info and "the driver tripped over itself" in str(logged[0].exc_info[1])


def test_every_response_carries_a_request_id(indexed: World) -> None:
    first, second = (indexed.client(indexed.teammate).get("/v1/me") for _ in range(2))
    assert len(first["X-Request-ID"]) == 32 and first["X-Request-ID"] != second["X-Request-ID"]
    assert indexed.client(indexed.teammate).get("/v1/me", HTTP_X_REQUEST_ID="<script>")["X-Request-ID"] != "<script>"


# --- what a database error means ---------------------------------------------------------------------------


def test_a_pool_timeout_is_overload_unless_connecting_fails() -> None:
    wrapped = OperationalError("couldn't get a connection after 5.00 sec")
    wrapped.__cause__ = PoolTimeout("couldn't get a connection after 5.00 sec")
    connect_state.record_success()
    assert database_error_kind(wrapped) == "overloaded"
    try:
        psycopg.connect("postgresql://postgres@127.0.0.1:9/quarry", connect_timeout=2)
    except psycopg.OperationalError as refused:
        connect_state.record_failure(refused)
    assert database_error_kind(wrapped) == "unavailable"
    connect_state.record_success()
    assert database_error_kind(OperationalError("server closed the connection unexpectedly")) == "unavailable"


@pytest.mark.skipif(not STOCK_AVAILABLE, reason="no stock PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
def test_a_server_out_of_connection_slots_is_overload() -> None:
    """A real refusal: a role allowed no connections gets SQLSTATE 53300, as a full server answers."""
    with psycopg.connect(STOCK_DATABASE_URL, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS quarry_no_slots")
        admin.execute("CREATE ROLE quarry_no_slots LOGIN CONNECTION LIMIT 0")
        try:
            with pytest.raises(psycopg.OperationalError) as refused:
                psycopg.connect(STOCK_DATABASE_URL.replace("postgres@", "quarry_no_slots@"), connect_timeout=5)
        finally:
            admin.execute("DROP ROLE quarry_no_slots")
    assert database_error_kind(refused.value) == "overloaded"
    connect_state.record_failure(refused.value)
    wrapped = OperationalError("timeout")
    wrapped.__cause__ = PoolTimeout("timeout")
    assert database_error_kind(wrapped) == "overloaded"
    connect_state.record_success()


# --- throttles ------------------------------------------------------------------------------------------------


def test_bad_tokens_are_throttled_per_address(world: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_THROTTLE_RATES = {**settings.QUARRY_THROTTLE_RATES, "bad_token": "3/min"}
    attacker = APIClient(REMOTE_ADDR="203.0.113.7")
    statuses = [attacker.get("/v1/me", HTTP_AUTHORIZATION=f"Bearer qry_guess{n}").status_code for n in range(4)]
    assert statuses == [401, 401, 401, 429]
    for refused in (attacker.get("/v1/me", HTTP_AUTHORIZATION="Bearer qry_guess9"),
                    attacker.get("/v1/me", HTTP_AUTHORIZATION="Bearer not a token")):  # malformed is a miss too
        assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
        assert refused.json()["error"] == "throttled" and "invalid API tokens from this address: at most 3/min" in refused.json()["detail"]
    neighbour = APIClient(REMOTE_ADDR="198.51.100.2")
    assert neighbour.get("/v1/me", HTTP_AUTHORIZATION="Bearer qry_guess0").status_code == 401


def test_unknown_tokens_from_an_address_never_lock_out_its_valid_tokens(world: World) -> None:
    """One client behind an office's NAT sending junk must not lock out everyone else there (default rate, 30/min)."""
    office = APIClient(REMOTE_ADDR="203.0.113.50")
    misses = [office.get("/v1/me", HTTP_AUTHORIZATION=f"Bearer qry_stale{n}").status_code for n in range(35)]
    assert misses == [401] * 30 + [429] * 5
    colleague = make_token(world.acme, world.teammate)
    for _ in range(3):
        assert office.get("/v1/me", HTTP_AUTHORIZATION=f"Bearer {colleague}").status_code == 200
    search = office.post("/v1/search", {"query": "upload", "mode": "keyword"}, format="json",
                         HTTP_AUTHORIZATION=f"Bearer {colleague}")
    assert search.status_code == 200, search.content
    # ... while the misses go on being refused, valid ones in between or not.
    again = office.get("/v1/me", HTTP_AUTHORIZATION="Bearer qry_stale99")
    assert again.status_code == 429 and again.json()["error"] == "throttled" and int(again["Retry-After"]) >= 1


def test_expensive_endpoints_are_throttled_per_token(indexed: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.QUARRY_THROTTLE_RATES = {**settings.QUARRY_THROTTLE_RATES, "search": "2/min", "ingest": "1/min"}
    busy, other = indexed.client(indexed.editor), indexed.client(indexed.editor)
    search = [busy.post("/v1/search", {"query": "upload", "mode": "keyword"}, format="json") for _ in range(3)]
    assert [r.status_code for r in search] == [200, 200, 429]
    assert search[2].json()["error"] == "throttled" and 1 <= int(search[2]["Retry-After"]) <= 60
    assert other.post("/v1/search", {"query": "upload", "mode": "keyword"}, format="json").status_code == 200
    ingest = [busy.post("/v1/documents", {"documents": [{"id": f"d{n}", "text": "t"}]}, format="json").status_code for n in range(2)]
    assert ingest == [200, 429]
    assert busy.get("/v1/documents").status_code == 200  # listing is not ingesting
    assert not Document.objects.filter(external_id="d1").exists()


def test_an_unreachable_redis_throttle_store_lets_requests_through(indexed: World, settings) -> None:  # type: ignore[no-untyped-def]
    # Nothing listens on port 9: the throttle store is unreachable, as a Redis restart would leave it.
    settings.QUARRY_THROTTLE_STORE = {"BACKEND": "common.throttling.RedisCounters", "LOCATION": "redis://127.0.0.1:9/0"}
    settings.QUARRY_THROTTLE_RATES = {**settings.QUARRY_THROTTLE_RATES, "search": "1/min"}
    client = indexed.client(indexed.teammate)
    for _ in range(2):
        response = client.post("/v1/search", {"query": "upload", "mode": "keyword"}, format="json")
        assert response.status_code == 200, response.content


# --- sign-in lockout (django-axes) ------------------------------------------------------------------------------


PASSWORD = "pw-for-tests-only"


@pytest.mark.parametrize("login_url", ["/login/", "/admin/login/"])
def test_repeated_failed_sign_ins_lock_the_account_even_with_the_right_password(world: World, settings, login_url: str) -> None:  # type: ignore[no-untyped-def]
    settings.AXES_FAILURE_LIMIT = 3
    world.owner.is_staff = True
    world.owner.save(update_fields=["is_staff"])
    failures = [Client(REMOTE_ADDR=f"192.0.2.{n}").post(login_url, {"username": "owner", "password": "wrong"}) for n in range(3)]
    assert [r.status_code for r in failures[:2]] == [200, 200]
    locked = Client(REMOTE_ADDR="192.0.2.99").post(login_url, {"username": "owner", "password": PASSWORD})
    assert locked.status_code == 429 and int(locked["Retry-After"]) == 15 * 60
    assert b"Sign-in locked" in locked.content and "Content-Security-Policy" in locked
    json_caller = Client(REMOTE_ADDR="192.0.2.98").post(login_url, {"username": "owner", "password": PASSWORD}, HTTP_ACCEPT="application/json")
    assert json_caller.status_code == 429 and json_caller.json()["error"] == "login_locked"
    assert "_auth_user_id" not in locked.client.session
    other = Client(REMOTE_ADDR="192.0.2.50").post("/login/", {"username": "teammate", "password": PASSWORD})
    assert other.status_code == 302  # another account from another address is unaffected


def test_one_address_guessing_many_accounts_is_locked_out(world: World, settings) -> None:  # type: ignore[no-untyped-def]
    settings.AXES_FAILURE_LIMIT = 3
    guesser = Client(REMOTE_ADDR="203.0.113.9")
    for name in ("owner", "editor", "teammate"):
        guesser.post("/login/", {"username": name, "password": "wrong"})
    locked = guesser.post("/login/", {"username": "outsider", "password": PASSWORD})
    assert locked.status_code == 429
    assert Client(REMOTE_ADDR="203.0.113.10").post("/login/", {"username": "outsider", "password": PASSWORD}).status_code == 302
