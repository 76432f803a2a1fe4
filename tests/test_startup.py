"""The app starts on the embedded PostgreSQL by default and on DATABASE_URL when set; `make run`'s preparation
sets up a fresh clone in one process and finds its work done the second time; starting loads no heavy library."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.servers import ROOT, postgres_available, scratch_database

SYSTEM_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
PROBE = (
    "from django.db import connection; from django.conf import settings; connection.ensure_connection(); "
    "print(settings.QUARRY_EMBEDDED_DATABASE, connection.settings_dict['HOST'], connection.pg_version // 10000)"
)


def run_manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    full_env.update({"DEBUG": "1", **env})
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300
    )


def test_without_database_url_the_embedded_server_is_used() -> None:
    result = run_manage("shell", "--no-imports", "-c", PROBE)
    assert result.returncode == 0, result.stderr
    embedded, host, major = result.stdout.split()
    assert embedded == "True"
    assert host.startswith("/"), "connects over a Unix socket"
    assert int(major) >= 18


@pytest.mark.skipif(not postgres_available(SYSTEM_PG), reason="no PostgreSQL at 127.0.0.1:5432 (this machine kind provides one)")
def test_with_database_url_that_server_is_used_and_migrates_without_pgvector() -> None:
    name = f"quarry_startup_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(SYSTEM_PG, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        url = f"postgresql://postgres@127.0.0.1:5432/{name}"
        migrate = run_manage("migrate", "--noinput", DATABASE_URL=url)
        assert migrate.returncode == 0, migrate.stderr
        probe = run_manage("shell", "--no-imports", "-c", PROBE, DATABASE_URL=url)
        assert probe.returncode == 0, probe.stderr
        assert probe.stdout.split() == ["False", "127.0.0.1", "15"]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM accounts_tenant").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'vector'").fetchone() == (0,)
            # knowledge/0020's keys, built concurrently outside a transaction, are there and valid on 15 too.
            keys = conn.execute(
                "SELECT con.conname, i.indisvalid FROM pg_constraint con JOIN pg_index i ON i.indexrelid = con.conindid "
                "WHERE con.conname IN ('chunk_tenant_id_unique', 'document_tenant_id_unique') ORDER BY 1"
            ).fetchall()
            assert keys == [("chunk_tenant_id_unique", True), ("document_tenant_id_unique", True)]
            # knowledge/0021 swapped the chunk key's index for one carrying the access list, on 15 too.
            chunk_key = conn.execute("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = 'chunk_tenant_id_unique'").fetchone()
            assert chunk_key == ("UNIQUE (tenant_id, id) INCLUDE (access)",)
    finally:
        with psycopg.connect(SYSTEM_PG, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_embedded_server_has_pgvector_enabled_by_migration(db: None) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        assert cursor.fetchone() is not None


def test_demo_setup_is_idempotent_and_prints_working_credentials(db: None) -> None:
    from django.conf import settings
    from django.core.management import call_command
    from django.test import override_settings
    from rest_framework.test import APIClient

    from accounts.models import ApiToken

    data_dir = ROOT / "var" / "test-demo" / uuid.uuid4().hex[:8]
    with override_settings(QUARRY_DATA_DIR=data_dir):
        call_command("demo_setup", "--quiet")
        first = json.loads((data_dir / "demo.json").read_text())
        call_command("demo_setup", "--quiet")
        second = json.loads((data_dir / "demo.json").read_text())
    assert first == second, "a second run reuses the same login and token"
    assert oct((data_dir / "demo.json").stat().st_mode & 0o777) == "0o600"
    assert ApiToken.objects.count() == 1
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {first['token']}")
    assert client.get("/v1/me").json()["tenant"] == settings.QUARRY_DEFAULT_TENANT
    # Signing in as a person does (django-axes needs the request, which Client.login does not give it).
    signed_in = APIClient().post("/login/", {"username": first["username"], "password": first["password"]})
    assert signed_in.status_code == 302 and signed_in.wsgi_request.user.is_authenticated


# Packages that take a second or more to import and that only some requests need (a chat model
# call, an embedding, an MCP call, an upload of one file type). A process that imports one of them at start
# pays it on every `manage.py` command and every `make run` (issue 31, bench/startup.py).
HEAVY_PACKAGES = ("litellm", "openai", "onnxruntime", "tokenizers", "numpy", "tiktoken", "mcp", "mcp_types", "pypdf",
                  "docx", "pptx", "openpyxl", "PIL", "bs4", "trafilatura")
STARTUP_PROBE = (
    "import json, sys; import django; django.setup(); "
    "from django.core.management import call_command; call_command('check', verbosity=0); "  # the URLconf: every view, API, admin
    "import config.asgi; "  # what the web server imports before it answers
    "print(json.dumps(sorted(sys.modules)))"
)


def test_starting_a_command_or_the_web_server_imports_no_model_or_file_format_library() -> None:
    result = run_manage("shell", "--no-imports", "-c", STARTUP_PROBE)
    assert result.returncode == 0, result.stderr
    loaded = {name.partition(".")[0] for name in json.loads(result.stdout.splitlines()[-1])}
    assert "chat" in loaded and "knowledge" in loaded, "the probe did load Quarry's own modules"
    assert sorted(loaded & set(HEAVY_PACKAGES)) == []


@pytest.fixture
def fresh_clone_env(tmp_path: Path, db: None) -> Iterator[dict[str, str]]:
    """The environment of a fresh clone's `make run`: an empty data directory and an empty database of its own."""
    with scratch_database("quarry_prepare") as url:
        env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL")}
        yield {**env, "QUARRY_DATA_DIR": str(tmp_path / "var"), "DATABASE_URL": url}


def prepare(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "config.prepare"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)


def test_make_runs_preparation_sets_up_everything_once_and_a_second_run_changes_nothing(fresh_clone_env: dict[str, str]) -> None:
    data = Path(fresh_clone_env["QUARRY_DATA_DIR"])
    first = prepare(fresh_clone_env)
    assert first.returncode == 0, first.stderr
    assert re.fullmatch(r"demo corpus: \d+ chunks in tenant DEFAULT\n", first.stdout)
    assert "DEBUG=1" in (data / "development.env").read_text()
    assert (data / "static" / "admin" / "css" / "base.css").is_file(), "collectstatic ran"
    login = json.loads((data / "demo.json").read_text())
    with psycopg.connect(fresh_clone_env["DATABASE_URL"]) as conn:
        documents = conn.execute("SELECT external_id, version, updated_at FROM knowledge_document ORDER BY 1").fetchall()
    assert documents and all(external_id.startswith("demo/") for external_id, _, _ in documents)

    second = prepare(fresh_clone_env)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert json.loads((data / "demo.json").read_text()) == login, "the same login and token"
    with psycopg.connect(fresh_clone_env["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT external_id, version, updated_at FROM knowledge_document ORDER BY 1").fetchall() == documents


def test_make_runs_preparation_stops_at_a_failed_check_with_its_message(fresh_clone_env: dict[str, str]) -> None:
    failed = prepare({**fresh_clone_env, "QUARRY_MODEL_CONFIG_PATH": "/nonexistent/models.yaml"})
    assert failed.returncode == 1
    assert "(chat.E001) /nonexistent/models.yaml: cannot read the model catalog" in failed.stderr
    assert "Traceback" not in failed.stderr
    with psycopg.connect(fresh_clone_env["DATABASE_URL"]) as conn:
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone() == (0,), "nothing migrated"


# Drives the web server's lifespan as uvicorn does; notes whether litellm and onnxruntime (the local embedder's
# runtime) are loaded as each message is sent, then once the warm-up thread (if any) has finished.
LIFESPAN_PROBE = """
import asyncio, json, sys, threading
import config.asgi
from chat.warmup import THREAD_NAME
loaded = {}
async def main():
    inbox = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    async def send(message):
        loaded[message["type"]] = "litellm" in sys.modules or "onnxruntime" in sys.modules
    lifespan = asyncio.create_task(config.asgi.application({"type": "lifespan"}, inbox.get, send))
    while "lifespan.startup.complete" not in loaded:
        await asyncio.sleep(0.01)
    for thread in threading.enumerate():
        if thread.name == THREAD_NAME:
            thread.join()
    loaded["after the warm-up"] = "litellm" in sys.modules and "onnxruntime" in sys.modules
    await inbox.put({"type": "lifespan.shutdown"})
    await lifespan
asyncio.run(main())
print(json.dumps(loaded))
"""


@pytest.mark.parametrize(("setting", "warmed"), [("1", True), ("0", False)])
def test_the_web_server_answers_before_it_loads_the_chat_model_libraries_in_the_background(setting: str, warmed: bool) -> None:
    result = run_manage("shell", "--no-imports", "-c", LIFESPAN_PROBE, QUARRY_WARM_UP=setting)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1]) == {
        "lifespan.startup.complete": False,  # started without waiting for either
        "after the warm-up": warmed,
        "lifespan.shutdown.complete": warmed,
    }
