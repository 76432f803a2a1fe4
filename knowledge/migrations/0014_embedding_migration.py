"""Each tenant's embedding model, and the background moves between models (``manage.py reembed``).

``CorpusStat.embedding_model`` records the model of the vectors a tenant holds. Tenants that
already hold vectors get the model of their chunks (the most common one, should an earlier
configuration change have left several), so that a new default model (QUARRY_EMBEDDING_MODEL)
never takes an installed tenant's semantic search away: it applies to tenants without vectors.
"""

from django.db import migrations, models
import django.db.models.deletion


PIN_EXISTING = """
UPDATE knowledge_corpusstat s SET embedding_model = m.model
FROM (
    SELECT DISTINCT ON (tenant_id) tenant_id, embedding_model AS model
    FROM knowledge_chunk WHERE embedding_model <> '' AND embedding IS NOT NULL
    GROUP BY tenant_id, embedding_model ORDER BY tenant_id, count(*) DESC
) m
WHERE s.tenant_id = m.tenant_id
"""


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_cache_table"),
        ("knowledge", "0013_text_search_languages"),
    ]

    operations = [
        migrations.AddField(
            model_name="corpusstat",
            name="embedding_model",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.RunSQL(PIN_EXISTING, migrations.RunSQL.noop),
        migrations.CreateModel(
            name="EmbeddingMigration",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("source_model", models.CharField(blank=True, max_length=200)),
                ("target_model", models.CharField(max_length=200)),
                ("target_name", models.CharField(max_length=200)),
                ("status", models.CharField(choices=[("running", "Running"), ("done", "Done"), ("failed", "Failed"), ("cancelled", "Cancelled")], default="running", max_length=16)),
                ("done", models.BigIntegerField(default=0)),
                ("total", models.BigIntegerField(default=0)),
                ("position", models.BigIntegerField(default=0)),
                ("requested_by", models.CharField(blank=True, max_length=200)),
                ("error", models.TextField(blank=True)),
                ("started_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.tenant")),
            ],
            options={
                "ordering": ["-started_at"],
                "verbose_name": "embedding model move",
                "constraints": [models.UniqueConstraint(condition=models.Q(("status", "running")), fields=("tenant",), name="embedding_migration_one_running")],
            },
        ),
    ]
