"""The background pipeline's fields on Document, and the reclaim schedule.

Every new column has a database default: the RAG backend inserts document rows
with raw SQL that lists only the older columns.
"""

from django.db import migrations, models

# Keep in sync with knowledge.services.state.RECLAIM_SCHEDULE_NAME / RECLAIM_TASK; the
# pipeline re-creates the schedule whenever it queues work, should it ever go missing.
RECLAIM_SCHEDULE_NAME = "knowledge: reclaim stalled documents"
RECLAIM_TASK = "knowledge.tasks.reclaim_documents"


def create_reclaim_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.filter(name=RECLAIM_SCHEDULE_NAME).exists():
        Schedule.objects.create(name=RECLAIM_SCHEDULE_NAME, func=RECLAIM_TASK, schedule_type="I", minutes=1, repeats=-1)


def delete_reclaim_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=RECLAIM_SCHEDULE_NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0004_postings"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="source_text",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.AddField(
            model_name="document",
            name="source_content_type",
            field=models.CharField(blank=True, db_default="", default="", max_length=255),
        ),
        migrations.AddField(
            model_name="document",
            name="source_size",
            field=models.PositiveBigIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="document",
            name="requested_by",
            field=models.CharField(blank=True, db_default="", default="", max_length=200),
        ),
        migrations.AddField(
            model_name="document",
            name="generation",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="document",
            name="lease_id",
            field=models.CharField(blank=True, db_default="", default="", max_length=32),
        ),
        migrations.AddField(
            model_name="document",
            name="lease_expires_at",
            field=models.DateTimeField(blank=True, db_default=None, db_index=True, default=None, null=True),
        ),
        migrations.AddField(
            model_name="document",
            name="attempts",
            field=models.PositiveSmallIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="document",
            name="cancel_requested",
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name="document",
            name="queued_at",
            field=models.DateTimeField(blank=True, db_default=None, default=None, null=True),
        ),
        migrations.AddField(
            model_name="document",
            name="started_at",
            field=models.DateTimeField(blank=True, db_default=None, default=None, null=True),
        ),
        migrations.AddField(
            model_name="document",
            name="finished_at",
            field=models.DateTimeField(blank=True, db_default=None, default=None, null=True),
        ),
        migrations.RunPython(create_reclaim_schedule, delete_reclaim_schedule),
    ]
