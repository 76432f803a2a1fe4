"""Keys that hold the tenant, the cheap first step towards distributing tenant data by tenant (Citus).

A distributed table's primary and unique keys must contain its distribution column (README,
"Beyond one database"). Documents and chunks gain ``UNIQUE (tenant_id, id)``: the key they keep
when distributed, and what tenant-qualified references to them will point at. On one PostgreSQL it
changes no query; it costs one b-tree per table (measured on 1,000,000 chunks: see the README).

Built ``CONCURRENTLY`` and then attached as the constraint (``USING INDEX``, instant), so writes go
on during the build; hence a non-atomic migration. A build interrupted leaves an invalid index of
the same name, which the next run drops first.

The tenant foreign keys of documents and term statistics lose their own single-column index:
``(tenant_id, external_id)`` and ``(tenant_id, lexeme)`` lead with the tenant and serve the same
lookups (a tenant's deletion, its rows). Only the index goes; the foreign key constraint stays as it
is (Django's own ``AlterField`` would drop and re-validate it, a scan of the table).
"""

from __future__ import annotations

import django.db.models.deletion
from django.db import migrations, models


def _unique_concurrently(table: str, name: str) -> tuple[list[str], list[str]]:
    """Statements (each on its own: CONCURRENTLY refuses a transaction block) and their reverse."""
    return (
        [
            f"DROP INDEX CONCURRENTLY IF EXISTS {name}",
            f"CREATE UNIQUE INDEX CONCURRENTLY {name} ON {table} (tenant_id, id)",
            f"ALTER TABLE {table} ADD CONSTRAINT {name} UNIQUE USING INDEX {name}",
        ],
        [f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}"],
    )


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("accounts", "0005_api_token_name"),
        ("knowledge", "0019_chunk_restricted"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="document",
                    name="tenant",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="documents",
                                            to="accounts.tenant"),
                ),
                migrations.AlterField(
                    model_name="termstat",
                    name="tenant",
                    field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                            to="accounts.tenant"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS knowledge_document_tenant_id_6c2d18c7",
                    "CREATE INDEX IF NOT EXISTS knowledge_document_tenant_id_6c2d18c7 ON knowledge_document (tenant_id)",
                ),
                migrations.RunSQL(
                    "DROP INDEX IF EXISTS knowledge_termstat_tenant_id_81111aeb",
                    "CREATE INDEX IF NOT EXISTS knowledge_termstat_tenant_id_81111aeb ON knowledge_termstat (tenant_id)",
                ),
            ],
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddConstraint(
                    model_name="chunk",
                    constraint=models.UniqueConstraint(fields=("tenant", "id"), name="chunk_tenant_id_unique"),
                ),
                migrations.AddConstraint(
                    model_name="document",
                    constraint=models.UniqueConstraint(fields=("tenant", "id"), name="document_tenant_id_unique"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(*_unique_concurrently("knowledge_chunk", "chunk_tenant_id_unique")),
                migrations.RunSQL(*_unique_concurrently("knowledge_document", "document_tenant_id_unique")),
            ],
        ),
    ]
