"""django-q2 schedules that must exist exactly once, whoever asks first."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django_q.models import Schedule


def schedule_ensure(name: str, func: str, **schedule: Any) -> None:
    """Create the ``Schedule`` called ``name`` running ``func`` unless it exists; race-free.

    ``schedule``: the other ``Schedule`` fields (``schedule_type``, ``minutes``, ``repeats``...).
    Migrations create the product's schedules first; this puts one back should it be deleted
    (by an operator, or a test flushing the tables), and is cheap to call whenever work is queued:
    one indexed read when the schedule is there.
    """
    if Schedule.objects.filter(name=name).exists():
        return
    with transaction.atomic(), connection.cursor() as cursor:
        # Schedule.name is not unique: serialize creators so there is exactly one.
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [name])
        if not Schedule.objects.filter(name=name).exists():
            Schedule.objects.create(name=name, func=func, **schedule)
