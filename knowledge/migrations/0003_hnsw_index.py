"""An HNSW index for the default embedding dimension, where pgvector is installed.

The index is on an expression over the same double precision[] column, so the
data model does not depend on pgvector; the partial predicate keeps vectors of
other dimensions (another embedding model) out of the cast. Other dimensions
get their index from ``manage.py ensure_vector_index --dimension N``.
"""

from __future__ import annotations

from django.db import migrations

from knowledge.rag.backends.postgres_sql import create_hnsw_index_sql, drop_hnsw_index_sql

DEFAULT_DIMENSION = 384


def forwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'")
        if cursor.fetchone():
            cursor.execute(create_hnsw_index_sql(DEFAULT_DIMENSION))


def backwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(drop_hnsw_index_sql(DEFAULT_DIMENSION))


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0002_documents_chunks")]
    operations = [migrations.RunPython(forwards, backwards)]
