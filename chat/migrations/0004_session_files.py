"""Files attached to a conversation: the link from a session to its private store, and the
hourly expiry schedule (``QUARRY_CHAT_FILES_TTL_DAYS``)."""

import django.db.models.deletion
from django.db import migrations, models

# Keep in sync with chat.files.services.EXPIRE_SCHEDULE_NAME / EXPIRE_TASK; every attachment
# re-creates the schedule should it ever go missing.
EXPIRE_SCHEDULE_NAME = "quarry-expire-chat-files"
EXPIRE_TASK = "chat.tasks.expire_chat_files"


def create_expire_schedule(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.filter(name=EXPIRE_SCHEDULE_NAME).exists():
        Schedule.objects.create(name=EXPIRE_SCHEDULE_NAME, func=EXPIRE_TASK, schedule_type="H", repeats=-1)


def delete_expire_schedule(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(name=EXPIRE_SCHEDULE_NAME).delete()


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0003_tenant_private_store"),
        ("chat", "0003_threads_feedback"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [
        migrations.CreateModel(
            name="SessionFiles",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("session", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="file_store", to="chat.chatsession")),
                ("store", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="+", to="accounts.tenant")),
            ],
        ),
        migrations.RunPython(create_expire_schedule, delete_expire_schedule),
    ]
