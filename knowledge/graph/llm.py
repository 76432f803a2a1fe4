"""The optional LLM extractor: subject-predicate-object triples per chunk, as JSON, from a catalog model.

Off unless ``QUARRY_GRAPH_LLM_MODEL`` names a logical model of the chat catalog. The model
sees one chunk's text and answers ``{"triples": [{"subject", "subject_type", "predicate",
"object", "object_type"}]}``. Answers are cached per tenant by the chunk's content hash, the
model and ``PROMPT_VERSION`` (``GraphExtraction``), so an unchanged text is never sent
twice, and the calls are made by a background pass outside any transaction
(``knowledge.services.graphing``); extraction inside the chunk transactions only reads the
cache. A per-tenant monthly token budget bounds what the pass spends.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from knowledge.graph.extract import WEIGHTS, ChunkGraph, Found, display_name, normalize

# Bump when PROMPT changes: answers cached under another version are not reused.
PROMPT_VERSION = "1"
MAX_TRIPLES = 30
MAX_INPUT_CHARS = 6_000
PROMPT = (
    "You extract a knowledge graph from one passage. List the facts the passage states as triples "
    "between named entities (people, organisations, places, works, events, products, concepts with a proper name). "
    "Use each entity's full name as written in the passage; the predicate is a short verb phrase in lower case "
    '(e.g. "was born in", "is located in", "was written by"). Answer with JSON only, in this form: '
    '{"triples": [{"subject": "...", "subject_type": "person", "predicate": "...", "object": "...", "object_type": "place"}]}. '
    f"At most {MAX_TRIPLES} triples; an empty list when the passage names no entities."
)
_TYPE = re.compile(r"^[a-z][a-z _-]{0,30}$")
_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


@runtime_checkable
class Completer(Protocol):
    """A provider that answers one prompt (``chat.llm.extraction.CatalogCompleter`` is the product's)."""

    model_id: str

    async def complete(self, *, system: str, user: str) -> tuple[str, int]:
        """The model's text and the tokens the call used (prompt + completion)."""
        ...


@dataclass(frozen=True)
class LlmSpec:
    """Which cached answers extraction merges in: the extractor's model and the prompt version."""

    model: str
    prompt_version: str = PROMPT_VERSION

    def cached(self, cursor: Any, tenant_id: int, hashes: Sequence[str]) -> dict[str, list[list[str]]]:
        """The cached triples of these chunk content hashes (those that have an answer)."""
        if not hashes:
            return {}
        cursor.execute(
            "SELECT content_hash, triples FROM knowledge_graphextraction "
            "WHERE tenant_id = %s AND model = %s AND prompt_version = %s AND content_hash = ANY(%s)",
            [tenant_id, self.model, self.prompt_version, sorted(set(hashes))],
        )
        return {digest: (json.loads(t) if isinstance(t, str) else t) for digest, t in cursor.fetchall()}


def parse_triples(answer: str) -> list[list[str]]:
    """The valid triples of a model answer, as ``[subject, subject type, predicate, object, object type]``.

    Anything malformed is dropped, not raised: a model's bad answer costs its triples, nothing else.
    """
    text = _FENCE.sub("", answer.strip())
    try:
        data = json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        try:
            data = json.loads(text[start:end + 1]) if 0 <= start < end else {}
        except ValueError:
            return []
    items = data.get("triples") if isinstance(data, dict) else data if isinstance(data, list) else None
    out: list[list[str]] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        subject, predicate, obj = (str(item.get(k) or "").strip() for k in ("subject", "predicate", "object"))
        if not (normalize(subject) and normalize(obj) and predicate) or normalize(subject) == normalize(obj):
            continue
        types = [str(item.get(k) or "").strip().lower() for k in ("subject_type", "object_type")]
        types = [t if _TYPE.match(t) else "entity" for t in types]
        out.append([display_name(subject), types[0], " ".join(predicate.lower().split())[:100], display_name(obj), types[1]])
        if len(out) >= MAX_TRIPLES:
            break
    return out


def apply_triples(graph: ChunkGraph, triples: Sequence[Sequence[str]]) -> None:
    """Merge an LLM answer into a chunk's extraction: both ends become mentions, the triple a relation."""
    for subject, subject_type, predicate, obj, object_type in triples:
        keys = []
        for name, kind in ((subject, subject_type), (obj, object_type)):
            key = normalize(name)
            if key:
                graph.add(Found(key, name, kind or "entity", "llm", WEIGHTS["llm"]))
                keys.append(key)
        if len(keys) == 2:
            graph.relate(keys[0], predicate, keys[1], 1.0, extractor="llm")


async def extract_triples(completer: Completer, text: str) -> tuple[list[list[str]], int]:
    """Ask the model for one chunk's triples; returns them and the tokens spent."""
    answer, tokens = await completer.complete(system=PROMPT, user=text[:MAX_INPUT_CHARS])
    return parse_triples(answer), int(tokens)
