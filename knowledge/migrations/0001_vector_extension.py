"""Enable pgvector where the server has it; stock PostgreSQL without it stays supported.

CREATE EXTENSION needs the privilege to do so; where it is missing (a managed
server, a restricted role), Quarry runs on exact SQL search instead.
"""

from __future__ import annotations

from django.db import migrations


def create_vector_extension(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            return
        cursor.execute("SAVEPOINT quarry_vector")
        try:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception:  # insufficient privilege: carry on without pgvector
            cursor.execute("ROLLBACK TO SAVEPOINT quarry_vector")
        else:
            cursor.execute("RELEASE SAVEPOINT quarry_vector")


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(create_vector_extension, migrations.RunPython.noop, elidable=False)]
