"""Writes to the knowledge base: ingestion and deletion for a tenant.

Thin, synchronous entry points over ``knowledge.rag`` for views, admin, tasks
and commands; async code (chat, the agent) uses ``knowledge_service`` directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from asgiref.sync import async_to_sync

from accounts.models import Tenant
from knowledge import indexer, rag
from knowledge.rag.embedding import default_embedder
from knowledge.rag.types import Embedder, Trigger

_DEFAULT: Literal["default"] = "default"


def knowledge_service(*, tenant: Tenant, embedder: Embedder | None | Literal["default"] = _DEFAULT) -> rag.RAGService:
    """The RAG service for one tenant, with the configured embedder unless told otherwise."""
    return rag.service(indexer.backend(), default_embedder() if embedder == _DEFAULT else embedder, namespace=tenant.slug)


def document_ingest(
    *, tenant: Tenant, documents: Sequence[rag.RAGDocument], actor: str, trigger: Trigger = "user",
    embedder: Embedder | None | Literal["default"] = _DEFAULT,
) -> int:
    """Index ``documents`` into ``tenant``, replacing earlier versions; returns the chunk count.

    All-or-nothing: on any error (validation, embedder) nothing is written.
    """
    return async_to_sync(knowledge_service(tenant=tenant, embedder=embedder).ingest)(documents, trigger=trigger, actor=actor)


def document_delete(*, tenant: Tenant, document_ids: Sequence[str], actor: str, trigger: Trigger = "user") -> int:
    """Delete documents and their chunks (audited); returns how many existed."""
    return async_to_sync(knowledge_service(tenant=tenant, embedder=None).delete)(document_ids, trigger=trigger, actor=actor)


DEMO_DIR = Path(__file__).resolve().parent / "demo"


def demo_corpus_ingest(*, tenant: Tenant, actor: str = "demo") -> int:
    """Index the Markdown files in ``knowledge/demo`` (about Quarry itself) into ``tenant``.

    Re-running is cheap: unchanged chunks are not embedded again.
    """
    documents = []
    for path in sorted(DEMO_DIR.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next((line[2:].strip() for line in text.splitlines() if line.startswith("# ")), path.stem)
        documents.append(rag.RAGDocument(f"demo/{path.stem}", text, title=title, uri=f"quarry:demo/{path.name}", metadata={"source": "demo"}))
    return document_ingest(tenant=tenant, documents=documents, actor=actor)
