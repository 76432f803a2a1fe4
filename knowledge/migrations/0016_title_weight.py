"""Keyword search counts a title occurrence three times (BM25F over title and text), with k1 1.2 and b 0.75.

- ``search_vector`` becomes ``setweight(title's tsvector, 'A') || text's tsvector``: the same
  lexemes and positions as before (so the same document frequencies and lengths), each title
  occurrence now marked with weight A. Rewriting the generated column rewrites the chunk table
  under an exclusive lock and rebuilds its GIN index, as migration 0013 did.
- The postings are written again: their term frequency counts a title occurrence three times,
  and their impact order is BM25's with the new k1 and b.

Self-contained: the numbers are written out here, not read from application code that may change.
"""

from __future__ import annotations

import django.contrib.postgres.search
import django.db.models.functions.comparison
from django.db import migrations, models

VECTOR_NEW = (
    "(setweight(to_tsvector(search_config, quarry_search_text(COALESCE(title, ''))), 'A') "
    "|| to_tsvector(search_config, quarry_search_text(COALESCE(text, ''))))"
)
VECTOR_OLD = "to_tsvector(search_config, quarry_search_text(COALESCE(title, '') || ' ' || COALESCE(text, '')))"


def _vector_sql(expression: str) -> list[str]:
    return [
        "ALTER TABLE knowledge_chunk DROP COLUMN search_vector",
        f"ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({expression}) STORED",
        "CREATE INDEX chunk_search_vector_gin ON knowledge_chunk USING gin (search_vector)",
    ]


def _postings_sql(tf: str, k1: float, b: float) -> list[str]:
    return [
        "DELETE FROM knowledge_posting",
        f"""
        INSERT INTO knowledge_posting (chunk_id, lexeme, tenant_id, tf, dl, impact)
        SELECT c.id, u.lexeme, c.tenant_id, x.tf, length(c.search_vector),
               x.tf::float8 / (x.tf + {k1} * (1 - {b} + {b} * length(c.search_vector)
                               / greatest(coalesce(s.token_count::float8 / nullif(s.chunk_count, 0), 1), 1)))
        FROM knowledge_chunk c
        LEFT JOIN knowledge_corpusstat s ON s.tenant_id = c.tenant_id
        CROSS JOIN LATERAL unnest(c.search_vector) u
        CROSS JOIN LATERAL (SELECT {tf} AS tf) x
        WHERE c.indexed
        """,
    ]


TF_NEW = "coalesce(array_length(u.positions, 1), 1) + 2 * coalesce(cardinality(array_positions(u.weights, 'A')), 0)"
TF_OLD = "coalesce(array_length(u.positions, 1), 1)"


def _field(text: str) -> models.Func:
    return models.Func(
        models.F('search_config'),
        models.Func(
            models.Func(django.db.models.functions.comparison.Coalesce(models.F(text), models.Value('')), arg_joiner=' || ',
                        output_field=models.TextField(), template='(%(expressions)s)'),
            function='quarry_search_text', output_field=models.TextField(),
        ),
        function='to_tsvector', output_field=django.contrib.postgres.search.SearchVectorField(),
    )


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0015_conversation_file'),
    ]

    operations = [
        # Undoing: the old tsvectors are back by the time this runs, so the postings follow them.
        migrations.RunSQL(migrations.RunSQL.noop, _postings_sql(TF_OLD, 1.5, 0.5)),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(_vector_sql(VECTOR_NEW), _vector_sql(VECTOR_OLD))],
            state_operations=[
                migrations.AlterField(
                    model_name='chunk',
                    name='search_vector',
                    field=models.GeneratedField(
                        db_persist=True,
                        expression=models.Func(
                            models.Func(_field('title'), models.Value('A'), function='setweight',
                                        output_field=django.contrib.postgres.search.SearchVectorField()),
                            _field('text'),
                            arg_joiner=' || ', output_field=django.contrib.postgres.search.SearchVectorField(),
                            template='(%(expressions)s)',
                        ),
                        output_field=django.contrib.postgres.search.SearchVectorField(),
                    ),
                ),
            ],
        ),
        migrations.RunSQL(_postings_sql(TF_NEW, 1.2, 0.75), migrations.RunSQL.noop),
    ]
