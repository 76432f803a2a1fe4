from __future__ import annotations

from django.apps import AppConfig


class SourcesConfig(AppConfig):
    name = "knowledge.sources"
    label = "sources"  # its tables and migrations keep the short name
    verbose_name = "Sources"
    default_auto_field = "django.db.models.BigAutoField"
