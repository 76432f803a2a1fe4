"""A one-shot completion from the chat catalog, for the knowledge graph's optional LLM extractor.

``knowledge`` never imports ``chat``: settings name this class by dotted path
(``QUARRY_GRAPH_EXTRACTOR``, built when ``QUARRY_GRAPH_LLM_MODEL`` names a catalog model), the
way they name embedders, so the extractor reaches its model through the same catalog, Router,
retries and fallbacks as chat does, and never sees a key or a base URL.
"""

from __future__ import annotations

from contextlib import aclosing

from chat.llm.router import Finished, TextDelta, stream_chat


class CatalogCompleter:
    """Answers one prompt with the catalog's logical model ``model``; ``model_id`` names it in the cache."""

    def __init__(self, *, model: str) -> None:
        if not model:
            raise ValueError("CatalogCompleter needs the name of a logical model of the catalog")
        self.model = model
        self.model_id = f"catalog/{model}"

    async def complete(self, *, system: str, user: str) -> tuple[str, int]:
        """The model's text and its total tokens; raises ``ModelUnavailable`` when no deployment answers."""
        parts: list[str] = []
        tokens = 0
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        async with aclosing(stream_chat(messages, model=self.model)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, Finished):
                    tokens = event.usage.total_tokens
        return "".join(parts), tokens
