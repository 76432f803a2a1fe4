"""The chunk key ``(tenant_id, id)`` carries the access list (``INCLUDE (access)``): a reader's access test
on a chunk found by id is answered from the index alone.

The postings path of keyword search (and hybrid's keyword leg, and semantic search's safety net) finds
its candidates by id and tests the reader's access on each (``c.access && <principals>``). Through the
primary key every test was a fetch of the chunk's heap row, a random read of a wide row (text, vector)
in a table far larger than the cache at 100,000 chunks; with the list in the key the test is an
index-only scan (``Heap Fetches: 0`` once vacuum has marked the pages visible). The key of migration
0020 gains the column rather than a second b-tree beside it: no write pays for one more index (measured
on 100,000 chunks: see the README, issue 34's section).

Built ``CONCURRENTLY`` (writes go on during the build; hence a non-atomic migration), then swapped for
the constraint's index in one ``ALTER TABLE`` (instant). A build interrupted leaves an invalid index of
the new name, which the next run drops first; a run interrupted after the swap repeats it harmlessly.
"""

from __future__ import annotations

from django.db import migrations, models

_NEW = "chunk_tenant_id_access"


def _swap(include: str) -> list[str]:
    """Statements (each on its own: CONCURRENTLY refuses a transaction block) that give the chunk key
    constraint an index of ``(tenant_id, id)`` with ``include`` (SQL, may be empty)."""
    return [
        f"DROP INDEX CONCURRENTLY IF EXISTS {_NEW}",
        f"CREATE UNIQUE INDEX CONCURRENTLY {_NEW} ON knowledge_chunk (tenant_id, id){include}",
        # One statement, so the key never lapses; the constraint takes the index and renames it to its own name.
        "ALTER TABLE knowledge_chunk DROP CONSTRAINT IF EXISTS chunk_tenant_id_unique, "
        f"ADD CONSTRAINT chunk_tenant_id_unique UNIQUE USING INDEX {_NEW}",
    ]


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("knowledge", "0020_tenant_keys"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(model_name="chunk", name="chunk_tenant_id_unique"),
                migrations.AddConstraint(
                    model_name="chunk",
                    constraint=models.UniqueConstraint(fields=("tenant", "id"), include=("access",), name="chunk_tenant_id_unique"),
                ),
            ],
            database_operations=[
                migrations.RunSQL(_swap(" INCLUDE (access)"), _swap("")),
            ],
        ),
    ]
