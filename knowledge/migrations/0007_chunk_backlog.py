"""The indexing backlog: ``Chunk.indexed`` and the indexes that depend on it; cheaper chunk rows.

Chunks stored before this migration already have their postings and HNSW
entries, so they are added as indexed (True, a constant default: no table
rewrite); the column's default then becomes False for new rows. Every HNSW
index (0003's and any ``ensure_vector_index`` made) is rebuilt with the new
predicate, which leaves the backlog out of it.
"""

from __future__ import annotations

import re

from django.db import migrations, models

_HNSW_NAME = re.compile(r"^chunk_embedding_hnsw_(\d+)$")


def _hnsw_dimensions(cursor) -> list[int]:  # type: ignore[no-untyped-def]
    cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'knowledge_chunk' AND indexname LIKE 'chunk_embedding_hnsw_%'")
    return [int(m.group(1)) for (name,) in cursor.fetchall() if (m := _HNSW_NAME.match(name))]


def _rebuild(schema_editor, predicate: str) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        for d in _hnsw_dimensions(cursor):
            cursor.execute(f"DROP INDEX chunk_embedding_hnsw_{d}")
            cursor.execute(
                f"CREATE INDEX chunk_embedding_hnsw_{d} ON knowledge_chunk "
                f"USING hnsw ((embedding::vector({d})) vector_cosine_ops) WHERE {predicate}array_length(embedding, 1) = {d}"
            )


def forwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    _rebuild(schema_editor, "indexed AND ")


def backwards(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    _rebuild(schema_editor, "")


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0001_initial"),
        ("knowledge", "0006_chunk_tenant_index"),
    ]

    operations = [
        migrations.AddField(model_name="chunk", name="indexed", field=models.BooleanField(db_default=True, default=False)),
        migrations.AlterField(model_name="chunk", name="indexed", field=models.BooleanField(db_default=False, default=False)),
        migrations.AddIndex(
            model_name="chunk",
            index=models.Index(condition=models.Q(("indexed", False)), fields=["tenant", "id"], name="chunk_backlog"),
        ),
        migrations.RunPython(forwards, backwards),
        # The document_id index (the foreign key's) serves replacement and deletion alone;
        # one b-tree less to maintain per stored chunk.
        migrations.RemoveIndex(model_name="chunk", name="chunk_tenant_document"),
        # Keep a chunk's row whole up to a page (8160 bytes) instead of moving its vector
        # (3 KB at 384 dimensions) to the TOAST table past 2 KB: a stored chunk then costs one
        # heap tuple instead of three tuples and an index entry, and reading a vector needs no
        # second lookup. The vector is never compressed inline (STORAGE MAIN: floats do not
        # compress) and still moves out of line when a row cannot fit a page.
        migrations.RunSQL(
            "ALTER TABLE knowledge_chunk SET (toast_tuple_target = 8160), ALTER COLUMN embedding SET STORAGE MAIN",
            "ALTER TABLE knowledge_chunk RESET (toast_tuple_target), ALTER COLUMN embedding SET STORAGE EXTENDED",
        ),
    ]
