"""Which sentences of the retrieved passages answer the question: the offline model's whole judgement.

``select(question, passages, vectors=...)`` splits the numbered passages into *units*
(sentences of paragraphs; list items, tables and fenced code blocks whole), drops page
furniture with the detector extraction uses (``knowledge.rag.boilerplate``), and scores
every unit against the question with the two signals Quarry has offline:

- BM25 over the question's content terms (a small in-process index over the candidate
  units: the passages are few, so the IDF is theirs, not the corpus's), normalized by the
  best unit's score;
- the cosine similarity of the unit's embedding to the question's (the local embedder,
  when there is one; BM25 alone otherwise).

A unit is a candidate only when it reaches the relevance floor (``Tuning.floor`` on the
cosine, or shares a question term when there are no vectors). Units are then picked by
maximal marginal relevance, so a second copy of the same statement (one chunk overlapping
the next) is never quoted twice, and picking stops when the answer is complete: the
question's terms are covered, or the next unit scores well below the first, or the answer
reached its length budget. Instructions in the question ("in two sentences", "list",
"summarise", "quote") set the count and the shape.

No sentence above the floor means the passages do not answer: ``Selection.units`` is empty
and the caller says so instead of quoting the nearest text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from knowledge.rag.boilerplate import is_boilerplate_line, normalize_line

UnitKind = Literal["sentence", "item", "table", "code"]
Shape = Literal["quote", "list", "summary"]
Vectors = Callable[[list[str]], list[list[float]] | None]

_WORD = re.compile(r"\w+", re.UNICODE)
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")
_ITEM = re.compile(r"^\s*(?:[*+-]|\d{1,3}[.)])\s+")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_QUOTE_MARK = re.compile(r"^\s*>\s?")
# A sentence ends at . ! ? (and closing quotes or brackets) before white space and a capital,
# a digit or an opening quote; "G. Stanley Hall" and "e.g. this" are re-joined below.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc inc ltd co corp no nos vol fig eg ie al approx dept est gen gov jan feb mar apr "
    "jun jul aug sep sept oct nov dec mt ft lt col sgt rev u.s u.k".split()
)
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were what
    when where which while who whom why will with would you your yours yourself yourselves tell please give show
    explain describe know want need get summarise summarize summary list quote sentence sentences bullet bullets
    point points briefly short one two three four five six seven eight nine ten""".split()
)
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_COUNT = re.compile(
    r"\b(?:in|with|using|as|give me|list|name)?\s*(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
    r"(?:short\s+|brief\s+|key\s+|main\s+)?(sentences?|bullets?|bullet points?|points?|items?|lines?)\b",
    re.IGNORECASE,
)
_SUMMARY = re.compile(r"\b(?:summari[sz]e|summary|sum up|overview|tl;?dr|in short|briefly)\b", re.IGNORECASE)
_LIST = re.compile(r"^\s*(?:list|enumerate|name)\b|\b(?:list|enumerate) (?:the|all|every)\b|\bwhat are (?:the|all)\b|\bsteps\b", re.IGNORECASE)
_CODE = re.compile(r"\b(?:code|snippet|example|script|command|function|syntax|implementation)s?\b", re.IGNORECASE)
_QUOTE = re.compile(r"\b(?:quote|verbatim|exact words|word for word)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Tuning:
    """The selection's parameters (defaults tuned on MuSiQue; see ``manage.py evaluate_answers``)."""

    floor: float = 0.30  # least cosine similarity (question, unit) a unit needs to be quoted
    semantic_weight: float = 0.6  # score = w * cosine + (1 - w) * BM25 / best BM25
    mmr_lambda: float = 0.75  # relevance against novelty when picking the next unit
    duplicate: float = 0.92  # a unit this similar to a picked one is the same statement
    stop_ratio: float = 0.50  # stop when the next unit scores below this share of the first
    max_units: int = 3  # at most this many units without a count in the question
    max_chars: int = 420  # stop adding units past this many characters (one long unit may exceed it)
    rank_bonus: float = 0.03  # per retrieval rank above the last, to break near-ties for the better passages
    hop_weight: float = 0.8  # weight of what picked units name (a multi-hop question's bridge entities) for the next pick
    embed_limit: int = 6  # embed only this many units, the best by BM25 (embedding costs ~5-30 ms a sentence on CPU)
    k1: float = 1.2
    b: float = 0.75


DEFAULT_TUNING = Tuning()


@dataclass(frozen=True)
class Unit:
    passage: int  # the passage's citation number in the prompt
    position: int  # order inside the passage
    kind: UnitKind
    text: str  # as quoted: one line for sentences and items, verbatim lines for tables and code
    terms: tuple[str, ...]  # stemmed content terms, with repeats (BM25 term frequency)


@dataclass(frozen=True)
class Instruction:
    count: int | None  # "in two sentences": exactly this many units (when that many pass the floor)
    shape: Shape
    code: bool = False  # the question asks for code: a code block that shares its terms belongs in the answer


@dataclass
class Selection:
    units: list[Unit]  # picked, best first; empty: nothing passes the floor
    instruction: Instruction
    closest: list[int] = field(default_factory=list)  # passage numbers nearest the question, best first


def _stem(word: str) -> str:
    """A light English stemmer: enough to match "uploads" with "uploading" and "upload"."""
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def term_list(text: str) -> tuple[str, ...]:
    """Stemmed content words of ``text`` in order, repeats kept (stop words and one-letter words dropped)."""
    return tuple(_stem(w) for w in (m.lower() for m in _WORD.findall(text)) if w not in _STOPWORDS and len(w) > 1)


def instruction_of(question: str) -> Instruction:
    """What the question asks of the answer's form: a count and a shape."""
    count: int | None = None
    shape: Shape = "quote"
    match = _COUNT.search(question)
    if match:
        raw = match.group(1).lower()
        count = max(1, min(10, _NUMBERS.get(raw) or int(raw)))
        if match.group(2).lower().startswith(("bullet", "point", "item", "line")):
            shape = "list"
        else:
            shape = "summary"
    if _SUMMARY.search(question):
        shape = "summary"
    elif _LIST.search(question) and not (match and shape == "summary"):
        shape = "list"
    if _QUOTE.search(question):
        shape = "quote"
    return Instruction(count, shape, bool(_CODE.search(question)))


# --- Units --------------------------------------------------------------------------------


def _split_sentences(paragraph: str) -> list[str]:
    pieces = _SENTENCE_END.split(paragraph)
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


def units_of(number: int, text: str) -> list[Unit]:
    """The quotable units of one passage: sentences, list items, tables and code blocks, furniture dropped."""
    units: list[Unit] = []
    lines = text.split("\n")
    paragraph: list[str] = []
    i = 0

    def add(kind: UnitKind, body: str) -> None:
        body = body.strip()
        if not body:
            return
        words = len(body.split())
        if kind == "sentence" and words < 4:  # headings and fragments quote badly
            return
        if kind == "item" and words < 2:
            return
        units.append(Unit(number, len(units), kind, body, term_list(body)))

    def flush() -> None:
        if paragraph:
            for sentence in _split_sentences(" ".join(paragraph)):
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
        if stripped.startswith("|"):
            flush()
            table = []
            while i < len(lines) and lines[i].strip().startswith("|"):
                table.append(lines[i].rstrip())
                i += 1
            add("table", "\n".join(table))
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


# --- Scoring and picking -----------------------------------------------------------------


def _bm25(units: Sequence[Unit], query: Sequence[str], k1: float, b: float) -> list[float]:
    if not units or not query:
        return [0.0] * len(units)
    n = len(units)
    mean_length = sum(len(u.terms) for u in units) / n or 1.0
    wanted = set(query)
    df = {t: sum(1 for u in units if t in u.terms) for t in wanted}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in wanted if df[t]}
    scores = []
    for unit in units:
        score = 0.0
        length = len(unit.terms)
        for term, weight in idf.items():
            tf = unit.terms.count(term)
            if tf:
                score += weight * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / mean_length))
        scores.append(score)
    return scores


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=False))


def _embedding_text(unit: Unit, titles: dict[int, str]) -> str:
    # A passage's title is often the entity its sentences are about ("He was born in ..."), so
    # the sentence is embedded with it.
    title = titles.get(unit.passage)
    return f"{title}. {unit.text}" if title else unit.text


def _shortlist(units: Sequence[Unit], lexical: Sequence[float], ranks: dict[int, int], limit: int) -> list[int]:
    """The indexes of the units worth embedding: the best ``limit`` by BM25, earlier passages first on ties."""
    order = sorted(range(len(units)), key=lambda i: (-lexical[i], ranks[units[i].passage], units[i].position))
    return sorted(order[:limit])


def embedding_texts(
    question: str, passages: Sequence[tuple[int, str]], *, titles: dict[int, str] | None = None, tuning: Tuning = DEFAULT_TUNING
) -> list[str]:
    """What ``select`` asks ``vectors`` to embed for these arguments: the question, then the shortlisted units."""
    titles = titles or {}
    units = [u for number, text in passages for u in units_of(number, text)]
    lexical = _bm25(units, term_list(question), tuning.k1, tuning.b)
    ranks = {number: r for r, number in enumerate(dict.fromkeys(n for n, _ in passages))}
    return [question, *(_embedding_text(units[i], titles) for i in _shortlist(units, lexical, ranks, tuning.embed_limit))]


def select(
    question: str,
    passages: Sequence[tuple[int, str]],
    *,
    titles: dict[int, str] | None = None,
    vectors: Vectors | None = None,
    tuning: Tuning = DEFAULT_TUNING,
) -> Selection:
    """The units of ``passages`` that answer ``question``, best first (see the module docstring).

    ``vectors(texts)`` embeds texts to unit-length vectors (or returns None when it cannot);
    the question is its first text. Without vectors, BM25 decides alone and the floor is one
    shared question term.
    """
    instruction = instruction_of(question)
    titles = titles or {}
    units = [u for number, text in passages for u in units_of(number, text)]
    query = term_list(question)
    if not units:
        return Selection([], instruction, [n for n, _ in passages][:3])
    lexical = _bm25(units, query, tuning.k1, tuning.b)
    best_lexical = max(lexical) or 1.0
    ranks = {number: r for r, number in enumerate(dict.fromkeys(n for n, _ in passages))}
    shortlist = _shortlist(units, lexical, ranks, tuning.embed_limit)
    got = vectors([question, *(_embedding_text(units[i], titles) for i in shortlist)]) if vectors else None
    # embedded[0] is the question's vector, embedded[i + 1] unit i's (None: not shortlisted, so not quotable).
    embedded: list[list[float] | None] | None = None
    if got is not None:
        embedded = [got[0], *([None] * len(units))]
        for slot, i in enumerate(shortlist, start=1):
            embedded[i + 1] = got[slot]
    last_rank = max(ranks.values(), default=0)
    scores: list[float] = []
    passing: list[bool] = []
    for i, unit in enumerate(units):
        bonus = tuning.rank_bonus * (last_rank - ranks[unit.passage])
        if embedded is not None:
            vector = embedded[i + 1]
            cosine = _dot(embedded[0], vector) if vector is not None else -1.0
            scores.append(tuning.semantic_weight * cosine + (1 - tuning.semantic_weight) * lexical[i] / best_lexical + bonus)
            # Code embeds far from prose questions; asked for, a block naming the question's terms is relevant.
            passing.append(vector is not None and (
                cosine >= tuning.floor or (instruction.code and unit.kind == "code" and lexical[i] > 0)))
        else:
            scores.append(lexical[i] / best_lexical + bonus)
            passing.append(lexical[i] > 0)
    closest = list(dict.fromkeys(units[i].passage for i in sorted(range(len(units)), key=lambda i: -scores[i])))[:3]
    candidates = [i for i in range(len(units)) if passing[i]]
    if not candidates:
        return Selection([], instruction, closest)
    limit = instruction.count or (max(tuning.max_units, 5) if instruction.shape == "list" else tuning.max_units)
    picked: list[int] = []
    covered: set[str] = set()
    findable = {t for t in query if any(t in units[i].terms for i in candidates)}
    chars = 0
    top = max(scores[i] for i in candidates)
    hop = [0.0] * len(units)
    while candidates and len(picked) < limit:
        def marginal(i: int) -> float:
            if not picked or embedded is None:
                return scores[i] + hop[i]
            similarity = max(_dot(embedded[i + 1], embedded[j + 1]) for j in picked)  # type: ignore[arg-type]
            return tuning.mmr_lambda * (scores[i] + hop[i]) - (1 - tuning.mmr_lambda) * similarity

        best = max(candidates, key=marginal)
        candidates.remove(best)
        if embedded is not None and any(
            _dot(embedded[best + 1], embedded[j + 1]) >= tuning.duplicate for j in picked  # type: ignore[arg-type]
        ):
            continue
        if any(units[best].text == units[j].text for j in picked):
            continue
        if picked and instruction.count is None:
            # Complete: the question's terms are all in the answer, the next unit is much weaker,
            # or the answer is long enough.
            if scores[best] < tuning.stop_ratio * top or chars >= tuning.max_chars:
                break
            if findable and findable <= covered and instruction.shape != "list" and not (
                instruction.code and units[best].kind == "code" and all(units[j].kind != "code" for j in picked)
            ):
                break
        picked.append(best)
        covered |= set(units[best].terms)
        chars += len(units[best].text)
        if tuning.hop_weight:
            # A multi-hop question's next fact is about what the first names ("published by the APA"
            # -> "the APA's first president"): the picked units' own terms join the query.
            bridge = [t for t in covered if t not in query]
            lexical_hop = _bm25(units, bridge, tuning.k1, tuning.b)
            best_hop = max(lexical_hop) or 1.0
            hop = [tuning.hop_weight * lexical_hop[i] / best_hop if units[i].passage not in {units[j].passage for j in picked} else 0.0
                   for i in range(len(units))]
    return Selection([units[i] for i in picked], instruction, closest)
