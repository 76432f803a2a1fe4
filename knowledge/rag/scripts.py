"""Which writing system a text is written in, and whether an embedding model can read it.

The local embedders (all-MiniLM-L6-v2, bge-small-en-v1.5) were trained on English: a Chinese or
Japanese text goes through their WordPiece vocabulary as a handful of single characters or
``[UNK]``, and its vector lands near the centre of the space, at a cosine of 0.45-0.6 (bge) from
*any* English question. That number looks like relevance and is noise: short CJK documents
topped semantic results for "What was the revenue in Q3?". So an embedder may declare the
scripts it reads (``scripts``, an optional attribute, of the innermost embedder); a cosine
between a query and a text of which it cannot read one is no similarity at all
(``reads``). An embedder that declares nothing (a provider's multilingual model, a test's) is
trusted with every script.

Framework-free: used by the RAG service (which semantic hits count) and by the offline chat
model (which sentences may answer a question).
"""

from __future__ import annotations

import re
from typing import Literal

from knowledge.rag.protocols import innermost

Script = Literal["latin", "cjk", "other"]

# Han (with extension A and the compatibility ideographs), hiragana, katakana (with the phonetic
# extensions and the halfwidth forms), and Hangul syllables and jamo: the scripts written without
# spaces between words (Korean has spaces, but its particles attach to the word; the keyword index
# treats all of them as runs of bigrams, README "Chinese, Japanese and Korean").
CJK_CLASS = ("\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
             "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f")
CJK_RUN = re.compile(f"[{CJK_CLASS}]+")
_LATIN = re.compile(r"[A-Za-z\u00c0-\u024f\u1e00-\u1eff]")
_LETTER = re.compile(r"[^\W\d_]")
# A CJK character carries about what a word does, a Latin letter a fifth of one: "Quarry 的价格是多少"
# is Chinese, "The 咖啡 here is good" English.
_CJK_CHARACTER_WEIGHT = 3


def script_of(text: str) -> Script | None:
    """The script most of ``text``'s letters are in (CJK characters weighted as about a word each);
    None when it holds no letters (numbers, punctuation)."""
    if text.isascii():  # most text, answered without counting (the offline model asks for every sentence)
        return "latin" if _LATIN.search(text) else None
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    latin = len(_LATIN.findall(text))
    other = len(_LETTER.findall(text)) - latin - cjk
    weights: dict[Script, int] = {"cjk": cjk * _CJK_CHARACTER_WEIGHT, "latin": latin, "other": other}
    best = max(weights, key=lambda s: weights[s])
    return best if weights[best] > 0 else None


def scripts_read_by(embedder: object | None) -> frozenset[str] | None:
    """The scripts ``embedder`` declares it reads (its innermost provider's ``scripts``), or None: all of them."""
    if embedder is None:
        return None
    value = getattr(innermost(embedder), "scripts", None)
    if isinstance(value, str) or not isinstance(value, frozenset | set | tuple | list):
        return None
    return frozenset(str(s) for s in value)


def reads(embedder: object | None, text: str) -> bool:
    """Whether ``embedder``'s vector of ``text`` means something: it declares no scripts, ``text`` has
    no letters, or ``text``'s script is one it declares."""
    scripts = scripts_read_by(embedder)
    if scripts is None:
        return True
    script = script_of(text)
    return script is None or script in scripts
