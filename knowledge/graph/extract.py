"""Offline entity and relation extraction: what one chunk mentions, from its text alone (no model).

Sources of mentions, most trusted first (``EXTRACTOR_RANK``):

- ``title``: the chunk's own document title. The chunk is *about* it, so it *defines* the name.
- ``heading``: a Markdown heading inside the chunk; it defines its name too.
- ``reference``: a name that some chunk of the tenant defines (another document's title, a
  heading), found in the text by multi-pattern matching (Aho-Corasick over the gazetteer).
- ``llm``: a triple an optional model extracted (``knowledge.graph.llm``), merged in by the store.
- ``name`` / ``acronym``: capitalized multi-word names ("Hank Snow", "University of Oxford")
  and acronyms ("NASA", "U.S."), by pattern.

Relations: two entities named in one sentence co-occur (``co-occurs with``, weak), and
"Full Name (ACR)" says ``ACR`` abbreviates the name. Both ends of every relation are
mentions of the same chunk, so removing a chunk's mentions removes its relations' basis too.

Everything here is a pure function of the chunk's text, its document's title and the
gazetteer, which is what lets the store keep the graph equal to a rebuild.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import ahocorasick

# Higher wins when two sources find one entity in one chunk (the mention keeps one extractor).
EXTRACTOR_RANK: dict[str, int] = {"title": 6, "heading": 5, "reference": 4, "llm": 3, "name": 2, "acronym": 1}
# How much a mention ties its chunk to the entity; graph expansion multiplies by it.
WEIGHTS: dict[str, float] = {"title": 1.0, "heading": 1.0, "reference": 0.8, "llm": 0.7, "name": 0.5, "acronym": 0.5}
DEFINING = frozenset({"title", "heading"})
# Entity types by where the entity was first defined or found (an LLM may say more, e.g. "person").
TYPE_OF: dict[str, str] = {"title": "document", "heading": "heading", "name": "name", "acronym": "acronym"}

CO_OCCURS = "co-occurs with"
ABBREVIATES = "abbreviation of"
CO_OCCURRENCE_WEIGHT = 0.25  # per sentence naming both, at most 1
MAX_ENTITIES_PER_SENTENCE = 6  # pairs grow quadratically: a list sentence names dozens
MAX_NAME_CHARS = 300
MAX_NAME_TOKENS = 12
# Only names of up to this many words are looked for in other chunks (and in queries): a longer
# title ("Exposure to air pollution and the risk of ...") is a sentence that no other passage
# repeats, and leaving such names out keeps the gazetteer, and its upkeep, small.
MAX_REFERENCE_TOKENS = 6

# PostgreSQL's English stop words (the tsvector configuration's): a name made only of these has
# no lexeme to search for, so it never enters the gazetteer.
STOP_WORDS = frozenset(
    "a about above after again against all am an and any are as at be because been before being below between both "
    "but by can did do does doing don down during each few for from further had has have having he her here hers "
    "herself him himself his how i if in into is it its itself just me more most my myself no nor not now of off on "
    "once only or other our ours ourselves out over own s same she should so some such t than that the their theirs "
    "them themselves then there these they this those through to too under until up very was we were what when where "
    "which while who whom why will with you your yours yourself yourselves".split()
)
_ARTICLES = ("the ", "a ", "an ")
# Capitalized words that start sentences or clauses without naming anything.
_LEAD_WORDS = frozenset(
    "the a an in on at this that these those he she it his her its their they we i you our my when after before "
    "during while if as but and or so since although though according many some most several there here however "
    "also both each every other another such what which who where how why then thus hence yet still "
    "january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
# Lower-case words inside names ("University of Oxford", "Procter & Gamble"); not "and" or "on": they join two names.
_CONNECTORS = "of|the|de|del|della|der|den|di|da|du|des|la|le|van|von|y|&|for|upon|al|bin|ibn|zu"
_ROMAN = re.compile(r"^(?=[IVX])X{0,3}(?:IX|IV|V?I{0,3})$")  # II, IV, XIV: numbering, not acronyms
_ACRONYM_STOP = frozenset({"I", "A", "OK", "AM", "PM", "AD", "BC", "CE", "BCE", "TV"})


def _upper_class() -> str:
    """Every uppercase letter of the Basic Multilingual Plane as a regex class body (``re`` has no ``\\p{Lu}``)."""
    codes = [i for i in range(0x10000) if chr(i).isupper()]
    ranges: list[str] = []
    start = prev = codes[0]
    for code in [*codes[1:], -1]:
        if code == prev + 1:
            prev = code
            continue
        ranges.append(re.escape(chr(start)) if start == prev else f"{re.escape(chr(start))}-{re.escape(chr(prev))}")
        start = prev = code
    return "".join(ranges)


_UP = _upper_class()
_CAP_WORD = rf"(?:[{_UP}][\w'’\-]*[\w]|[{_UP}]\.|[{_UP}])"
# Both begin with the capital itself and look behind it afterwards ("[A-Z](?<!\w.)" is "(?<!\w)[A-Z]"):
# a pattern that starts with a character class lets the regex engine skip ahead to the next capital,
# where one that starts with a lookbehind is tried at every character (three times slower).
_NAME = re.compile(rf"[{_UP}](?<![\w'’.\-].)(?:[\w'’\-]*[\w]|\.|)(?:[ \t]+(?:(?:{_CONNECTORS})[ \t]+){{0,2}}{_CAP_WORD})+")
_ACRONYM = re.compile(rf"[{_UP}](?<![\w.].)(?:[{_UP}0-9]{{1,7}}s?|\.(?:[{_UP}]\.){{1,3}})(?![\w])")
_DEFINITION = re.compile(rf"({_CAP_WORD}(?:[ \t]+(?:(?:{_CONNECTORS})[ \t]+){{0,2}}{_CAP_WORD})+)[ \t]*\(([{_UP}][{_UP}0-9&.]{{1,9}})\)")
# The "(ACR)" that ends every definition: texts without one (nearly all) skip ``_DEFINITION``, which
# starts at every capitalized word and cost as much as the name and acronym patterns together.
_SHORT_FORM = re.compile(rf"\(([{_UP}][{_UP}0-9&.]{{1,9}})\)")
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
# Sentence ends: ., ! or ? then space and no lower-case letter; blank lines; line breaks before
# headings or list items. ``_NOT_AN_END`` then drops the ends after an initial ("G. Stanley Hall")
# or a common abbreviation (a plain search plus a check per end is several times faster than
# lookbehinds tried at every character).
_SENTENCE_END = re.compile(r"[.!?]\s+(?=[^\sa-z])|\n[ \t]*\n\s*|\n(?=[ \t]*(?:#|[-*•]\s|\d+[.)]\s))")
_NOT_AN_END = re.compile(r"(?:^|[\s(])(?:[A-Z]|Mr|Ms|Mrs|Dr|St|Mt|vs|No|Jr|Sr)\.$")


def sentence_starts(text: str) -> list[int]:
    """Where each sentence of ``text`` starts (the first is 0)."""
    starts = [0]
    for match in _SENTENCE_END.finditer(text):
        if text[match.start()] == "." and _NOT_AN_END.search(text, max(0, match.start() - 4), match.start() + 1):
            continue
        starts.append(match.end())
    return starts


_TOKEN = re.compile(r"[^\W_]+")
_DISAMBIGUATION = re.compile(r"\s*\([^()]*\)\s*$")


class _Deaccent(dict[int, str]):
    """A ``str.translate`` table mapping each character to its base letter ("é" to "e"), one for one,
    so offsets in the translated text are offsets in the original."""

    def __missing__(self, code: int) -> str:
        char = chr(code)
        base = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        self[code] = value = base if len(base) == 1 else char
        return value


_DEACCENT = _Deaccent({i: chr(i) for i in range(128)})


_NON_ASCII = re.compile(r"[^\x00-\x7f]+")


def deaccent(text: str) -> str:
    """``text`` with every letter in its base form; ASCII as it is (only the other runs go through the
    table: ``str.translate`` with a mapping calls it for every character, 0.5 ms for a chunk)."""
    return text if text.isascii() else _NON_ASCII.sub(lambda m: m.group().translate(_DEACCENT), text)


@functools.lru_cache(maxsize=65536)
def normalize(name: str) -> str:
    """The key of an entity within a tenant: case, accents, punctuation and a leading article ignored,
    and a trailing disambiguation dropped ("The Beatles" and "beatles"; "Hello Love (song)" and "Hello Love").

    "" when nothing is left to search for (only stop words, or one character).
    """
    text = _DISAMBIGUATION.sub("", name.strip()) or name.strip()
    tokens = [t.casefold() for t in _TOKEN.findall(deaccent(text))][:MAX_NAME_TOKENS]
    key = " ".join(tokens)
    for article in _ARTICLES:
        if key.startswith(article) and len(key) > len(article):
            key = key[len(article):]
            tokens = tokens[1:]
            break
    if len(key) < 2 or all(t in STOP_WORDS for t in tokens):
        return ""
    return key[:MAX_NAME_CHARS]


def display_name(name: str) -> str:
    """How an entity is shown: the name as written, without a trailing disambiguation, spaces collapsed."""
    shown = _DISAMBIGUATION.sub("", name.strip()) or name.strip()
    return " ".join(shown.split())[:MAX_NAME_CHARS]


def sentences(text: str) -> list[str]:
    starts = sentence_starts(text)
    pieces = [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)])]
    return [p for p in pieces if p and not p.isspace()]


def headings(text: str) -> list[str]:
    return [m.group(1) for m in _HEADING.finditer(text)]


@dataclass(frozen=True)
class Found:
    """One entity one chunk mentions: its key, how it reads, its type, the source that found it, the weight."""

    normalized: str
    name: str
    type: str
    extractor: str
    weight: float


@dataclass
class ChunkGraph:
    """What one chunk contributes to the graph: its mentions by key, and relations ``(subject, predicate, object) -> weight``."""

    mentions: dict[str, Found] = field(default_factory=dict)
    relations: dict[tuple[str, str, str], float] = field(default_factory=dict)
    sources: dict[tuple[str, str, str], str] = field(default_factory=dict)  # the extractor of each relation

    def add(self, found: Found) -> None:
        known = self.mentions.get(found.normalized)
        if known is None or EXTRACTOR_RANK[found.extractor] > EXTRACTOR_RANK[known.extractor]:
            if known is not None and known.weight > found.weight:
                found = Found(found.normalized, found.name, found.type, found.extractor, known.weight)
            self.mentions[found.normalized] = found
        elif found.weight > known.weight:
            self.mentions[found.normalized] = Found(known.normalized, known.name, known.type, known.extractor, found.weight)

    def relate(self, subject: str, predicate: str, obj: str, weight: float, *, extractor: str) -> None:
        """Add a relation between two of the chunk's mentions (weights add up, to at most 1)."""
        if subject == obj or subject not in self.mentions or obj not in self.mentions:
            return
        key = (subject, predicate, obj)
        self.relations[key] = min(1.0, self.relations.get(key, 0.0) + weight)
        self.sources.setdefault(key, extractor)

    def relation_extractor(self, subject: str, predicate: str, obj: str) -> str:
        return self.sources.get((subject, predicate, obj), "sentence")

    def defined(self) -> set[str]:
        """The names this chunk defines (its title, its headings): the gazetteer's entries."""
        return {k for k, f in self.mentions.items() if f.extractor in DEFINING}


class Gazetteer:
    """The names a tenant's chunks define, matched all at once in normalized text (Aho-Corasick).

    ``names`` maps each key to ``(display name, type)``. Immutable once built; the store caches
    one per tenant and gazetteer version.
    """

    def __init__(self, names: Mapping[str, tuple[str, str]]) -> None:
        self.names = {k: v for k, v in names.items() if referable(k)}
        self._automaton = ahocorasick.Automaton()
        for key in self.names:
            self._automaton.add_word(f" {key} ", key)
        if self.names:
            self._automaton.make_automaton()

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, key: object) -> bool:
        return key in self.names

    def find(self, normalized_text: str) -> Iterable[tuple[int, str]]:
        """``(start, key)`` of every occurrence in `` token token ... `` text (``start`` at the leading space)."""
        if not self.names:
            return ()
        return ((end - len(key) - 1, key) for end, key in self._automaton.iter(normalized_text))


EMPTY_GAZETTEER = Gazetteer({})


def referable(key: str) -> bool:
    """Whether other chunks are searched for this name (``MAX_REFERENCE_TOKENS`` words at most)."""
    return key.count(" ") < MAX_REFERENCE_TOKENS


def own_names(title: str | None, text: str) -> dict[str, Found]:
    """The names a chunk defines: its document's title and its headings."""
    found: dict[str, Found] = {}
    for source, raw in [("title", title or ""), *(("heading", h) for h in headings(text))]:
        key = normalize(raw)
        if key and key not in found:
            found[key] = Found(key, display_name(raw), TYPE_OF[source], source, WEIGHTS[source])
    return found


def _normalized(text: str, starts: Sequence[int]) -> tuple[str, list[int], list[list[str]]]:
    """The text as gazetteers match it: `` token token ... `` casefolded and without accents, " \x01 "
    between sentences so no name spans two; where each sentence starts in it; each sentence's words as written."""
    plain = deaccent(text)
    pieces: list[str] = []
    bases: list[int] = []
    tokens: list[list[str]] = []
    position = 0
    for i, begin in enumerate(starts):
        words = _TOKEN.findall(plain, begin, starts[i + 1] if i + 1 < len(starts) else len(plain))
        piece = " ".join(words).casefold()
        tokens.append(words)
        bases.append(position)
        pieces.append(piece)
        position += len(piece) + 3
    return " " + " \x01 ".join(pieces) + " ", bases, tokens


def may_reference(text: str, gazetteer: Gazetteer) -> bool:
    """Whether ``extract`` could find a reference to one of ``gazetteer``'s names in ``text``.

    False means exactly that: no name of it occurs in the text as references are matched, so a
    gazetteer gaining or losing these names leaves the chunk's extraction as it was.
    """
    if not len(gazetteer):
        return False
    norm, _, _ = _normalized(text, sentence_starts(text))
    return next(iter(gazetteer.find(norm)), None) is not None


def extract(
    text: str, *, title: str | None, gazetteers: Iterable[Gazetteer] = (), excluded: frozenset[str] | set[str] = frozenset(),
    own: Mapping[str, Found] | None = None,
) -> ChunkGraph:
    """The mentions and relations of one chunk.

    ``gazetteers``: the names defined anywhere in the tenant (references to them are found);
    ``excluded``: gazetteer keys that no longer count (names whose last definition is going away);
    ``own``: ``own_names(title, text)`` when the caller has it already.
    Each pattern runs once over the whole text; a match belongs to the sentence it starts in.
    """
    graph = ChunkGraph()
    for found in (own_names(title, text) if own is None else own).values():
        graph.add(found)
    starts = sentence_starts(text)
    by_sentence: dict[int, list[str]] = {}

    def seen(offset: int, key: str) -> None:
        by_sentence.setdefault(bisect_right(starts, offset) - 1, []).append(key)

    lookups = [g for g in gazetteers if len(g)]
    if lookups:
        norm, bases, tokens = _normalized(text, starts)
        for gazetteer in lookups:
            for start, key in gazetteer.find(norm):
                if key in excluded:
                    continue
                sentence = bisect_right(bases, start) - 1
                # One-word names must be written as names ("Green" the album, not the colour).
                if " " not in key:
                    index = norm.count(" ", bases[sentence] + 1, start + 1)
                    words = tokens[sentence]
                    if index >= len(words) or not words[index][:1].isupper():
                        continue
                name, kind = gazetteer.names[key]
                graph.add(Found(key, name, kind, "reference", WEIGHTS["reference"]))
                by_sentence.setdefault(sentence, []).append(key)
    for match in _NAME.finditer(text):
        begin = starts[bisect_right(starts, match.start()) - 1]
        found = _name_of(match.group(0), sentence_start=not text[begin:match.start()].strip(" \t\n\"“‘'(["))
        if found is not None:
            graph.add(found)
            seen(match.start(), found.normalized)
    for match in _ACRONYM.finditer(text):
        found = _acronym_of(match.group(0))
        if found is not None:
            graph.add(found)
            seen(match.start(), found.normalized)
    if "(" in text and any(normalize(m.group(1)) in graph.mentions for m in _SHORT_FORM.finditer(text)):
        for match in _DEFINITION.finditer(text):
            full, short = _name_of(match.group(1)), normalize(match.group(2))
            if full is not None and short and short in graph.mentions:
                graph.relate(short, ABBREVIATES, full.normalized, 1.0, extractor="pattern")
    for keys in by_sentence.values():
        unique = list(dict.fromkeys(k for k in keys if k in graph.mentions))[:MAX_ENTITIES_PER_SENTENCE]
        for i, a in enumerate(unique):
            for b in unique[i + 1:]:
                first, second = (a, b) if a < b else (b, a)
                graph.relate(first, CO_OCCURS, second, CO_OCCURRENCE_WEIGHT, extractor="sentence")
    return graph


@functools.lru_cache(maxsize=65536)
def _acronym_of(surface: str) -> Found | None:
    """An acronym match as a mention ("NASA", "CDs" as "CD"); None for numerals, stop words, one capital.

    Cached: a pure function of the surface, and the same acronyms recur across a tenant's chunks.
    """
    bare = surface[:-1] if surface.endswith("s") and len(surface) > 2 else surface
    if bare in _ACRONYM_STOP or _ROMAN.match(bare) or sum(c.isupper() for c in bare) < 2:
        return None
    key = normalize(bare)
    return Found(key, bare[:MAX_NAME_CHARS], "acronym", "acronym", WEIGHTS["acronym"]) if key else None


@functools.lru_cache(maxsize=65536)  # pure, and names recur across a tenant's chunks (Found is immutable)
def _name_of(surface: str, *, sentence_start: bool = False) -> Found | None:
    """A capitalized run as a name: leading function words and a possessive dropped; two words at least.

    At a sentence's start, a first word followed by "the" is the sentence's verb ("Read the Safety Rules").
    """
    words = surface.split()
    if sentence_start and len(words) > 2 and words[1] == "the":
        words = words[2:]
    while words and (words[0].lower().strip(".") in _LEAD_WORDS or words[0].lower().startswith(("i'", "i’"))):
        words = words[1:]
    while words and words[-1].lower() in _CONNECTORS.split("|"):
        words = words[:-1]
    if words and (words[-1].endswith("'s") or words[-1].endswith("’s")):
        words[-1] = words[-1][:-2]
    capitals = [w for w in words if w[:1].isupper()]
    if len(capitals) < 2:
        return None
    name = " ".join(words)
    key = normalize(name)
    if not key or " " not in key:
        return None
    return Found(key, name[:MAX_NAME_CHARS], "name", "name", WEIGHTS["name"])
