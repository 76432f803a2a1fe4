"""The admin's list of files attached to conversations (a proxy of Document: no table of its own)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('knowledge', '0014_embedding_migration'),
    ]

    operations = [
        migrations.CreateModel(
            name='ConversationFile',
            fields=[
            ],
            options={
                'verbose_name': 'conversation file',
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('knowledge.document',),
        ),
    ]
