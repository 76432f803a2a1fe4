"""Where pgvector is installed, a chunk's vector is a ``halfvec``, and so is its HNSW index's.

Before: ``embedding double precision[]`` (3,096 bytes at 384 dimensions, inline) plus an HNSW index
over ``embedding::vector(d)`` (about 2,048 bytes an entry): 5,144 bytes a chunk for its vector. After:
``embedding_half halfvec`` (776 bytes at 384) plus an HNSW index over ``embedding_half::halfvec(d)``
(about 1,170 bytes an entry): about 1,950, with recall@10 within 0.006 of the float4 index's. The
README's issue 35 section has the layouts measured, and why the smaller index over the sign bits
(about 1,130 a chunk) was not chosen: at a million chunks it needed five times the time for the same recall.

Every writer keeps writing the float8[] ``embedding`` (the binary COPY of ingestion, the re-embedding
switch, the ORM): a ``BEFORE INSERT OR UPDATE`` trigger moves a written array into ``embedding_half``
and leaves ``embedding`` NULL. So there is one write path for both server kinds, and a server without
pgvector (where none of this runs) keeps the array column and its exact search unchanged. Writing
NULL into ``embedding`` keeps the chunk's vector (an ORM ``save()`` of a loaded chunk writes the NULL
it read back); nothing in Quarry clears a vector, chunks are replaced whole.

The column has no typmod: chunks of several dimensions (two embedding models during a move) coexist,
each dimension with its own partial index (``vector_dims(embedding_half) = d``), under the name the
index had (``chunk_embedding_hnsw_<d>``: index health, maintenance and the benches find it by name).

Not atomic: existing vectors move in batches of ``BATCH`` rows, each committed on its own, so a large
table is not rewritten in one transaction and writes go on meanwhile (the trigger, installed first,
takes care of rows written during the backfill). Every step can run again: an interrupted run resumes.
Reversible: the vectors go back to the array column (rounded to half precision, as they are stored).
"""

from __future__ import annotations

import re
import time

from django.db import migrations

_HNSW_NAME = re.compile(r"^chunk_embedding_hnsw_(\d+)$")
BATCH = 5000

# Frozen here: a migration must not follow later code (knowledge.rag.backends.postgres.sql builds the same).
_FUNCTION = """
CREATE OR REPLACE FUNCTION quarry_chunk_vector_half() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Writers write the float8[]; where pgvector is installed the vector is kept as a halfvec (migration 0022).
    IF NEW.embedding IS NOT NULL THEN
        NEW.embedding_half := NEW.embedding::halfvec;
        NEW.embedding := NULL;
    END IF;
    RETURN NEW;
END
$$
"""
_TRIGGER = (
    "CREATE OR REPLACE TRIGGER chunk_vector_half BEFORE INSERT OR UPDATE ON knowledge_chunk "
    "FOR EACH ROW EXECUTE FUNCTION quarry_chunk_vector_half()"
)


def _half_index(d: int) -> str:
    return (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS chunk_embedding_hnsw_{d} ON knowledge_chunk "
        f"USING hnsw ((embedding_half::halfvec({d})) halfvec_cosine_ops) "
        f"WHERE indexed AND vector_dims(embedding_half) = {d}"
    )


def _array_index(d: int) -> str:
    return (
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS chunk_embedding_hnsw_{d} ON knowledge_chunk "
        f"USING hnsw ((embedding::vector({d})) vector_cosine_ops) WHERE indexed AND array_length(embedding, 1) = {d}"
    )


def _has_pgvector(cursor) -> bool:  # type: ignore[no-untyped-def]
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
    return cursor.fetchone() is not None


def _hnsw_indexes(cursor) -> dict[int, tuple[str, bool]]:  # type: ignore[no-untyped-def]
    """Each HNSW index's dimension: (its definition, whether it is valid)."""
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(x.indexrelid), x.indisvalid FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = 'knowledge_chunk'::regclass AND i.relname LIKE 'chunk_embedding_hnsw_%%'"
    )
    return {int(m.group(1)): (definition, valid) for name, definition, valid in cursor.fetchall() if (m := _HNSW_NAME.match(name))}


def _move_in_batches(cursor, statement: str) -> int:  # type: ignore[no-untyped-def]
    """Run ``statement`` (an UPDATE of at most ``%s`` rows) until it changes none; returns the rows changed."""
    moved = 0
    while True:
        cursor.execute(statement, [BATCH])
        if cursor.rowcount <= 0:
            return moved
        moved += cursor.rowcount


def forwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        if not _has_pgvector(cursor):
            return  # the float8[] column and exact search in plain SQL stay as they are
        started = time.monotonic()
        cursor.execute("ALTER TABLE knowledge_chunk ADD COLUMN IF NOT EXISTS embedding_half halfvec")
        # As the array's (0007): kept inline, never compressed (half floats do not compress either).
        cursor.execute("ALTER TABLE knowledge_chunk ALTER COLUMN embedding_half SET STORAGE MAIN")
        cursor.execute(_FUNCTION)
        cursor.execute(_TRIGGER)  # from here on, every write lands in embedding_half
        indexes = _hnsw_indexes(cursor)
        # The old indexes go first: they would otherwise be maintained for every row the backfill rewrites.
        for d, (definition, valid) in indexes.items():
            if "halfvec_cosine_ops" not in definition or not valid:
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS chunk_embedding_hnsw_{d}")
        moved = _move_in_batches(
            cursor,
            "UPDATE knowledge_chunk SET embedding_half = embedding::halfvec, embedding = NULL "
            "WHERE id IN (SELECT id FROM knowledge_chunk WHERE embedding IS NOT NULL LIMIT %s)",
        )
        for d in indexes:
            cursor.execute(_half_index(d))
        if moved:
            print(f"\n  moved {moved} vectors to halfvec in {time.monotonic() - started:.1f} s", end="")  # noqa: T201


def backwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        if not _has_pgvector(cursor):
            return
        cursor.execute("DROP TRIGGER IF EXISTS chunk_vector_half ON knowledge_chunk")
        cursor.execute("DROP FUNCTION IF EXISTS quarry_chunk_vector_half()")
        indexes = _hnsw_indexes(cursor)
        for d in indexes:
            cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS chunk_embedding_hnsw_{d}")
        cursor.execute(
            "SELECT 1 FROM pg_attribute WHERE attrelid = 'knowledge_chunk'::regclass AND attname = 'embedding_half' AND NOT attisdropped"
        )
        if cursor.fetchone() is not None:
            _move_in_batches(
                cursor,
                "UPDATE knowledge_chunk SET embedding = embedding_half::real[]::float8[], embedding_half = NULL "
                "WHERE id IN (SELECT id FROM knowledge_chunk WHERE embedding_half IS NOT NULL LIMIT %s)",
            )
            cursor.execute("ALTER TABLE knowledge_chunk DROP COLUMN embedding_half")
        for d in indexes:
            cursor.execute(_array_index(d))


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("knowledge", "0021_chunk_key_covers_access")]
    operations = [migrations.RunPython(forwards, backwards)]
