"""What graph reads return: values of the RAG API (``knowledge.rag`` re-exports them), which the graph
above it (``knowledge.graph``) fills in, and callers read without importing the graph."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GraphNode:
    """An entity: its display name and type (document, heading, name, acronym, or an LLM's type)."""

    name: str
    type: str


@dataclass(frozen=True)
class GraphRelation:
    """A triple and the chunk that states it."""

    subject: str
    predicate: str
    object: str
    chunk_id: str


@dataclass(frozen=True)
class GraphCandidate:
    """A chunk the graph leg ranks: its id, activation (after similarity weighting), and the
    entity names that led to it, seed side first."""

    chunk_id: str
    score: float
    path: tuple[str, ...]


@dataclass(frozen=True)
class GraphLeg:
    """The graph leg of one search: its ranked chunks, the entities the query names, and
    the nodes and relations its paths went through (diagnostics)."""

    candidates: tuple[GraphCandidate, ...] = ()
    named: tuple[GraphNode, ...] = ()
    nodes: tuple[GraphNode, ...] = ()
    relations: tuple[GraphRelation, ...] = ()
    entities: int = 0  # entities in the tenant's graph (0: nothing was extracted yet)


@dataclass(frozen=True)
class Triplet:
    """A relation found for a question, with the chunk stating it (``chunk_id``) and a score."""

    subject: GraphNode
    predicate: str
    object: GraphNode
    chunk_id: str
    score: float


@dataclass(frozen=True)
class Neighbor:
    """An entity related to another, how (predicates), and the chunks that link them."""

    entity: GraphNode
    predicates: tuple[str, ...]
    chunk_ids: tuple[str, ...]
    weight: float


@dataclass(frozen=True)
class Neighborhood:
    """An entity, the chunks about it, and its neighbours (``entity`` None: no such entity)."""

    entity: GraphNode | None
    chunk_ids: tuple[str, ...] = ()
    neighbors: tuple[Neighbor, ...] = ()


@dataclass(frozen=True)
class Picture:
    """How passages connect through entities: what the SVG on the pages draws.

    ``passages`` are chunk ids (the ones asked about first); ``entities`` (id, node);
    ``links`` (chunk id, entity id) pairs.
    """

    passages: tuple[tuple[str, str, str], ...] = ()  # (chunk id, document id, title)
    entities: tuple[tuple[int, GraphNode], ...] = ()
    links: tuple[tuple[str, int], ...] = ()
    focus: tuple[str, ...] = field(default_factory=tuple)  # the passages the picture is about

    def as_json(self) -> dict[str, Any]:
        """The picture as the pages' script draws it (and the API returns it)."""
        return {
            "passages": [{"chunk_id": c, "document_id": d, "title": t, "focus": c in self.focus} for c, d, t in self.passages],
            "entities": [{"id": i, "name": n.name, "type": n.type} for i, n in self.entities],
            "links": [{"chunk_id": c, "entity": e} for c, e in self.links],
        }
