"""Tenant data's keys hold the tenant (migration knowledge/0020; README, "Beyond one database"), and the
tenant foreign keys they cover keep no index of their own. The same migration on PostgreSQL 15 without
pgvector is tests/test_startup.py's."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def _keys(table: str) -> dict[str, list[str]]:
    """Primary and unique constraints of ``table``: name -> columns in key order."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT con.conname, array_agg(att.attname ORDER BY k.ord)
            FROM pg_constraint con
            CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
            JOIN pg_attribute att ON att.attrelid = con.conrelid AND att.attnum = k.attnum
            WHERE con.conrelid = %s::regclass AND con.contype IN ('p', 'u')
            GROUP BY con.conname
            """,
            [table],
        )
        return dict(cursor.fetchall())


def _indexes(table: str) -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s", [table])
        return dict(cursor.fetchall())


def test_documents_and_chunks_have_a_key_that_leads_with_the_tenant() -> None:
    assert _keys("knowledge_chunk")["chunk_tenant_id_unique"] == ["tenant_id", "id"]
    assert _keys("knowledge_document")["document_tenant_id_unique"] == ["tenant_id", "id"]


def test_tenant_foreign_keys_covered_by_a_tenant_key_have_no_index_of_their_own() -> None:
    for table in ("knowledge_document", "knowledge_termstat"):
        single = [name for name, definition in _indexes(table).items() if definition.endswith("(tenant_id)")]
        assert single == [], f"{table} keeps a single-column tenant index: {single}"


def test_a_tenants_documents_are_still_found_through_an_index() -> None:
    """A tenant's deletion (and every per-tenant read) reaches its rows through a key that leads with the tenant."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # an empty test table: ask whether an index *can* serve it
        cursor.execute("EXPLAIN SELECT id FROM knowledge_document WHERE tenant_id = 1")
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("EXPLAIN SELECT id FROM knowledge_termstat WHERE tenant_id = 1")
        plan += "\n" + "\n".join(row[0] for row in cursor.fetchall())
    assert "Seq Scan" not in plan, plan


def test_a_readers_access_test_on_a_chunk_found_by_id_needs_no_heap_row() -> None:
    """The postings path tests a reader's access on chunks it found by id (issue 34): the chunk key carries
    the access list (knowledge/0021), so the test is an index-only scan, not a fetch of the wide row."""
    assert _keys("knowledge_chunk")["chunk_tenant_id_unique"] == ["tenant_id", "id"]  # INCLUDE adds no key column
    with connection.cursor() as cursor:
        # An empty test table: forbid the other ways in, to ask whether an index-only scan *can* serve it. Not
        # enable_indexscan: it turns index-only scans off too, and then every path was disabled and the cheapest
        # won, a seq scan whenever earlier tests had left the table analyzed as empty. ANALYZE fixes that state.
        cursor.execute("ANALYZE knowledge_chunk")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        cursor.execute("EXPLAIN SELECT c.id FROM knowledge_chunk c WHERE c.tenant_id = 1 AND c.id = 2 "
                       "AND c.access && '{*,u:3}'::varchar[]")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Only Scan using chunk_tenant_id_unique" in plan, plan
