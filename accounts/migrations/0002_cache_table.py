"""The shared cache's table (settings.CACHES["default"] without Redis): throttling counters."""

from __future__ import annotations

from django.core.management import call_command
from django.db import migrations


def create_cache_tables(apps, schema_editor) -> None:  # type: ignore[no-untyped-def]
    # Creates the tables of every database cache in settings.CACHES, skipping existing ones.
    call_command("createcachetable", database=schema_editor.connection.alias, verbosity=0)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]

    operations = [migrations.RunPython(create_cache_tables, migrations.RunPython.noop)]
