"""Quarry's typed RAG API from a plain script: `.venv/bin/python examples/rag_api.py` (after `make run`)."""

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout (only for a script outside its root)

import quarry

quarry.setup()  # Django's settings and apps, as manage.py sets them up

from knowledge import rag  # noqa: E402  (after setup: the API is Django code)


async def main() -> None:
    async with rag.postgres(rag.default_embedder(), namespace="research") as service:
        await service.ingest([rag.RAGDocument("faq-1", "Quarry is a knowledge base.", title="FAQ", metadata={"team": "support"})])
        hits = await service.search("what is quarry?", mode="hybrid", limit=5, filters={"team": "support"})
        print(hits[0].chunk.chunk_id, round(hits[0].score, 4))


asyncio.run(main())
