"""What the chat, agent and consumer tests share: the fake model's catalog and an indexed world.

The fixtures that use these (``fake``, ``model_world``) are in conftest.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync

from knowledge import rag

if TYPE_CHECKING:
    from tests.conftest import World

SECRET_KEY_MARKER = "sk-quarry-test-secret-8c1f"
UPLOAD_QUESTION = "How do editors upload files?"


def write_catalog(path: Path, base_url: str, *, models: dict[str, Any] | None = None, num_retries: int = 0) -> Path:
    """A catalog whose default model ``chat`` is the fake server's ``answer`` model (or ``models``)."""
    models = models or {"chat": {"deployments": [{"model": "openai/answer", "api_base": base_url, "api_key": SECRET_KEY_MARKER}]}}
    path.write_text(json.dumps({"default_model": "chat", "router": {"num_retries": num_retries}, "models": models}))
    return path  # JSON is YAML


def deployment(base_url: str, name: str) -> dict[str, str]:
    return {"model": f"openai/{name}", "api_base": base_url, "api_key": SECRET_KEY_MARKER}


def index_world(world: World) -> None:
    """acme and globex hold documents; they share a document id, never their text."""
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="acme").ingest)([
        rag.RAGDocument("guide", "Editors upload files in the admin. Uploads are processed in the background by workers.",
                        title="Uploading"),
        rag.RAGDocument("modes", "Keyword search uses BM25 while semantic search compares embeddings.", title="Search modes"),
    ])
    async_to_sync(rag.postgres(rag.default_embedder(), namespace="globex").ingest)(
        [rag.RAGDocument("guide", "Globex confidential: quarterly upload numbers for the board.")]
    )
