"""Accent-insensitive, CJK-aware keyword search with a text search language per tenant.

Self-contained (its SQL does not come from application code, which may change later):

- ``quarry_search_text(text)``: runs of Chinese, Japanese and Korean characters become
  overlapping bigrams separated by spaces ("コーヒー豆" -> "コー ーヒ ヒー ー豆"), so PostgreSQL's
  default parser, which only splits on spaces and punctuation, gives words a query can match;
  any other text is returned as it is (one regular-expression test, no copy).
- ``quarry_<language>`` for each Snowball language the server has: a copy of PostgreSQL's
  configuration with the ``unaccent`` dictionary in front of the stemmer for words with non-ASCII
  letters, where the server has the extension (trusted since PostgreSQL 13, so the database owner
  can create it). Without it the copies are plain, and matching stays accent-sensitive.
- ``search_config`` on chunks and on each tenant's statistics row; ``search_vector`` generated
  from them; every tenant starts with ``quarry_english`` (English, as before).
- The BM25 statistics and postings are rebuilt from the new tsvectors (lexemes change: accents
  go, CJK sentences become bigrams).

Rewriting ``search_vector`` rewrites the chunk table under an exclusive lock: searches wait for
the migration (minutes at a few hundred thousand chunks).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models, transaction
import django.contrib.postgres.search
import django.db.models.deletion
import django.db.models.functions.comparison
import knowledge.models

# PostgreSQL 15's Snowball configurations (and later releases'), and "simple".
LANGUAGES = (
    "simple", "arabic", "armenian", "basque", "catalan", "danish", "dutch", "english", "finnish", "french",
    "german", "greek", "hindi", "hungarian", "indonesian", "irish", "italian", "lithuanian", "nepali",
    "norwegian", "portuguese", "romanian", "russian", "serbian", "spanish", "swedish", "tamil", "turkish", "yiddish",
)

# Hiragana, katakana (without the middle dot U+30FB, punctuation), CJK ideographs (extension A,
# unified, compatibility), Hangul syllables and half-width katakana.
CJK = r"\u3040-\u309f\u30a0-\u30fa\u30fc-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f"

SEARCH_TEXT_FUNCTION = rf"""
CREATE OR REPLACE FUNCTION quarry_search_text(t text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $fn$
SELECT CASE WHEN t !~ '[{CJK}]' THEN t ELSE (
    SELECT string_agg(
        CASE WHEN r.g[1] ~ '^[{CJK}]' AND length(r.g[1]) > 1
             THEN (SELECT string_agg(substr(r.g[1], i, 2), ' ' ORDER BY i) FROM generate_series(1, length(r.g[1]) - 1) AS i)
             ELSE r.g[1] END,
        ' ' ORDER BY r.n)
    FROM regexp_matches(t, '[{CJK}]+|[^{CJK}]+', 'g') WITH ORDINALITY AS r(g, n)
) END
$fn$
"""

# The generated column, new and old; the GIN index goes with the column and is made again.
VECTOR_NEW = (
    "to_tsvector(search_config, quarry_search_text(COALESCE(title, '') || ' ' || COALESCE(text, '')))"
)
VECTOR_OLD = "to_tsvector('english'::regconfig, COALESCE(title, '') || ' ' || COALESCE(text, ''))"


def _vector_sql(expression: str) -> list[str]:
    return [
        "ALTER TABLE knowledge_chunk DROP COLUMN search_vector",
        f"ALTER TABLE knowledge_chunk ADD COLUMN search_vector tsvector GENERATED ALWAYS AS ({expression}) STORED",
        "CREATE INDEX chunk_search_vector_gin ON knowledge_chunk USING gin (search_vector)",
    ]


# Statistics and postings from the tsvectors as they now are (k1 0.9, b 0.5 for the postings'
# impact, as the backend writes them). Chunks of the indexing backlog keep no postings: the
# indexer writes them.
REBUILD_STATISTICS = [
    "DELETE FROM knowledge_posting",
    "DELETE FROM knowledge_termstat",
    """
    UPDATE knowledge_corpusstat s SET
        chunk_count = (SELECT count(*) FROM knowledge_chunk c WHERE c.tenant_id = s.tenant_id),
        token_count = (SELECT coalesce(sum(length(c.search_vector)), 0) FROM knowledge_chunk c WHERE c.tenant_id = s.tenant_id)
    """,
    """
    INSERT INTO knowledge_termstat (tenant_id, lexeme, df)
    SELECT c.tenant_id, u.lexeme, count(*)
    FROM knowledge_chunk c CROSS JOIN LATERAL unnest(tsvector_to_array(c.search_vector)) AS u(lexeme)
    GROUP BY c.tenant_id, u.lexeme
    """,
    """
    INSERT INTO knowledge_posting (chunk_id, lexeme, tenant_id, tf, dl, impact)
    SELECT c.id, u.lexeme, c.tenant_id, coalesce(array_length(u.positions, 1), 1), length(c.search_vector),
           coalesce(array_length(u.positions, 1), 1)::float8
           / (coalesce(array_length(u.positions, 1), 1)
              + 0.9 * (0.5 + 0.5 * length(c.search_vector) / greatest(coalesce(s.token_count::float8 / nullif(s.chunk_count, 0), 1), 1)))
    FROM knowledge_chunk c
    LEFT JOIN knowledge_corpusstat s ON s.tenant_id = c.tenant_id
    CROSS JOIN LATERAL unnest(c.search_vector) u
    WHERE c.indexed
    """,
]


def has_unaccent(cursor: Any) -> bool:
    """Install ``unaccent`` if the server offers it and we may; whether it is installed now."""
    cursor.execute("SELECT 1 FROM pg_extension WHERE extname = 'unaccent'")
    if cursor.fetchone():
        return True
    cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'unaccent'")
    if not cursor.fetchone():
        return False
    try:
        with transaction.atomic(using=cursor.db.alias):  # a savepoint: a refusal must not abort the migration
            cursor.execute("CREATE EXTENSION IF NOT EXISTS unaccent")
    except Exception:  # robust: no privilege, a broken package: search stays accent-sensitive
        return False
    return True


def configuration_sql(language: str, name: str, *, unaccent: bool) -> list[str]:
    """Statements creating configuration ``name`` from PostgreSQL's ``language``, with ``unaccent``
    before its dictionary for words containing non-ASCII letters (ASCII words have no accents)."""
    statements = [f"CREATE TEXT SEARCH CONFIGURATION {name} (COPY = pg_catalog.{language})"]
    if unaccent:
        dictionary = "simple" if language == "simple" else f"{language}_stem"
        statements.append(f"ALTER TEXT SEARCH CONFIGURATION {name} ALTER MAPPING FOR word, hword, hword_part WITH unaccent, {dictionary}")
    return statements


def install(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        unaccent = has_unaccent(cursor)
        cursor.execute(SEARCH_TEXT_FUNCTION)
        cursor.execute("SELECT cfgname FROM pg_ts_config WHERE cfgnamespace = 'pg_catalog'::regnamespace")
        available = {row[0] for row in cursor.fetchall()}
        for language in LANGUAGES:
            if language in available:
                for statement in configuration_sql(language, f"quarry_{language}", unaccent=unaccent):
                    cursor.execute(statement)


def uninstall(apps: Any, schema_editor: Any) -> None:
    with schema_editor.connection.cursor() as cursor:
        for language in LANGUAGES:
            cursor.execute(f"DROP TEXT SEARCH CONFIGURATION IF EXISTS quarry_{language}")
        cursor.execute("DROP FUNCTION IF EXISTS quarry_search_text(text)")
        # unaccent stays: other schemas may use it, and it costs nothing.


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_cache_table'),
        ('knowledge', '0012_embedding_cache_phase'),
    ]

    operations = [
        # Undoing: the old tsvectors are back by the time this runs, so the statistics follow them.
        migrations.RunSQL(migrations.RunSQL.noop, REBUILD_STATISTICS),
        migrations.RunPython(install, uninstall),
        migrations.AddField(
            model_name='chunk',
            name='search_config',
            field=knowledge.models.RegConfigField(db_default='quarry_english', default='quarry_english', max_length=63),
        ),
        migrations.AddField(
            model_name='corpusstat',
            name='search_config',
            field=knowledge.models.RegConfigField(db_default='quarry_english', default='quarry_english', max_length=63),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(_vector_sql(VECTOR_NEW), _vector_sql(VECTOR_OLD))],
            state_operations=[
                migrations.AlterField(
                    model_name='chunk',
                    name='search_vector',
                    field=models.GeneratedField(db_persist=True, expression=models.Func(models.F('search_config'), models.Func(models.Func(django.db.models.functions.comparison.Coalesce(models.F('title'), models.Value('')), models.Value(' '), django.db.models.functions.comparison.Coalesce(models.F('text'), models.Value('')), arg_joiner=' || ', output_field=models.TextField(), template='(%(expressions)s)'), function='quarry_search_text', output_field=models.TextField()), function='to_tsvector', output_field=django.contrib.postgres.search.SearchVectorField()), output_field=django.contrib.postgres.search.SearchVectorField()),
                ),
            ],
        ),
        migrations.CreateModel(
            name='SearchLanguage',
            fields=[
                ('tenant', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='accounts.tenant')),
                ('language', models.CharField(choices=[(name, name.capitalize()) for name in LANGUAGES], default='english', max_length=32)),
                ('requested_at', models.DateTimeField(blank=True, null=True)),
                ('applied_at', models.DateTimeField(blank=True, null=True)),
                ('error', models.TextField(blank=True)),
            ],
        ),
        migrations.RunSQL(REBUILD_STATISTICS, migrations.RunSQL.noop),
    ]
