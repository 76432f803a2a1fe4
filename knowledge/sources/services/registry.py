"""Connector kinds from settings, and the one check of a source's configuration."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from knowledge.extraction import SUPPORTED_SUFFIXES
from knowledge.sources.connectors.base import ConfigError, Connector, Context


def kinds() -> list[str]:
    return sorted(settings.QUARRY_SOURCE_CONNECTORS)


def connector_class(kind: str) -> type[Connector]:
    """The connector class registered for ``kind``; ``ConfigError`` (field ``kind``) for an unknown one."""
    path = settings.QUARRY_SOURCE_CONNECTORS.get(kind) if isinstance(kind, str) else None
    if path is None:
        raise ConfigError("kind", f"{str(kind)[:40]!r} is not a kind of source; choose one of {', '.join(kinds())}")
    return import_string(path)


def workdir(source_pk: int) -> Path:
    return Path(settings.QUARRY_SOURCE_WORK_DIR) / str(source_pk)


def context(source_pk: int | None) -> Context:
    folder = workdir(source_pk) if source_pk is not None else Path(settings.QUARRY_SOURCE_WORK_DIR) / "probe"
    return Context(workdir=folder, user_agent=settings.QUARRY_SOURCE_USER_AGENT, max_item_bytes=settings.QUARRY_UPLOAD_MAX_BYTES,
                   default_suffixes=SUPPORTED_SUFFIXES)


def config_check(*, kind: str, config: object, kept_secrets: Mapping[str, str] | None = None,
                 probe: bool = True) -> tuple[dict[str, Any], dict[str, str]]:
    """Split ``config`` into its plain part and its secrets, check both, and (``probe``) reach the source.

    ``kept_secrets``: the secrets stored already (a change may leave them out to keep them).
    Raises ``ConfigError`` naming the field (``kind``, ``config``, ``config.<name>``); nothing is stored.
    """
    cls = connector_class(kind)
    if not isinstance(config, dict):
        raise ConfigError("config", "must be a JSON object")
    plain = dict(config)
    secrets = dict(kept_secrets or {})
    for name in cls.secret_fields:
        if name in plain:
            value = plain.pop(name)
            if value in (None, ""):
                secrets.pop(name, None)
            elif not isinstance(value, str) or len(value) > 4096:
                raise ConfigError(f"config.{name}", "must be a string of at most 4096 characters")
            else:
                secrets[name] = value
    # The kind's own checker sees the secrets' names too, so a secret it does not take is refused by name.
    checked = cls.check_config({**plain, **{n: "" for n in secrets}}, secrets)
    if probe:
        connector = cls(checked, secrets, context(None))
        try:
            connector.probe()
        finally:
            close = getattr(connector, "close", None)
            if close is not None:
                close()
    return checked, secrets
