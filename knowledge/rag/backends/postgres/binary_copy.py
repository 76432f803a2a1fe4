"""Binary COPY of chunk rows (and of vectors to cache): the fast path for storing many, vectors packed by NumPy.

Formatting 384 floats as text took ~0.15 ms a chunk (and psycopg's generic list dumper ~0.7 ms),
most of the client's ingest time; PostgreSQL's binary array format is a header and the values.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from psycopg.adapt import Dumper
from psycopg.pq import Format

from knowledge.rag.types import PreparedDocument

if TYPE_CHECKING:
    import numpy as np

# knowledge_chunk's columns as copy_chunks sends them; binary COPY needs each exact type.
_COLUMNS = ("tenant_id, document_id, chunk_id, ordinal, text, title, uri, metadata, start_char, end_char, "
            "content_hash, embedding, embedding_model, indexed, search_config, access")
_COPY_TYPES = ["int8", "int8", "text", "int4", "text", "text", "text", "jsonb", "int4", "int4", "text", "float8[]", "text", "bool", "oid",
               "varchar[]"]
_FLOAT8_OID = 701
_FLOAT8_ARRAY_OID = 1022


@cache
def _binary_float8() -> np.dtype[Any]:
    """One element of a binary float8[]: its byte length and its big-endian value. NumPy is imported
    on the first write, not with the backend: every process imports the backend (the admin does), and
    starting a command must load no numerical library (tests/test_startup.py)."""
    import numpy as np

    return np.dtype([("length", ">i4"), ("value", ">f8")])


class _PackedVector(bytes):
    """A one-dimensional float8[] already in PostgreSQL's binary array format."""


class _PackedVectorDumper(Dumper):
    format = Format.BINARY
    oid = _FLOAT8_ARRAY_OID

    def dump(self, obj: _PackedVector) -> bytes:
        return obj


def pack_vector(values: Sequence[float]) -> _PackedVector:
    """``values`` as float8[] in binary: a header (1 dimension, no NULLs, float8, length, lower
    bound 1), then every element as its byte length (8) and its big-endian IEEE double."""
    import numpy as np

    body = np.empty(len(values), dtype=_binary_float8())
    body["length"] = 8
    body["value"] = values
    return _PackedVector(struct.pack("!iiIii", 1, 0, _FLOAT8_OID, len(values), 1) + body.tobytes())


def copy_chunks(
    cursor: Any, tenant_id: int, documents: Sequence[PreparedDocument], doc_pks: dict[str, int], *, indexed: bool, config: int,
    access: dict[str, list[str]],
) -> None:
    """Insert the documents' chunks (their rows ``doc_pks`` by external id); ``config`` is the OID of
    their text search configuration (regconfig's binary form); ``access``: each document's access list,
    which its chunks copy."""
    raw = cursor.cursor  # the psycopg cursor under Django's wrapper
    raw.adapters.register_dumper(_PackedVector, _PackedVectorDumper)
    with raw.copy(f"COPY knowledge_chunk ({_COLUMNS}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(_COPY_TYPES)
        for prepared in documents:
            doc = prepared.document
            doc_pk, title, uri, metadata = doc_pks[doc.id], doc.title or "", doc.uri or "", dict(doc.metadata)
            readers = access[doc.id]
            for c in prepared.chunks:
                copy.write_row((
                    tenant_id, doc_pk, c.chunk_id, c.ordinal, c.text, title, uri, metadata, c.start_char, c.end_char,
                    c.content_hash, None if c.embedding is None else pack_vector(c.embedding), c.embedding_model or "", indexed,
                    config, readers,
                ))


def copy_vectors(cursor: Any, table: str, rows: Sequence[tuple[str, Sequence[float]]]) -> None:
    """Insert ``(content_hash, embedding)`` rows into ``table`` (columns of those names: text, float8[])."""
    raw = cursor.cursor
    raw.adapters.register_dumper(_PackedVector, _PackedVectorDumper)
    with raw.copy(f"COPY {table} (content_hash, embedding) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(["text", "float8[]"])
        for digest, vector in rows:
            copy.write_row((digest, pack_vector(vector)))
