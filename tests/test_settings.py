"""Settings come from the environment and refuse unsafe production values."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_choice, env_int, env_list
from tests.servers import ROOT

GOOD_KEY = "k" * 20 + "-production-secret-key-with-enough-variety-0123456789"


def import_settings(**env: str) -> subprocess.CompletedProcess[str]:
    """Import config.settings in a fresh interpreter with exactly this environment (plus PATH)."""
    base = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/postgres"}
    return subprocess.run(
        [sys.executable, "-c", "import config.settings as s; print('DEBUG', s.DEBUG)"],
        cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60,
    )


def test_missing_secret_key_stops_production_startup() -> None:
    result = import_settings(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_insecure_secret_key_stops_production_startup() -> None:
    result = import_settings(DEBUG="false", SECRET_KEY="django-insecure-" + "x" * 60)
    assert result.returncode != 0
    assert "SECRET_KEY is insecure" in result.stderr
    short = import_settings(DEBUG="0", SECRET_KEY="short-key")
    assert "SECRET_KEY is insecure" in short.stderr


def test_auth_mode_none_is_refused_in_production() -> None:
    result = import_settings(DEBUG="0", SECRET_KEY=GOOD_KEY, QUARRY_AUTH_MODE="none")
    assert result.returncode != 0
    assert "QUARRY_AUTH_MODE=none is for local development only" in result.stderr


def test_debug_runs_on_a_development_key() -> None:
    result = import_settings(DEBUG="1")
    assert result.returncode == 0, result.stderr
    assert "DEBUG True" in result.stdout


def test_production_starts_with_a_real_key() -> None:
    result = import_settings(DEBUG="0", SECRET_KEY=GOOD_KEY)
    assert result.returncode == 0, result.stderr
    assert "DEBUG False" in result.stdout


def test_malformed_values_fail_loudly_naming_the_variable() -> None:
    assert "DEBUG must be a boolean" in import_settings(DEBUG="maybe").stderr
    assert "PORT must be an integer" in import_settings(DEBUG="1", PORT="eighty").stderr
    assert "PORT must be at most 65535" in import_settings(DEBUG="1", PORT="70000").stderr
    assert "DATABASE_URL must point at PostgreSQL" in import_settings(DEBUG="1", DATABASE_URL="mysql://x@y/z").stderr


@pytest.mark.parametrize(
    ("helper", "args", "env", "expected"),
    [
        (env_bool, ("X", False), {"X": "Yes"}, True),
        (env_bool, ("X", True), {"X": "off"}, False),
        (env_bool, ("X", True), {}, True),
        (env_int, ("X", 3), {"X": " 42 "}, 42),
        (env_list, ("X", ["a"]), {"X": "a, b,,c "}, ["a", "b", "c"]),
        (env_choice, ("X", "token", ("token", "none")), {"X": "NONE"}, "none"),
    ],
)
def test_env_helpers_parse(helper, args, env, expected) -> None:  # type: ignore[no-untyped-def]
    assert helper(*args, environ=env) == expected


def test_env_helpers_reject_bad_values() -> None:
    with pytest.raises(ImproperlyConfigured, match="X must be an integer"):
        env_int("X", 1, environ={"X": "1.5"})
    with pytest.raises(ImproperlyConfigured, match="X must be at least 1"):
        env_int("X", 1, minimum=1, environ={"X": "0"})
    with pytest.raises(ImproperlyConfigured, match="X must be one of token, none"):
        env_choice("X", "token", ("token", "none"), environ={"X": "open"})


def test_a_provider_embedding_model_needs_its_dimension() -> None:
    result = import_settings(DEBUG="1", QUARRY_EMBEDDING_MODEL="openai/text-embedding-3-small")
    assert result.returncode != 0
    assert "QUARRY_EMBEDDING_DIMENSION must be set for the provider embedding model 'openai/text-embedding-3-small'" in result.stderr


def test_the_local_model_refuses_another_dimension() -> None:
    result = import_settings(DEBUG="1", QUARRY_EMBEDDING_DIMENSION="768")
    assert result.returncode != 0
    assert "QUARRY_EMBEDDING_DIMENSION is 768 but the local model returns 384 dimensions" in result.stderr


def test_embedding_variables_become_the_embedder_setting() -> None:
    probe = "import config.settings as s; print(s.QUARRY_EMBEDDER)"
    base = {"PATH": os.environ["PATH"], "DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/postgres", "DEBUG": "1"}
    def run(**env: str) -> str:
        done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**base, **env}, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()
    assert run() == "{'CLASS': 'knowledge.rag.embedding.BgeSmallEmbedder', 'OPTIONS': {}}"
    assert run(QUARRY_EMBEDDING_MODEL="local") == "{'CLASS': 'knowledge.rag.embedding.LocalEmbedder', 'OPTIONS': {}}"
    assert run(QUARRY_EMBEDDING_MODEL="none") == "None"
    assert run(QUARRY_EMBEDDING_MODEL="ollama/nomic-embed-text", QUARRY_EMBEDDING_DIMENSION="768", QUARRY_EMBEDDING_BATCH_SIZE="8") == (
        "{'CLASS': 'knowledge.rag.embedding.LiteLLMEmbedder', 'OPTIONS': {'model': 'ollama/nomic-embed-text', 'dimension': 768, 'batch_size': 8}}"
    )
    assert run(QUARRY_EMBEDDING_MODEL="bge-small") == "{'CLASS': 'knowledge.rag.embedding.BgeSmallEmbedder', 'OPTIONS': {}}"
    assert run(QUARRY_EMBEDDING_MODEL="bge-small", QUARRY_EMBEDDING_QUERY_PREFIX="q: ") == (
        "{'CLASS': 'knowledge.rag.embedding.BgeSmallEmbedder', 'OPTIONS': {'query_prefix': 'q: '}}"
    )


def test_the_hybrid_fusion_setting_is_checked() -> None:
    result = import_settings(DEBUG="1", QUARRY_HYBRID_FUSION="borda")
    assert result.returncode != 0
    assert "QUARRY_HYBRID_FUSION must be 'rrf' or 'score', got 'borda'" in result.stderr


def test_the_development_file_fills_in_only_when_debug_and_secret_key_are_unset(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from config.development import load_development_env, write_development_env

    env = {"QUARRY_DATA_DIR": str(tmp_path)}
    path = write_development_env(env)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    first = path.read_text()
    assert write_development_env(env) == path and path.read_text() == first  # written once, never rotated
    assert load_development_env(env) and env["DEBUG"] == "1" and len(env["SECRET_KEY"]) >= 50
    for explicit in ({"DEBUG": "0"}, {"SECRET_KEY": GOOD_KEY}):
        production = {"QUARRY_DATA_DIR": str(tmp_path), **explicit}
        assert not load_development_env(production) and set(production) == {"QUARRY_DATA_DIR", *explicit}
    assert not load_development_env({"QUARRY_DATA_DIR": str(tmp_path / "elsewhere")})
