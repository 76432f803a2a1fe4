from __future__ import annotations

import os
from typing import Any

from django.apps import AppConfig
from django.conf import settings


def worker_lower_priority(sender: object = None, **kwargs: Any) -> int:
    """Lower this process's CPU priority by ``QUARRY_WORKER_NICE``; returns the new niceness.

    Connected to django-q2's ``post_spawn``, which each task worker process sends once when it
    starts: the web process keeps its priority, so a search answered while a worker embeds or
    indexes a large import gets the cores first (the threads onnxruntime starts later inherit
    the value). Niceness only ever goes up here, so a restarted worker cannot exceed the bound
    by much: the kernel caps it at 19.
    """
    increment = int(settings.QUARRY_WORKER_NICE)
    return os.nice(increment) if increment else os.nice(0)


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    verbose_name = "Knowledge base"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        post_spawn.connect(worker_lower_priority, dispatch_uid="quarry: worker priority")
