"""The dispatcher that starts due syncs, every minute."""

from django.db import migrations

# Keep in sync with knowledge.sources.services.syncing.DISPATCH_SCHEDULE_NAME / DISPATCH_TASK; the service
# re-creates the schedule whenever a sync is requested, should it ever go missing.
DISPATCH_SCHEDULE_NAME = "sources: start due syncs"
DISPATCH_TASK = "knowledge.sources.tasks.dispatch_syncs"


def create_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.filter(name=DISPATCH_SCHEDULE_NAME).exists():
        Schedule.objects.create(name=DISPATCH_SCHEDULE_NAME, func=DISPATCH_TASK, schedule_type="I", minutes=1, repeats=-1)


def delete_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=DISPATCH_SCHEDULE_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sources", "0001_initial"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(create_schedule, delete_schedule)]
