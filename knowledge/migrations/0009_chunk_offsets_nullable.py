"""Chunk offsets become optional: NULL for a chunk that is not a verbatim slice of its document.

The seed's chunker contract allows any non-empty texts (a chunker may normalize or
summarize), and its ``replace`` hands a backend chunks without a document. Dropping
NOT NULL changes only the catalog: no table rewrite, no scan.
"""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0008_chunk_autovacuum")]

    operations = [
        migrations.AlterField(model_name="chunk", name="start_char", field=models.PositiveIntegerField(blank=True, null=True)),
        migrations.AlterField(model_name="chunk", name="end_char", field=models.PositiveIntegerField(blank=True, null=True)),
    ]
