"""HTML: the page's main content as readable text.

Two readings of the page, one renderer:

1. *Structural*: the whole page minus what its markup says is furniture (``nav``,
   ``aside``, page-level ``header``/``footer``, ARIA landmarks for navigation, banner and
   footer, cookie and consent boxes, hidden elements), then minus furniture lines
   (``knowledge.rag.boilerplate``). Exact for documents (exported notes, manuals) where
   everything visible is content.
2. *Main content* by trafilatura, for web pages: it also drops div-built menus,
   sidebars, "related posts" and comment threads that the markup does not label.

A page with no furniture at all is a document and is read structurally. A web page
takes trafilatura's reading when that reading is a real extraction: at least
``MIN_MAIN_CHARS`` long (trafilatura's own confidence floor) and no longer than the
structural reading (longer means it fell back to dumping the page, furniture included).

The renderer keeps structure readable: one paragraph per block, ``<br>`` as a line break,
``<pre>`` as a fenced code block with its line breaks and language (```` ```python ````),
a table as one block of rows, cells joined by `` | ``.
"""

from __future__ import annotations

import re
from typing import Any

from knowledge.extraction.common import Extracted, ExtractionError, join_blocks, one_line
from knowledge.rag.boilerplate import find_boilerplate_lines, strip_boilerplate_lines

MIN_MAIN_CHARS = 250

_INVISIBLE = ("script", "style", "noscript", "template", "head", "svg", "canvas", "iframe", "object")
_BLOCKS = tuple(
    "address article aside blockquote caption dd details dialog div dl dt fieldset figcaption figure footer "
    "form h1 h2 h3 h4 h5 h6 header hr li main nav ol p pre section summary table tbody thead tfoot tr ul".split()
)
# Private-use sentinels survive whitespace collapsing and cannot occur in real text we keep.
_PARA, _LINE, _TOKEN = "\ue000", "\ue001", "\ue002"
_TOKEN_RE = re.compile(f"{_TOKEN}(\\d+){_TOKEN}")

_LANDMARKS = {"navigation", "banner", "contentinfo", "complementary", "search", "menubar", "menu", "dialog"}
_FURNITURE_NAME = re.compile(
    r"(?:^|[-_\s])(?:cookies?|consent|gdpr|breadcrumbs?|sidebar|navbar|nav|navigation|menu|skip-?links?|"
    r"share-?(?:buttons?|links?|bar|tools)|sharing|social|newsletter|advert|ads|banner-ad|site-header|site-footer|"
    r"masthead)(?:[-_\s]|$)",
    re.IGNORECASE,
)
_NEVER_REMOVED = {"html", "body", "main", "article"}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_LANGUAGE = re.compile(r"(?:^|\s)(?:language|lang|highlight-source|highlight)-([\w+#.-]{1,20})(?:\s|$)")


def extract_html(data: bytes, name: str) -> Extracted:
    page = _parse(data, name)
    title = _title(page)
    languages = _code_languages(page)
    furniture = _furniture(page)
    rendered = _render(page, languages, furniture)
    structural = strip_boilerplate_lines(rendered)
    text = structural
    if furniture or find_boilerplate_lines(rendered):
        main = _main_content(data, languages)
        if main is not None and MIN_MAIN_CHARS <= len(main) <= len(structural):
            text = main
    return Extracted(text, title, None)


def _parse(data: bytes, name: str) -> Any:
    from bs4 import BeautifulSoup  # deferred: only HTML uploads need the parser

    try:
        return BeautifulSoup(data, "lxml")
    except Exception as exc:  # lxml is optional for bs4; the stdlib parser is the fallback
        if type(exc).__name__ != "FeatureNotFound":
            raise ExtractionError(f"{name} could not be parsed as HTML: {exc}") from exc
        return BeautifulSoup(data, "html.parser")


def _title(soup: Any) -> str | None:
    """og:title (the page's own name, without the site's), else <title>, else the first <h1>."""
    og = soup.find("meta", attrs={"property": "og:title"})
    if og is not None and one_line(str(og.get("content") or "")):
        return one_line(str(og.get("content")))
    for tag in (soup.head.find("title") if soup.head else soup.find("title"), soup.find("h1")):
        if tag is not None and one_line(tag.get_text()):
            return one_line(tag.get_text())
    return None


def _code_language(pre: Any) -> str:
    for tag in (pre, pre.find("code"), pre.parent, pre.parent.parent if pre.parent else None):
        if tag is None or not hasattr(tag, "get"):
            continue
        declared = tag.get("data-lang") or tag.get("data-language")
        if declared and re.fullmatch(r"[\w+#.-]{1,20}", declared):
            return str(declared).lower()
        classes = " ".join(tag.get("class") or [])
        if match := _LANGUAGE.search(classes):
            return match.group(1).lower()
    return ""


def _code_key(code: str) -> str:
    return " ".join(code.split())


def _code_languages(soup: Any) -> dict[str, str]:
    """Language of each code block by its text: trafilatura's output drops the classes."""
    return {_code_key(_pre_text(pre)): lang for pre in soup.find_all("pre") if (lang := _code_language(pre))}


def _furniture(soup: Any) -> frozenset[int]:
    """``id()`` of each element the markup marks as furniture or hides."""
    doomed = []
    for tag in soup.find_all(True):
        if tag.name in _NEVER_REMOVED:
            continue
        role = str(tag.get("role") or "").lower()
        names = " ".join([*(tag.get("class") or []), str(tag.get("id") or "")])
        if (
            tag.name in ("nav", "aside")
            or (tag.name in ("header", "footer") and tag.find_parent(["article", "main"]) is None)
            or role in _LANDMARKS
            or tag.has_attr("hidden")
            or str(tag.get("aria-hidden") or "").lower() == "true"
            or _HIDDEN_STYLE.search(str(tag.get("style") or ""))
            or (names.strip() and _FURNITURE_NAME.search(names))
        ):
            doomed.append(id(tag))
    return frozenset(doomed)


def _main_content(data: bytes, languages: dict[str, str]) -> str | None:
    import trafilatura  # deferred: a heavy import that only HTML uploads need

    html = trafilatura.extract(
        data,
        output_format="html",
        include_tables=True,
        include_formatting=True,
        include_comments=False,
        include_links=False,
        include_images=False,
    )
    if not html:
        return None
    from bs4 import BeautifulSoup  # deferred with the parser above

    return strip_boilerplate_lines(_render(BeautifulSoup(html, "lxml"), languages))


class _Mark(str):
    """A sentinel pushed on the walk's stack (page text is never of this type)."""


def _render(root: Any, languages: dict[str, str], skip: frozenset[int] = frozenset()) -> str:
    """The visible text under ``root`` with its blocks, code and tables, leaving out the
    elements whose ``id()`` is in ``skip``.

    A walk with an explicit stack, not tree edits: inserting markers into a parsed page
    costs a scan of the siblings each time (quadratic on a flat page of 10,000 paragraphs).
    """
    from bs4.element import CData, NavigableString, PreformattedString, Tag  # deferred with the parser

    blocks: list[str] = []
    out: list[str] = []
    stack: list[Any] = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, _Mark):
            out.append(str(item))
        elif isinstance(item, NavigableString):
            # Comments, doctypes and processing instructions are markup, not text.
            if not isinstance(item, PreformattedString) or isinstance(item, CData):
                out.append(str(item))
        elif isinstance(item, Tag) and id(item) not in skip and item.name not in _INVISIBLE:
            if item.name == "br":
                out.append(_LINE)
            elif item.name == "pre":
                out.append(_block_token(blocks, _code_block(item, languages)))
            elif item.name == "table":
                out.append(_block_token(blocks, _table_block(item, languages, skip)))
            elif item.name in _BLOCKS:
                out.append(_PARA)
                stack.append(_Mark(_PARA))
                stack.extend(reversed(item.contents))
            else:
                stack.extend(reversed(item.contents))
    # Source newlines and indentation are not content: collapse all whitespace, then
    # turn the sentinels into the paragraph and line breaks the markup meant.
    flat = re.sub(r"\s+", " ", "".join(out))
    paragraphs = []
    for block in flat.split(_PARA):
        lines = [line.strip() for line in block.split(_LINE)]
        text = "\n".join(lines).strip()
        if text:
            paragraphs.append(_TOKEN_RE.sub(lambda m: blocks[int(m.group(1))], text))
    return join_blocks(paragraphs)


def _block_token(blocks: list[str], text: str) -> str:
    if not text.strip():
        return _PARA
    blocks.append(text)
    return f"{_PARA}{_TOKEN}{len(blocks) - 1}{_TOKEN}{_PARA}"


def _pre_text(pre: Any) -> str:
    """The text of a ``<pre>`` with its line breaks, ``<br>`` included."""
    from bs4.element import NavigableString, PreformattedString, Tag  # deferred with the parser

    parts = []
    for node in pre.descendants:
        if isinstance(node, Tag) and node.name == "br":
            parts.append("\n")
        elif isinstance(node, NavigableString) and not isinstance(node, PreformattedString):
            parts.append(str(node))
    return "".join(parts)


def _code_block(pre: Any, languages: dict[str, str]) -> str:
    """A ``<pre>`` as a fenced block, with its language when the page names it."""
    code = _pre_text(pre).strip("\n")
    if not code.strip():
        return ""
    language = _code_language(pre) or languages.get(_code_key(code), "")
    fence = "````" if "```" in code else "```"
    return f"{fence}{language}\n{code}\n{fence}"


def _table_block(table: Any, languages: dict[str, str], skip: frozenset[int]) -> str:
    """A table as lines of cells joined by `` | ``; a nested table becomes text in its cell."""
    lines = []
    caption = table.find("caption")
    if caption is not None and caption.find_parent("table") is table:
        lines.append(one_line(_render(caption, languages, skip)))
    for row in table.find_all("tr"):
        if row.find_parent("table") is not table or id(row) in skip:
            continue
        cells = [one_line(_render(cell, languages, skip)) for cell in row.find_all(["td", "th"], recursive=False)]
        if any(cells):
            lines.append(" | ".join(cells))
    return "\n".join(line for line in lines if line)
