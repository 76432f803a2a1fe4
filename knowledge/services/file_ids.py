"""Document ids from file names: THE rule, for admin and API uploads, ``manage.py ingest`` and stored file names.

Pure functions (no database); ``knowledge.services.documents`` decides which candidate an upload
gets, under the row locks.

Ids keep the RAG API's safe-identifier rule (``limits.DOCUMENT_ID_RE``: ASCII letters, digits and
``._:/@+=-``). Unicode letters are not let in: ids travel in URLs, chunk ids, citations, OpenAPI
and MCP patterns of the seed's contract, and Unicode would bring ids that look the same and differ
(NFC vs NFD, homoglyphs) to every one of those places. So a name is made ASCII:

- the name is the part after the last ``/`` or ``\\``, in NFC (macOS sends NFD: the same name);
- characters an id allows stay; others decompose (NFKD) and keep their ASCII letters and digits
  (``café`` -> ``cafe``, ``ＡＢＣ`` -> ``ABC``); what is left becomes ``-``;
- when that drops a letter or digit (``笔记``, ``ß``), leaves nothing, or the id would pass 200
  characters, 8 hex digits of the SHA-256 of the whole name are appended to the stem, before the
  extension: ``笔记.txt`` -> ``cda88b16.txt``, ``Report 日本.pdf`` -> ``Report-b971a149.pdf``.

A name maps to at most two candidates: its readable id and the same with the hash. Two names can
still share a readable id (``café.txt`` and ``cafe.txt``, ``a b.txt`` and ``a-b.txt``): the
caller gives the second one the hashed candidate (``documents._claim_for_file``, ``document_id_for_file``).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Final

MAX_ID_CHARS: Final = 200  # DOCUMENT_ID_RE's bound
MAX_NAME_CHARS: Final = 255  # Document.source_name, and Django's own cut of uploaded names
HASH_CHARS: Final = 8  # 32 bits: a hashed id collides only with another name of the same readable stem
_KEEP = re.compile(r"[A-Za-z0-9._@+=-]")  # ':' is left out: chunk ids end in ':<n>'
# An extension is kept apart (the hash goes before it) when it is short ASCII, as file types are.
_EXTENSION = re.compile(r"(?<=.)\.[A-Za-z0-9]{1,16}$")
_UNSAFE_NAME = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")  # not storable, or not one line


class FileNameError(ValueError):
    """A file name no document id can come from (empty, or only ``.``/``..`` and separators)."""


def file_name(name: str, *, folders: bool = False) -> str:
    """The name that identifies a file: NFC, without control characters, at most 255 characters.

    Without ``folders``, the last part of a path (``/`` or ``\\``); with it, the whole relative
    path with ``/`` separators and no empty, ``.`` or ``..`` parts (``manage.py ingest`` keeps
    folders in ids). Raises ``FileNameError`` when no part is left.
    """
    cleaned = unicodedata.normalize("NFC", _UNSAFE_NAME.sub("", name))
    parts = [p.strip() for p in cleaned.replace("\\", "/").split("/")]
    parts = [p for p in parts if p.strip(".")]  # '..' must never climb, nor '.' or '' count as a name
    if not parts:
        raise FileNameError(f"{name[:80]!r} is not a file name")
    full = "/".join(parts) if folders else parts[-1]
    if len(full) > MAX_NAME_CHARS:  # cut the stem, keep the extension (as Django cuts uploaded names)
        found = _EXTENSION.search(full)
        extension = found.group() if found else ""
        full = full[: MAX_NAME_CHARS - len(extension)] + extension
    return full


def document_id_candidates(name: str, *, folders: bool = False) -> tuple[str, ...]:
    """The ids a file of this name may get, preferred first: ``(readable, hashed)``, or ``(hashed,)``
    when the readable id would lose letters, be empty or too long.

    Deterministic: the same name (in any Unicode normal form) always gives the same candidates, so
    uploading it again finds its document. Every candidate is a valid new document id
    (``check_new_document_id``). Raises ``FileNameError`` like ``file_name``.
    """
    full = file_name(name, folders=folders)
    *folder_parts, last = full.split("/")
    found = _EXTENSION.search(last)
    extension = found.group() if found else ""
    folder_ids = [_ascii(part) for part in folder_parts]
    stem, stem_lost = _ascii(last[: len(last) - len(extension)])
    prefix = "/".join(part for part, _ in folder_ids if part)
    head = f"{prefix}/{stem}" if prefix and stem else prefix or stem
    readable = f"{head}{extension}"
    digest = hashlib.sha256(full.encode("utf-8")).hexdigest()[:HASH_CHARS]
    # With no readable stem the hash is the file's part of the id: 'notes/笔记.txt' -> 'notes/30e132ac.txt'.
    separator = "-" if stem else "/"
    room = MAX_ID_CHARS - len(separator) - HASH_CHARS - len(extension)
    if len(head) > room:
        head = head[:room].rstrip("-./")
    hashed = f"{head}{separator}{digest}{extension}" if head else f"{digest}{extension}"
    lost = stem_lost or any(part_lost for _, part_lost in folder_ids)
    if lost or not stem or len(readable) > MAX_ID_CHARS:
        return (hashed,)
    return (readable, hashed)


def legacy_document_ids(name: str, *, folders: bool = False) -> tuple[str, ...]:
    """The ids the rule before this one gave a file of this name (as sent in NFC or in NFD), so
    that a file uploaded or ingested then is found again and versioned, not duplicated: every
    character outside the id alphabet became ``-`` (``café.txt`` -> ``caf-.txt``, ``咖啡指南.md`` ->
    ``md``). For lookups only: an upload never takes one of these ids for a new document."""
    full = file_name(name, folders=folders)
    keep = "A-Za-z0-9._/@+=-" if folders else "A-Za-z0-9._@+=-"
    return tuple(dict.fromkeys(
        (re.sub(f"[^{keep}]+", "-", unicodedata.normalize(form, full)).strip("-./" if folders else "-.") or "document")[:MAX_ID_CHARS]
        for form in ("NFC", "NFD")
    ))


def document_id_from_filename(name: str) -> str:
    """The preferred id for a file of this name (``Q3 report.pdf`` -> ``Q3-report.pdf``); never raises:
    a name with nothing usable gives ``document``. Also the safe base of stored file names."""
    try:
        return document_id_candidates(name)[0]
    except FileNameError:
        return "document"


def _ascii(part: str) -> tuple[str, bool]:
    """``part`` in id characters, and whether a letter or digit was dropped on the way."""
    out: list[str] = []
    lost = False
    for char in part:
        if _KEEP.fullmatch(char):
            out.append(char)
            continue
        kept = "".join(c for c in unicodedata.normalize("NFKD", char) if c.isascii() and c.isalnum())
        if kept:
            out.append(kept)
        else:
            lost = lost or unicodedata.category(char)[0] in "LN"
            out.append("-")
    text = re.sub(r"-{2,}", "-", "".join(out))
    # An id starts with a letter or digit, and a part must not end in '.' (nor look like '..').
    text = re.sub(r"^[^A-Za-z0-9]+", "", text).rstrip("-.")
    return text, lost

