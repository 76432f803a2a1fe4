"""Throttle counts in PostgreSQL (config.throttling.PostgresCounters), one row per key and window."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0003_tenant_private_store'),
    ]

    operations = [
        migrations.CreateModel(
            name='ThrottleCount',
            fields=[
                ('key', models.CharField(max_length=200, primary_key=True, serialize=False)),
                ('hits', models.PositiveIntegerField()),
                ('window_ends', models.DateTimeField()),
            ],
            options={
                'db_table': 'quarry_throttle',
                'indexes': [models.Index(fields=['window_ends'], name='throttle_window_ends')],
            },
        ),
        # Counts are disposable (a crash forgets at most one window): no WAL for a write per request.
        migrations.RunSQL("ALTER TABLE quarry_throttle SET UNLOGGED", "ALTER TABLE quarry_throttle SET LOGGED"),
    ]
