"""Which sentences of the retrieved passages answer the question: the offline model's whole judgement.

``select(question, passages, vectors=...)`` splits the numbered passages into *units*
(``chat.llm.units``: sentences of paragraphs, Chinese and Japanese ones ending at 。！？; list
items and fenced code blocks whole; each table row with its header row; page furniture
dropped), and scores every unit against the question
with the two signals Quarry has offline:

- BM25 over the question's content terms (a small in-process index over the candidate
  units: the passages are few, so the IDF is theirs, not the corpus's), normalized by the
  best unit's score; CJK text, written without spaces, gives character bigrams as terms;
- a cosine similarity to the question: in the chat pipeline, the passage's own (its stored
  chunk vector, which retrieval has just compared with the question's; handed over as data:
  ``chat.llm.stream_chat(similarities=...)``, the offline model's ``similarity``), standing for each of its units', so answering embeds nothing;
  elsewhere (the agent's tool results) the local embedder's cosine of each shortlisted unit
  (BM25 alone when there is no embedder).

Two cues add to that: a unit that holds what the question's wh-phrase asks for ("how many"
-> a number, "when" -> a date, "who"/"where" -> a name not in the question), and, once a
unit is picked, the next hop of a multi-hop question: the units holding a name the pick
holds and the question does not, in their text or their passage's title ("... took place in
Thessaloniki, Greece" -> "Thessaloniki handled 273,282 TEUs"; "... a single by Hank Snow" ->
the passage titled "Hank Snow"), scored by those names and the question's terms no pick holds
yet; they become candidates even when they share no word with the question. ``bridge_query``
turns the best unit's new names into the query of a second retrieval hop (the chat pipeline's
and the offline agent's). Nothing here knows a data set: the cues are the question's grammar,
capitalized names and the passages' titles.

A unit is a candidate only when it reaches the relevance floor (``Tuning.passage_floor`` on
the passage's similarity and a shared question term, ``Tuning.floor`` on a unit's own cosine,
or a shared question term when there is neither). Units are then picked by
maximal marginal relevance (likeness: the units' cosine, or their terms' overlap without
vectors), so a second copy of the same statement (one chunk overlapping the next) is never
quoted twice, and picking stops when the answer is complete: the
question's terms are covered, or the next unit scores well below the first, or the answer
reached its length budget. Instructions in the question ("in two sentences", "list",
"summarise", "quote") set the count and the shape.

A unit written in another script than the question (``knowledge.rag.scripts``: a Chinese
sentence for an English question, or the reverse) is never a candidate: an extractive answer
quotes the question's language, and an English embedder's cosine between the two is noise.

No sentence above the floor means the passages do not answer: ``Selection.units`` is empty
and the caller says so instead of quoting the nearest text.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from chat.llm.units import STOPWORDS, WORD, Unit, stem, term_list, units_of
from knowledge.rag.scripts import script_of

Shape = Literal["quote", "list", "summary"]
Vectors = Callable[[list[str]], list[list[float]] | None]

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

# What kind of thing the question asks for, by its wh-phrase: a sentence that holds one is likelier
# to be the answer than one that only repeats the question's words.
AnswerType = Literal["number", "date", "name", "place"]
_ANSWER_TYPES: tuple[tuple[AnswerType, re.Pattern[str]], ...] = (
    ("number", re.compile(r"\bhow (?:many|much|long|old|tall|high|far|big|large)\b|\bwhat (?:is the )?(?:number|population|percentage|amount)\b", re.I)),
    ("date", re.compile(r"\bwhen\b|\bwhat (?:year|date|day|month|century|decade)\b|\bin which (?:year|century)\b", re.I)),
    ("place", re.compile(r"\bwhere\b|\b(?:what|which) (?:country|city|state|county|town|province|region|continent|island|river|place|location)\b", re.I)),
    ("name", re.compile(r"\bwho(?:m|se)?\b|\b(?:what|which) (?:is the )?(?:name|person|company|band|team|group|organization|party)\b", re.I)),
)
_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b")
_NUMBER = re.compile(r"\b\d[\d,.]*\b|\b(?:hundred|thousand|million|billion|dozen)\b", re.I)
_CAPITALIZED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][\w'\-]+")


@dataclass(frozen=True)
class Tuning:
    """The selection's parameters (defaults tuned on MuSiQue with ``bench/tune_offline.py``; the
    end-to-end figures are ``manage.py evaluate_answers``'s, README "Chat")."""

    floor: float = 0.30  # least cosine similarity (question, unit) a unit needs to be quoted
    semantic_weight: float = 0.6  # score = w * cosine + (1 - w) * BM25 / best BM25
    passage_floor: float = 0.35  # the same with the passage's similarity standing for its units' (the chat pipeline's)
    passage_weight: float = 0.8  # and its weight then: one number per passage says less about a sentence, BM25 decides within
    # When no unit passes on its passage's similarity, the best units are embedded and this floor applies to
    # their own cosines (chat.llm.offline.answer_from). The lowest that declines as many off-topic questions
    # as before (200 SciFact train claims asked of the MuSiQue tenant: 0.98 declined at 0.45 and 0.5, 0.975
    # at 0.4, 0.91 at 0.3); on MuSiQue it answers 0.33 (0.32 without the recheck), 2% declined (7%).
    recheck_floor: float = 0.45
    mmr_lambda: float = 0.75  # relevance against novelty when picking the next unit
    duplicate: float = 0.92  # a unit this similar to a picked one is the same statement
    stop_ratio: float = 0.60  # stop when the next unit scores below this share of the first
    max_units: int = 3  # at most this many units without a count in the question
    max_chars: int = 300  # stop adding units past this many characters (one long unit may exceed it)
    rank_bonus: float = 0.03  # per retrieval rank above the last, to break near-ties for the better passages
    hop_weight: float = 0.8  # weight, after a pick, of units holding the names it holds (a multi-hop question's bridge) for the next pick
    type_weight: float = 0.15  # bonus of a unit holding what the question asks for (a number, a date, a name, a place)
    lead_bonus: float = 0.0  # bonus of a passage's first unit (an article's lead sentence says what it is about)
    title_weight: float = 0.3  # bonus, after a pick, of the units of a passage whose title the pick names (the next hop)
    embed_limit: int = 6  # embed only this many units, the best by BM25 (embedding costs ~5-30 ms a sentence on CPU)
    embed_words: int = 32  # embed a unit's first this many words (its title included): the cost grows with the longest
    k1: float = 1.2
    b: float = 0.75


DEFAULT_TUNING = Tuning()


def answer_type(question: str) -> AnswerType | None:
    """What the question asks for, by its wh-phrase ("how many" -> number, "when" -> date, ...), or None."""
    for kind, pattern in _ANSWER_TYPES:
        if pattern.search(question):
            return kind
    return None


def holds_answer_type(text: str, kind: AnswerType | None, question_terms: frozenset[str] = frozenset()) -> bool:
    """Whether ``text`` holds a thing of that kind that the question does not already name."""
    if kind is None:
        return False
    if kind == "date":
        return bool(_YEAR.search(text))
    if kind == "number":
        return any(m.group(0) not in question_terms for m in _NUMBER.finditer(text))
    # A name or a place: a capitalized word inside the sentence (not its first word) that is not the question's.
    return any(stem(m.group(0).lower()) not in question_terms for m in _CAPITALIZED.finditer(text))


_MONTHS = frozenset("january february march april may june july august september october november december monday tuesday "
                    "wednesday thursday friday saturday sunday".split())


def name_terms(text: str) -> set[str]:
    """The stemmed terms of the names ``text`` holds (capitalized words past its first), months and days excepted."""
    return {stem(w) for w in (m.group(0).lower() for m in _CAPITALIZED.finditer(text))
            if w not in _MONTHS and w not in STOPWORDS and len(w) > 1}


def _title_named(title: str, text: str) -> bool:
    """Whether ``text`` names the entity ``title`` is about ("Hello Love (song)" -> "Hello Love")."""
    name = re.sub(r"\s*\([^)]*\)\s*$", "", title).strip()
    return len(name) >= 3 and re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


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


def _embedding_text(unit: Unit, titles: dict[int, str], words: int) -> str:
    # A passage's title is often the entity its sentences are about ("He was born in ..."), so
    # the sentence is embedded with it. Only its first ``words`` words: a batch is padded to its
    # longest text, so one long table or sentence would make every unit cost its length, and what
    # a sentence is about is in its beginning.
    title = titles.get(unit.passage)
    text = f"{title}. {unit.text}" if title else unit.text
    pieces = text.split()
    return " ".join(pieces[:words]) if len(pieces) > words else text


@dataclass(frozen=True)
class _Prepared:
    """What ``select`` knows before embedding: the units, their lexical scores and the shortlist to embed."""

    units: list[Unit]
    query: tuple[str, ...]
    lexical: list[float]  # BM25 / the best unit's BM25, plus the answer-type bonus
    ranks: dict[int, int]  # passage number -> retrieval rank (0 best)
    shortlist: list[int]  # indexes of the units worth embedding, in unit order
    foreign: list[bool]  # per unit: written in another script than the question (never quoted)


def _prepare(question: str, passages: Sequence[tuple[int, str]], tuning: Tuning) -> _Prepared:
    units = [u for number, text in passages for u in units_of(number, text)]
    query = term_list(question)
    bm25 = _bm25(units, query, tuning.k1, tuning.b)
    best = max(bm25, default=0.0) or 1.0
    kind = answer_type(question)
    asked = frozenset(query) | frozenset(m.lower() for m in WORD.findall(question))
    # Only a unit that shares a term with the question gets the bonus: "a sentence with a number"
    # alone is no answer to "how many".
    lexical = [score / best + (tuning.type_weight if score > 0 and holds_answer_type(u.text, kind, asked) else 0.0)
               for u, score in zip(units, bm25, strict=True)]
    ranks = {number: r for r, number in enumerate(dict.fromkeys(n for n, _ in passages))}
    script = script_of(question)
    foreign = [script is not None and script_of(u.text) not in (None, script) for u in units]
    # The units worth embedding: the best ``embed_limit`` lexically, earlier passages first on ties.
    order = sorted((i for i in range(len(units)) if not foreign[i]),
                   key=lambda i: (-lexical[i], ranks[units[i].passage], units[i].position))
    return _Prepared(units, query, lexical, ranks, sorted(order[: tuning.embed_limit]), foreign)


def embedding_texts(
    question: str, passages: Sequence[tuple[int, str]], *, titles: dict[int, str] | None = None, tuning: Tuning = DEFAULT_TUNING
) -> list[str]:
    """What ``select`` asks ``vectors`` to embed for these arguments: the question, then the shortlisted units."""
    titles = titles or {}
    prepared = _prepare(question, passages, tuning)
    return [question, *(_embedding_text(prepared.units[i], titles, tuning.embed_words) for i in prepared.shortlist)]


def select(
    question: str,
    passages: Sequence[tuple[int, str]],
    *,
    titles: dict[int, str] | None = None,
    vectors: Vectors | None = None,
    similarity: dict[int, float] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
) -> Selection:
    """The units of ``passages`` that answer ``question``, best first (see the module docstring).

    ``vectors(texts)`` embeds texts to unit-length vectors (or returns None when it cannot);
    the question is its first text. Without vectors, BM25 decides alone and the floor is one
    shared question term.
    """
    instruction = instruction_of(question)
    titles = titles or {}
    prepared = _prepare(question, passages, tuning)
    units, query, lexical, ranks, shortlist = prepared.units, prepared.query, prepared.lexical, prepared.ranks, prepared.shortlist
    foreign = prepared.foreign
    if not units:
        return Selection([], instruction, [n for n, _ in passages][:3])
    best_lexical = 1.0  # _prepare normalized BM25 by the best unit's
    # The passages' similarities, when known, make embedding the units unnecessary (and slow).
    got = (vectors([question, *(_embedding_text(units[i], titles, tuning.embed_words) for i in shortlist)])
           if vectors and similarity is None else None)
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
        bonus = tuning.rank_bonus * (last_rank - ranks[unit.passage]) + (tuning.lead_bonus if unit.position == 0 else 0.0)
        if embedded is not None:
            vector = embedded[i + 1]
            cosine = _dot(embedded[0], vector) if vector is not None else -1.0
            scores.append(tuning.semantic_weight * cosine + (1 - tuning.semantic_weight) * lexical[i] / best_lexical + bonus)
            # Code embeds far from prose questions; asked for, a block naming the question's terms is relevant.
            passing.append(vector is not None and (
                cosine >= tuning.floor or (instruction.code and unit.kind == "code" and lexical[i] > 0)))
        elif similarity is not None:
            # The passage's own similarity to the question (its stored chunk vector, from retrieval)
            # stands for each of its units'; a passage found by keyword alone counts as at the floor.
            cosine = similarity.get(unit.passage, tuning.passage_floor)
            scores.append(tuning.passage_weight * cosine + (1 - tuning.passage_weight) * lexical[i] + bonus)
            passing.append(lexical[i] > 0 and cosine >= tuning.passage_floor)
        else:
            scores.append(lexical[i] / best_lexical + bonus)
            passing.append(lexical[i] > 0)
    # The documents to name when nothing answers: the question's language's first (a Chinese note is not
    # "the closest document" to an English question whatever its cosine).
    native = [i for i in range(len(units)) if not foreign[i]] or list(range(len(units)))
    closest = list(dict.fromkeys(units[i].passage for i in sorted(native, key=lambda i: -scores[i])))[:3]
    candidates = [i for i in range(len(units)) if passing[i] and not foreign[i]]
    if not candidates:
        return Selection([], instruction, closest)
    limit = instruction.count or (max(tuning.max_units, 5) if instruction.shape == "list" else tuning.max_units)
    picked: list[int] = []
    covered: set[str] = set()
    findable = {t for t in query if any(t in units[i].terms for i in candidates)}
    chars = 0
    top = max(scores[i] for i in candidates)
    hop = [0.0] * len(units)
    named: set[int] = set()  # passages a picked unit names by their title: the next hop's
    bridged = [False] * len(units)
    kind = answer_type(question)
    asked = frozenset(query) | frozenset(m.lower() for m in WORD.findall(question))
    asked_terms = frozenset(query)
    # Each unit's terms with its passage's title's: a passage titled "2018 Kansas gubernatorial election"
    # is about Kansas though its sentences need not say so.
    titled = [dataclasses.replace(u, terms=u.terms + term_list(titles.get(u.passage, ""))) for u in units]

    def likeness(i: int, j: int) -> float:
        """Two units' likeness: their cosine, or without vectors the overlap of their terms (one chunk
        overlapping the next repeats whole sentences)."""
        a, b = (embedded[i + 1], embedded[j + 1]) if embedded is not None else (None, None)
        if a is not None and b is not None:
            return _dot(a, b)
        if embedded is not None:
            return 0.0
        mine, theirs = set(units[i].terms), set(units[j].terms)
        return len(mine & theirs) / len(mine | theirs) if mine and theirs else 0.0

    while candidates and len(picked) < limit:
        def marginal(i: int) -> float:
            if not picked:
                return scores[i] + hop[i]
            return tuning.mmr_lambda * (scores[i] + hop[i]) - (1 - tuning.mmr_lambda) * max(likeness(i, j) for j in picked)

        best = max(candidates, key=marginal)
        candidates.remove(best)
        if any(likeness(best, j) >= tuning.duplicate for j in picked):
            continue
        if any(units[best].text == units[j].text for j in picked):
            continue
        if picked and instruction.count is None:
            # Complete: the question's terms are all in the answer, the next unit is much weaker,
            # or the answer is long enough.
            hopping = units[best].passage in named or (bridged[best] and hop[best] > 0)
            if (scores[best] + (hop[best] if hopping else 0.0)) < tuning.stop_ratio * top or chars >= tuning.max_chars:
                break
            if findable and findable <= covered and not hopping and instruction.shape != "list" and not (
                instruction.code and units[best].kind == "code" and all(units[j].kind != "code" for j in picked)
            ):
                break
        picked.append(best)
        covered |= set(units[best].terms)
        chars += len(units[best].text)
        if tuning.hop_weight:
            # A multi-hop question's next fact is about what the picks name and the question does not
            # ("... took place in Thessaloniki, Greece" -> "Thessaloniki handled 273,282 TEUs"): the
            # picks' names join the question's terms not yet answered as the next hop's query, and only
            # a unit holding one of those names (in its text or its passage's title) is bridged.
            used = {units[j].passage for j in picked}
            # The passage a pick names by its title is the next hop ("... a single by Hank Snow" -> "Hank Snow").
            named = {n for n, title in titles.items() if n not in used and any(_title_named(title, units[j].text) for j in picked)}
            names = {t for j in picked for t in name_terms(units[j].text)} - asked_terms
            hop_query = [*sorted(names), *(t for t in query if t not in covered)]
            lexical_hop = _bm25(titled, hop_query, tuning.k1, tuning.b)
            best_hop = max(lexical_hop) or 1.0
            bridged = [bool(names & set(u.terms)) and lexical_hop[i] > 0 for i, u in enumerate(titled)]
            hop = [(tuning.hop_weight * lexical_hop[i] / best_hop if bridged[i] else 0.0)
                   + (tuning.title_weight if units[i].passage in named else 0.0)
                   if units[i].passage not in used else 0.0
                   for i in range(len(units))]
            # A bridged unit, or one of a passage a pick names, need not share a word with the question
            # nor have been embedded: it becomes a candidate through the pick, scored as if at the floor,
            # the one holding what the question asks for first.
            for i, unit in enumerate(units):
                hopped = bridged[i] or (tuning.title_weight and unit.passage in named)
                if (hopped and unit.passage not in used and i not in candidates and i not in picked and not passing[i]
                        and not foreign[i]):
                    typed = tuning.type_weight if holds_answer_type(unit.text, kind, asked) else 0.0
                    weight, floor = ((tuning.semantic_weight, tuning.floor) if embedded is not None
                                     else (tuning.passage_weight, similarity.get(unit.passage, tuning.passage_floor))
                                     if similarity is not None else (0.0, 0.0))
                    scores[i] = (weight * floor + (1 - weight) * lexical[i]
                                 + tuning.rank_bonus * (last_rank - ranks[unit.passage]) + typed)
                    candidates.append(i)
    return Selection([units[i] for i in picked], instruction, closest)


def bridge_query(
    question: str,
    passages: Sequence[tuple[int, str]],
    *,
    titles: dict[int, str] | None = None,
    similarity: dict[int, float] | None = None,
    tuning: Tuning = DEFAULT_TUNING,
) -> str | None:
    """The next retrieval hop's query for ``question``, or None when there is none.

    The best unit of ``passages`` (``select``'s first pick) answers the question's first hop; the
    names it holds that the question does not ("Thessaloniki" for "the location where the 26th
    Chess Olympiad occurred") are what the next hop is about, so the query is those names followed
    by the question's words the unit does not hold ("amount TEUs handle 2010"). None when nothing
    passes the floor or the unit names nothing new: one retrieval was all there was to do.
    """
    chosen = select(question, passages, titles=titles, similarity=similarity,
                    tuning=dataclasses.replace(tuning, max_units=1))
    if not chosen.units or chosen.instruction.count is not None or chosen.instruction.shape != "quote":
        return None
    unit = chosen.units[0]
    asked = set(term_list(question))
    names = [m.group(0) for m in _CAPITALIZED.finditer(unit.text)
             if m.group(0).lower() not in _MONTHS and stem(m.group(0).lower()) not in asked and m.group(0).lower() not in STOPWORDS]
    if not names:
        return None
    held = set(unit.terms)
    rest = [w for w in WORD.findall(question) if w.lower() not in STOPWORDS and stem(w.lower()) not in held]
    return " ".join(dict.fromkeys([*names, *rest]))
