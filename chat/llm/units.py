"""The offline model's reading of text: passages cut into *units* and text into *terms*.

A unit is a sentence of a paragraph (Chinese and Japanese ones ending at 。！？), a list item or a
fenced code block whole, or a table row with its header row; page furniture is dropped with the
detector extraction uses (``knowledge.rag.boilerplate``). Terms are the lower-cased, lightly
stemmed words that are not stop words; CJK text, written without spaces, gives character
bigrams. ``chat.llm.selection`` scores the units against the question's terms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from knowledge.rag.boilerplate import is_boilerplate_line, normalize_line
from knowledge.rag.scripts import CJK_CLASS, CJK_RUN


UnitKind = Literal["sentence", "item", "row", "code"]


WORD = re.compile(r"\w+", re.UNICODE)


_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


_ITEM = re.compile(r"^\s*(?:[*+-]|\d{1,3}[.)])\s+")


_HEADING = re.compile(r"^\s*#{1,6}\s")


_QUOTE_MARK = re.compile(r"^\s*>\s?")


# A sentence ends at . ! ? (and closing quotes or brackets) before white space and a capital,
# a digit or an opening quote; "G. Stanley Hall" and "e.g. this" are re-joined below.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")


# Chinese and Japanese end a sentence at 。！？ (or their halfwidth forms), with no space after: a split
# after the mark and any closing quotes or brackets. "!" and "?" count only after a CJK character
# (an English "Really?" is _SENTENCE_END's), so does "." before a space (Korean's full stop: _SENTENCE_END
# wants a capital next), and the fullwidth full stop not before a digit (３．５).
_CJK_SENTENCE_END = re.compile(
    rf"(?:[\u3002\uff01\uff1f\uff61]+|\uff0e(?![0-9\uff10-\uff19])|(?<=[{CJK_CLASS}])(?:[!?]+|\.+(?=\s)))"
    r"[\u300d\u300f\uff09\u300b\u3011\u3015\"'\u201d\u2019)\]]*"
)


# The words of a text, CJK runs apart from the rest ("Quarry的价格" is "Quarry" and "的价格"): a CJK run has
# no spaces between its words, so it becomes overlapping character bigrams (cjk_terms), as the keyword index does.
_TOKEN = re.compile(rf"[{CJK_CLASS}]+|(?:(?![{CJK_CLASS}])\w)+")


# Characters that are grammar, not content (Chinese particles and pronouns, Japanese particles): a bigram
# holding one ("的价" of "咖啡豆的价格", "格は" of "価格は") matches sentences on the grammar they share.
_CJK_FUNCTION = frozenset("的了是在和与及或吗呢吧啊呀也都就这那个之其把被从对为于着过么哪谁什我你他她它们" "のはがをにでともへやかねよ")


_CJK_STOP_BIGRAMS = frozenset("多少 怎样 如何 いく くら どこ いつ だれ".split())  # question words: asked, not answered


_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc inc ltd co corp no nos vol fig eg ie al approx dept est gen gov jan feb mar apr "
    "jun jul aug sep sept oct nov dec mt ft lt col sgt rev u.s u.k".split()
)


STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves tell please give show
    explain describe know want need get summarise summarize summary list quote sentence sentences bullet bullets
    point points briefly short one two three four five six seven eight nine ten""".split()
)


@dataclass(frozen=True)
class Unit:
    passage: int  # the passage's citation number in the prompt
    position: int  # order inside the passage
    kind: UnitKind
    text: str  # as quoted: one line for sentences, items and table rows (after their header), verbatim lines for code
    terms: tuple[str, ...]  # stemmed content terms, with repeats (BM25 term frequency)


def stem(word: str) -> str:
    """A light English stemmer: enough to match "uploads" with "uploading" and "upload"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def cjk_terms(run: str) -> list[str]:
    """The terms of a run of CJK characters: its overlapping character bigrams ("云南咖啡" -> 云南, 南咖,
    咖啡), those holding a function character or asking the question left out; a one-character run is
    its character, unless that is a function character."""
    if len(run) == 1:
        return [] if run in _CJK_FUNCTION else [run]
    bigrams = (run[i:i + 2] for i in range(len(run) - 1))
    return [b for b in bigrams
            if b[0] not in _CJK_FUNCTION and b[1] not in _CJK_FUNCTION and b not in _CJK_STOP_BIGRAMS]


def term_list(text: str) -> tuple[str, ...]:
    """Content terms of ``text`` in order, repeats kept: stemmed words (stop words and one-letter words
    dropped), and for CJK runs their bigrams (``cjk_terms``)."""
    if not CJK_RUN.search(text):  # the common case, in one pass (this runs for every unit of every answer)
        return tuple(stem(w) for w in (m.lower() for m in WORD.findall(text)) if w not in STOPWORDS and len(w) > 1)
    terms: list[str] = []
    for token in _TOKEN.findall(text):
        if CJK_RUN.match(token):
            terms += cjk_terms(token)
            continue
        word = token.lower()
        if word not in STOPWORDS and len(word) > 1:
            terms.append(stem(word))
    return tuple(terms)


def word_count(text: str) -> int:
    """About how many words ``text`` holds: its space-separated words, and a word per two CJK characters
    (Chinese and Japanese words are mostly one or two characters, written without spaces)."""
    runs = CJK_RUN.findall(text)
    if not runs:
        return len(text.split())
    return len(CJK_RUN.sub(" ", text).split()) + sum(len(run) for run in runs) // 2


def _split_cjk(piece: str) -> list[str]:
    """``piece`` split after each CJK sentence end (``_CJK_SENTENCE_END``), the marks kept with their sentence."""
    out: list[str] = []
    start = 0
    for end in _CJK_SENTENCE_END.finditer(piece):
        out.append(piece[start:end.end()])
        start = end.end()
    return [*out, piece[start:]]


def _split_sentences(paragraph: str) -> list[str]:
    pieces = _SENTENCE_END.split(paragraph)
    if CJK_RUN.search(paragraph):
        pieces = [part for piece in pieces for part in _split_cjk(piece)]
    out: list[str] = []
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        if out:
            last_word = out[-1].rstrip(".").rsplit(" ", 1)[-1].lower()
            # "G. Stanley Hall", "Dr. Smith", "U.S. Army": the split was an abbreviation's full stop.
            if len(last_word) == 1 or last_word in _ABBREVIATIONS or re.fullmatch(r"(?:\w\.)+\w?", last_word):
                out[-1] = f"{out[-1]} {piece}"
                continue
        out.append(piece)
    return out


def _join_lines(lines: list[str]) -> str:
    """A paragraph's lines as one text: joined by a space, except where a CJK line wraps onto the next
    (CJK puts no space between words, so the space would split one)."""
    joined = lines[0]
    for line in lines[1:]:
        wrapped = CJK_RUN.match(line) and (CJK_RUN.search(joined[-1:]) or _CJK_SENTENCE_END.search(joined[-1:]))
        joined += line if wrapped else f" {line}"
    return joined


_TABLE_SEPARATOR = re.compile(r"^:?-{3,}:?$")


def table_cells(line: str) -> list[str] | None:
    """The cells of a table row, or None when ``line`` is not one: a Markdown row (``| a | b |``), or a
    row of a table extraction wrote (``a | b``: knowledge.extraction's Word, Excel, HTML and slide tables;
    ``a<TAB>b``: tab-separated text)."""
    stripped = line.strip()
    if "\t" in stripped:
        cells = stripped.split("\t")
    elif stripped.startswith("|") or " | " in stripped:
        cells = stripped.strip("|").split("|")
    else:
        return None
    cells = [c.strip() for c in cells]
    return cells if len(cells) >= 2 or stripped.startswith("|") else None


def _row_units(rows: list[list[str]]) -> list[str]:
    """A table's quotable rows: each data row after its header row (the first), "Region | Manager — East |
    Yuki Tanabe", so a row quoted alone still says what its cells are; a header alone is itself.
    Markdown's separator row (``| --- |``) is no row."""
    rows = [r for r in rows if not all(_TABLE_SEPARATOR.match(c) for c in r if c)]  # an empty row goes too
    if not rows:
        return []
    header, *data = (" | ".join(r) for r in rows)
    return [f"{header} \u2014 {row}" for row in data] or [header]


def units_of(number: int, text: str) -> list[Unit]:
    """The quotable units of one passage: sentences (CJK ones too), list items, table rows with their
    header and code blocks, furniture dropped."""
    units: list[Unit] = []
    lines = text.split("\n")
    paragraph: list[str] = []
    i = 0

    def add(kind: UnitKind, body: str) -> None:
        body = body.strip()
        if not body:
            return
        words = word_count(body)
        if kind == "sentence" and words < 4:  # headings and fragments quote badly
            return
        if kind == "item" and words < 2:
            return
        units.append(Unit(number, len(units), kind, body, term_list(body)))

    def flush() -> None:
        if paragraph:
            for sentence in _split_sentences(_join_lines(paragraph)):
                if not is_boilerplate_line(sentence):
                    add("sentence", sentence)
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker, block = fence.group(1), [line]
            i += 1
            while i < len(lines):
                block.append(lines[i])
                closing = _FENCE.match(lines[i])
                i += 1
                if closing and closing.group(1)[0] == marker[0] and len(closing.group(1)) >= len(marker) and lines[i - 1].strip() == closing.group(1):
                    break
            add("code", "\n".join(block))
            continue
        stripped = normalize_line(line)
        if not stripped or _HEADING.match(line) or is_boilerplate_line(stripped):
            flush()
            i += 1
            continue
        # A table: Markdown rows (even one), or two or more rows of cells as extraction writes them (one
        # "a | b" line in prose is prose). Each row is a unit of its own, with its header: a whole table
        # quoted as one sentence answers nothing ("Who manages the East region?").
        markdown = stripped.startswith("|")
        followed = i + 1 < len(lines) and table_cells(lines[i + 1]) is not None
        if table_cells(line) is not None and (markdown or followed):
            flush()
            rows = []
            while i < len(lines) and lines[i].strip().startswith("|") == markdown:
                cells = table_cells(lines[i])
                if cells is None:
                    break
                rows.append(cells)
                i += 1
            for row in _row_units(rows):
                add("row", row)
            continue
        if _ITEM.match(line):
            flush()
            item = [_ITEM.sub("", line, count=1).strip()]
            i += 1
            while i < len(lines) and lines[i].strip() and lines[i][:1].isspace() and not _ITEM.match(lines[i]):
                item.append(lines[i].strip())
                i += 1
            add("item", " ".join(item))
            continue
        paragraph.append(_QUOTE_MARK.sub("", stripped))
        i += 1
    flush()
    return units
