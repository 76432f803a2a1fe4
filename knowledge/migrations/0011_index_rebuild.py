"""Records of search-index rebuilds, and the schedule that repairs bloated indexes (issue 22)."""

from django.db import migrations, models

# Keep in sync with knowledge.services.index_health (REPAIR_SCHEDULE_NAME, REPAIR_TASK,
# REPAIR_SCHEDULE_MINUTES); the pipeline re-creates the schedule should it go missing.
REPAIR_SCHEDULE_NAME = "knowledge: repair bloated search indexes"
REPAIR_TASK = "knowledge.tasks.repair_indexes"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.filter(name=REPAIR_SCHEDULE_NAME).exists():
        Schedule.objects.create(name=REPAIR_SCHEDULE_NAME, func=REPAIR_TASK, schedule_type="I", minutes=10, repeats=-1)


def delete_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=REPAIR_SCHEDULE_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0010_graph"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="IndexRebuild",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("index_name", models.CharField(max_length=63)),
                ("trigger", models.CharField(max_length=16)),
                ("started_at", models.DateTimeField()),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("seconds", models.FloatField(blank=True, null=True)),
                ("size_before", models.BigIntegerField()),
                ("size_after", models.BigIntegerField(blank=True, null=True)),
                ("live_rows", models.BigIntegerField()),
                ("bloat_before", models.FloatField(blank=True, null=True)),
                ("error", models.TextField(blank=True)),
            ],
            options={
                "ordering": ["-started_at"],
                "indexes": [models.Index(fields=["index_name", "-started_at"], name="indexrebuild_name_started")],
            },
        ),
        migrations.RunPython(create_schedule, delete_schedule),
    ]
