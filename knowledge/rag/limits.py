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
CHUNK_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/@+=-]{0,199}:[0-9]{1,6}$")
NAMESPACE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
FIELD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def describe_bytes(n: int) -> str:
    """A byte count as messages show it: ``50 MB``, ``1.5 MB``, ``2,048 bytes`` (MB = 2**20 bytes)."""
    mb = 1024 * 1024
    if n >= mb:
        return f"{n / mb:.0f} MB" if n % mb == 0 else f"{n / mb:.1f} MB"
    return f"{n:,} bytes"
