"""System checks: a broken model catalog stops ``manage.py`` commands (migrate, check) with its key named."""

from __future__ import annotations

from typing import Any

from django.core.checks import CheckMessage, Error, register


@register()
def model_catalog_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    # Imported here: only commands that run checks read the catalog. Reading it never imports litellm for the
    # default (offline) catalog, so every manage.py command stays quick (issue 31).
    from chat.llm.catalog import CatalogError, load_catalog
    from chat.llm.router import catalog_path

    try:
        load_catalog(catalog_path())
    except CatalogError as exc:
        return [Error(str(exc), hint="Fix config/models.yaml or QUARRY_MODEL_CONFIG_PATH.", id="chat.E001")]
    return []
