"""Plain text and Markdown: the file's own text, and a Markdown file's title."""

from __future__ import annotations

import re

from knowledge.extraction.common import Extracted, decode


def extract_txt(data: bytes, name: str) -> Extracted:
    return Extracted(decode(data, name), None, None)


_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_ATX = re.compile(r"^\s{0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)[ \t]*$")
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def extract_md(data: bytes, name: str) -> Extracted:
    """The Markdown source as it is (it reads well as text and keeps code fences and
    tables), without a YAML front matter block, which is metadata ("layout: post").

    Title: the front matter's ``title:``, else the first level-1 heading (``# T`` or
    ``T`` underlined with ``===``), else the first heading of any level; never a line
    inside a fenced code block (``# comment`` in a shell example).
    """
    text = decode(data, name)
    title = None
    if front := _FRONT_MATTER.match(text):
        if declared := _FRONT_TITLE.search(front.group(1)):
            title = declared.group(1).strip("'\" ") or None
        text = text[front.end():].lstrip("\n")
    if title is None:
        title = _first_heading(text)
    return Extracted(text, title, None)


def _first_heading(text: str) -> str | None:
    first_any: str | None = None
    in_fence = False
    previous = ""
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            previous = ""
            continue
        if in_fence:
            continue
        if match := _ATX.match(line):
            heading = match.group(2).strip()
            if len(match.group(1)) == 1:
                return heading
            first_any = first_any or heading
        elif (underline := _SETEXT.match(line)) and previous.strip() and not _ATX.match(previous):
            # "Title\n=====" is a level-1 heading, "Title\n-----" a level-2 one.
            if underline.group(1).startswith("="):
                return previous.strip()
            first_any = first_any or previous.strip()
        previous = line
    return first_any
