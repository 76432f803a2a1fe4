"""Private stores: a tenant that holds one conversation's attached files, and a chunk quota."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0002_cache_table'),
    ]

    operations = [
        migrations.AddField(
            model_name='tenant',
            name='chunk_quota',
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='tenant',
            name='chunk_quota_name',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='tenant',
            name='private_to',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='private_stores', to='accounts.tenant'),
        ),
    ]
