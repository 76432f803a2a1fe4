"""The bounds of the RAG API (DESIGN section 4). Every request is checked against
them before any embedder or datastore sees it."""

from __future__ import annotations

import re

MAX_DOCUMENTS_PER_INGEST = 1_000
MAX_CHARS_PER_INGEST = 50_000_000
MAX_CHARS_PER_DOCUMENT = 10_000_000
MAX_CHARS_PER_CHUNK = 1_000_000
MAX_CHUNKS_PER_INGEST = 10_000
MAX_EMBED_BATCH = 1_000
MAX_VECTOR_DIMENSIONS = 65_536
MAX_LIMIT = 100
MAX_QUERY_CHARS = 16_384
MAX_FIELDS = 64
MAX_MEMBERS = 100
MAX_FETCH_IDS = 1_000
MAX_TITLE_CHARS = 1_000
MAX_URI_CHARS = 2_048
MAX_METADATA_STRING_CHARS = 10_000

# Identifiers end up in URLs, chunk ids ("<document id>:<n>") and log lines.
DOCUMENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$")
# A chunk id is a safe, bounded identifier, as the seed bounds it, not the default chunker's
# "<document id>:<n>" shape: custom backends name chunks their own way, and a fetch of an id
# that does not exist omits it rather than refusing it. 207 characters hold every default id
# (a 200-character document id, ':' and an ordinal of up to 6 digits) and fit Chunk.chunk_id.
MAX_CHUNK_ID_CHARS = 207
CHUNK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,206}$")
CHUNK_ID_WHAT = f"chunk id (letters, digits and ._:/@+=-, at most {MAX_CHUNK_ID_CHARS})"
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Characters no text may hold: NUL (PostgreSQL text and jsonb cannot store it) and unpaired
# UTF-16 surrogates (not encodable as UTF-8).
UNSTORABLE_RE = re.compile("[\x00\ud800-\udfff]")
# Control characters (C0 and DEL) other than tab, line feed and carriage return: refused in
# queries, metadata and filter values. Titles and URIs are single lines: no controls at all.
CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
LINE_CONTROL_RE = re.compile("[\x00-\x1f\x7f]")


def is_document_id(value: object) -> bool:
    """A document id: ``DOCUMENT_ID_RE``, and ``/``-separated parts that are not empty and not only dots
    (a URL holding ``a/../b`` is normalized by clients to ``b``, so such a document could never be reached)."""
    if not isinstance(value, str) or not DOCUMENT_ID_RE.fullmatch(value):
        return False
    return all(segment.strip(".") for segment in value.split("/"))


# The same rules as JSON Schema patterns (ECMA regex; lengths are given separately as maxLength).
_ID_CHARS = "A-Za-z0-9._:@+=-"
DOCUMENT_ID_PATTERN = f"^[A-Za-z0-9][{_ID_CHARS}]*(?:/[{_ID_CHARS}]*[A-Za-z0-9_:@+=-][{_ID_CHARS}]*)*$"
DOCUMENT_ID_LOOKUP_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}$"
CHUNK_ID_PATTERN = "^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,206}$"
FIELD_PATTERN = "^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_CONTROLS = "\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f"
_LINE_CONTROLS = "\\u0000-\\u001f\\u007f"
# Free text (queries, metadata and filter values): no control characters but tab and line breaks.
TEXT_PATTERN = f"^[^{_CONTROLS}]*$"
LINE_PATTERN = f"^[^{_LINE_CONTROLS}]*$"
# ... and not only whitespace (Python's idea of it: \u0085 and \u001c-\u001f count too).
NON_BLANK_TEXT_PATTERN = f"^[^{_CONTROLS}]*[^\\s\\u0085{_CONTROLS}][^{_CONTROLS}]*$"
# Document text: anything but NUL, not only whitespace.
DOCUMENT_TEXT_PATTERN = "^[^\\u0000]*[^\\s\\u0085\\u001c-\\u001f\\u0000][^\\u0000]*$"


def editor_bounds(upload_max_bytes: int) -> str:
    """The bounds editors work within, in one sentence: the upload form, README and the failure of
    a document over a bound all say exactly this (so nothing fails on a limit nobody stated)."""
    return (
        f"A document may hold up to {MAX_CHARS_PER_DOCUMENT:,} characters of text and be cut into up to "
        f"{MAX_CHUNKS_PER_INGEST:,} chunks; an uploaded file may be up to {describe_bytes(upload_max_bytes)}."
    )


def describe_bytes(n: int) -> str:
    """A byte count as messages show it: ``50 MB``, ``1.5 MB``, ``2,048 bytes`` (MB = 2**20 bytes)."""
    mb = 1024 * 1024
    if n >= mb:
        return f"{n / mb:.0f} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    return f"{n:,} bytes"
