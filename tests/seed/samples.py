"""The seed's code samples, copied from its text ("Harnest RAG Extension",
``../shared/seeds/000_0a4148dd30468d1a.txt``); only import lines differ:
``harnest.extensions.rag`` is ``knowledge.rag``, and Harnest's own ``context``,
``lifecycle`` and ``tool`` come from ``tests.seed.host``.

Samples that build a service at module level (the quick start, "Customize chunking",
"Use the memory backend", "Build another backend") are written out in the tests that
run them, because each test builds its service over the backend it is testing.
"""

# ruff: noqa: E302, E305, E402, F811 - each sample keeps its own imports, as the seed writes them

# --- Supply an embedder -------------------------------------------------------------------

from collections.abc import Sequence


class Embeddings:
    """Adapt the selected embedding client to the RAG contract."""

    def __init__(self, client) -> None:
        self._client = client

    async def embed(
        self, texts: Sequence[str]
    ) -> Sequence[Sequence[float]]:
        return await self._client.embed(texts)


# --- Index and replace documents ------------------------------------------------------------

from knowledge.rag import RAGDocument, RAGService


async def index_manual(knowledge: RAGService) -> int:
    return await knowledge.ingest(
        (
            RAGDocument(
                id="manual-2026",
                title="Product manual",
                uri="https://docs.example.com/manual",
                text="PostgreSQL-backed product knowledge...",
                metadata={"kind": "manual", "version": 2026},
            ),
        ),
        trigger="user",
    )


# --- Search ----------------------------------------------------------------------------------

# tools/search_knowledge.py
from tests.seed.host import context
from tests.seed.host import tool
from knowledge.rag import RAGService, SearchMode


@tool
async def search_knowledge(query: str, limit: int = 6) -> list[dict]:
    """Find grounded passages in the caller's knowledge namespace."""

    knowledge = context.resource("knowledge", RAGService)
    hits = await knowledge.search(
        query,
        mode=SearchMode.HYBRID,
        filters={"kind": ("manual", "release-note")},
        limit=limit,
    )
    return [
        {
            "document_id": hit.chunk.document_id,
            "title": hit.chunk.title,
            "uri": hit.chunk.uri,
            "text": hit.chunk.text,
            "score": hit.score,
        }
        for hit in hits
    ]


# --- Customize chunking ------------------------------------------------------------------------

from collections.abc import Sequence
from knowledge.rag import RAGDocument


class MarkdownSections:
    def split(self, document: RAGDocument) -> Sequence[str]:
        return tuple(
            section.strip()
            for section in document.text.split("\n## ")
            if section.strip()
        )
