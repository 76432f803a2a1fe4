"""Server-owned prompt templates and the messages sent to the model.

Templates live in ``chat/prompts/<name>.md`` and are chosen by name from
``TEMPLATES``, never by path. A template is the system message; its
``{{passages}}`` placeholder becomes the retrieved chunks, numbered in
retrieval order as ``<passage n="1" ...>`` blocks (the numbers are the citation
markers); a passage the knowledge graph found says through which entities
(``via="Hank Snow > Tennessee"``), and one from a file attached to the conversation says so
(``source="attached file"``), so the answer does not credit the knowledge base with it. Then come
the remembered turns, oldest first, then the question.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal, TypedDict

from knowledge import rag

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
TEMPLATES: tuple[str, ...] = ("default", "concise")
PLACEHOLDER = "{{passages}}"
NO_PASSAGES = "(No passages were found for this question.)"
_PASSAGE_TAG = re.compile(r"<(?=\s*/?\s*passage)", re.IGNORECASE)


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


class MemoryTurn(TypedDict):
    role: Literal["user", "assistant"]
    content: str


class UnknownTemplate(ValueError):
    pass


@functools.cache
def template_text(name: str) -> str:
    """The template called ``name`` (one of ``TEMPLATES``)."""
    if name not in TEMPLATES:
        raise UnknownTemplate(f"unknown prompt template {name!r}; choose one of {', '.join(TEMPLATES)}")
    text = (PROMPTS_DIR / f"{name}.md").read_text(encoding="utf-8")
    if PLACEHOLDER not in text:
        raise UnknownTemplate(f"prompt template {name!r} has no {PLACEHOLDER} placeholder")
    return text


def _attribute(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;").replace("\n", " ")


def render_passages(hits: Sequence[rag.RAGHit], *, attached: Collection[int] = ()) -> str:
    """The numbered passage blocks; ``attached``: the numbers of the passages from the conversation's
    attached files. A chunk can neither close its block nor open a forged one."""
    if not hits:
        return NO_PASSAGES
    blocks = []
    for number, hit in enumerate(hits, start=1):
        chunk = hit.chunk
        title = f' title="{_attribute(chunk.title)}"' if chunk.title else ""
        via = f' via="{_attribute(" > ".join(hit.graph_path))}"' if hit.graph_path else ""
        source = ' source="attached file"' if number in attached else ""
        text = _PASSAGE_TAG.sub("&lt;", chunk.text)
        blocks.append(f'<passage n="{number}" document="{_attribute(chunk.document_id)}"{title}{via}{source}>\n{text}\n</passage>')
    return "\n\n".join(blocks)


def build_messages(
    *, template: str, hits: Sequence[rag.RAGHit], memory: Sequence[MemoryTurn], prompt: str, attached: Collection[int] = (),
) -> list[Message]:
    """System (template + passages), the remembered turns oldest first, then the user's prompt.
    ``attached``: the numbers (from 1) of the hits that come from the conversation's attached files."""
    system = template_text(template).replace(PLACEHOLDER, render_passages(hits, attached=attached))
    messages: list[Message] = [{"role": "system", "content": system}]
    messages.extend({"role": turn["role"], "content": turn["content"]} for turn in memory)
    messages.append({"role": "user", "content": prompt})
    return messages


def greeting(*, tenant_name: str) -> str:
    return (
        f"Hello! Ask me about the documents in {tenant_name}. I answer only from them, "
        "cite the passages I use, and tell you when they do not answer your question."
    )


# [1], [2, 3], [1][4]: what models write for "passage 1" (the prompt's templates ask for [n]).
_MARKER = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
_PARTIAL_MARKER = re.compile(r"\[[\d,\s]{0,16}$")


class CitationMarkers:
    """Renumbers a streamed answer's citation markers in order of first use.

    The prompt numbers passages in retrieval order; the answer cites some of them. ``feed``
    takes each text delta and returns it with ``[n]`` (1 <= n <= ``passages``) rewritten to
    the order in which passages were first cited, so an answer citing passages 3 then 1
    reads ``[1]`` then ``[2]``. A delta ending in what may be the start of a marker (``"[1"``)
    keeps that tail until the next delta or ``flush``. Numbers outside the prompt's range
    are left as they are. ``used`` is the prompt's numbers in order of first citation.
    """

    def __init__(self, passages: int) -> None:
        self.passages = passages
        self.used: list[int] = []
        self._held = ""

    def feed(self, text: str) -> str:
        text = self._held + text
        partial = _PARTIAL_MARKER.search(text)
        self._held, text = (text[partial.start():], text[: partial.start()]) if partial else ("", text)
        return _MARKER.sub(self._renumber, text)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return _MARKER.sub(self._renumber, held)

    def _renumber(self, match: re.Match[str]) -> str:
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))]
        if not all(1 <= n <= self.passages for n in numbers):
            return match.group(0)
        for n in numbers:
            if n not in self.used:
                self.used.append(n)
        return "[" + ", ".join(str(self.used.index(n) + 1) for n in numbers) + "]"
