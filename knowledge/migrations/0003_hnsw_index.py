"""An HNSW index for the default embedding dimension, where pgvector is installed.

The index is on an expression over the same double precision[] column, so the
data model does not depend on pgvector; the partial predicate keeps vectors of
other dimensions (another embedding model) out of the cast. Other dimensions
get their index from ``manage.py ensure_vector_index --dimension N``.
"""

from __future__ import annotations

from django.db import migrations

DEFAULT_DIMENSION = 384

# Frozen here (0007 changes the predicate): a migration must not follow later code.
CREATE = (
    "CREATE INDEX IF NOT EXISTS chunk_embedding_hnsw_384 ON knowledge_chunk "
    "USING hnsw ((embedding::vector(384)) vector_cosine_ops) WHERE array_length(embedding, 1) = 384"
)


def forwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cursor.fetchone():
            cursor.execute(CREATE)


def backwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw_384")


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_documents_chunks")]
    operations = [migrations.RunPython(forwards, backwards)]
