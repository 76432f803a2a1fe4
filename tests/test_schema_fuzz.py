"""The published schema holds: schemathesis drives every operation of /v1/schema against a live server
with a real token (fixed seed, a few examples per operation, every check on, tests/schemathesis.toml)
and finds no server error, no response outside the schema, no valid request refused and no invalid one
accepted."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from accounts.models import Role
from knowledge import rag
from tests.factories import make_member, make_tenant, make_token
from tests.servers import ROOT, asgi_server, child_env

pytestmark = pytest.mark.django_db(transaction=True)

CONFIG = ROOT / "tests" / "schemathesis.toml"
# The chat and agent endpoints call the model (the fake server here): fuzzed in a run of their own, so
# the knowledge and accounts run stays within its time budget.
CHAT_PATHS = r"^/v1/(chat|agent)/"


def fuzz_world() -> str:
    """A tenant with a few documents and an admin token whose id no generated path parameter is likely to name
    (the fuzzer revokes /v1/tokens/{id} for small and boundary ids)."""
    tenant = make_tenant("fuzz")
    admin = make_member(tenant, Role.ADMIN, "fuzzer")
    with connection.cursor() as cursor:
        cursor.execute("SELECT setval(pg_get_serial_sequence('accounts_apitoken', 'id'), 987654321)")
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="fuzz").ingest)([
        rag.RAGDocument("guide", "Editors upload files in the admin; workers index them.", title="Guide", metadata={"team": "support"}),
        rag.RAGDocument("modes/search", "Keyword search ranks with BM25; semantic search compares embeddings.", title="Modes"),
    ])
    return make_token(tenant, admin)


def run_fuzzer(tmp_path: Path, *selection: str) -> tuple[subprocess.CompletedProcess[str], dict[str, list[str]]]:
    token = fuzz_world()
    # Throttles stay on, far above what one fuzzer sends (429 is documented for every operation anyway).
    env = child_env(QUARRY_DATA_DIR=str(tmp_path / "data"), QUARRY_THROTTLE_BAD_TOKENS="100000/min",
                    QUARRY_THROTTLE_SEARCH="100000/min", QUARRY_THROTTLE_INGEST="100000/min",
                    QUARRY_THROTTLE_CHAT="100000/min", QUARRY_THROTTLE_AGENT="100000/min")
    report = tmp_path / "junit.xml"
    st = Path(sys.executable).with_name("st")
    with asgi_server(env, log_name="uvicorn-fuzz") as base:
        done = subprocess.run(
            [str(st), "--no-color", "--config-file", str(CONFIG), "run", f"{base}/v1/schema",
             "--header", f"Authorization: Bearer {token}", "--checks", "all",
             "--report", "junit", "--report-junit-path", str(report), *selection],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
        )
    failures: dict[str, list[str]] = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            problems = [f"{node.get('message')}: {(node.text or '').strip()[:600]}" for node in case if node.tag in ("failure", "error")]
            if problems:
                failures[case.get("name", "?")] = problems
    return done, failures


def test_the_knowledge_and_accounts_operations_hold_under_the_fuzzer(tmp_path: Path) -> None:
    done, failures = run_fuzzer(tmp_path, "--exclude-path-regex", CHAT_PATHS)
    assert "API Operations:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert failures == {}, "\n\n".join(f"{op}:\n" + "\n".join(p) for op, p in failures.items())
    assert done.returncode == 0, done.stdout[-4000:]


def test_the_chat_and_agent_operations_hold_under_the_fuzzer(tmp_path: Path) -> None:
    done, failures = run_fuzzer(tmp_path, "--include-path-regex", CHAT_PATHS)
    assert "API Operations:" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    assert failures == {}, "\n\n".join(f"{op}:\n" + "\n".join(p) for op, p in failures.items())
    assert done.returncode == 0, done.stdout[-4000:]
