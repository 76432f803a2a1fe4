"""Typed readers for settings that come from the environment.

Every helper fails loudly: a value that is present but malformed raises
``ImproperlyConfigured`` naming the variable, instead of silently falling back
to a default (cf. healthchecks ``hc/settings.py``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str | None = None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """Return the variable's value, or ``default`` when it is unset."""
    env = os.environ if environ is None else environ
    value = env.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool, *, environ: Mapping[str, str] | None = None) -> bool:
    """Parse ``1/0, true/false, yes/no, on/off`` (case-insensitive)."""
    raw = env_str(name, None, environ=environ)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false, yes/no, on/off), got {raw!r}")


def env_int(
    name: str,
    default: int,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Parse a base-10 integer, optionally bounded (inclusive)."""
    raw = env_str(name, None, environ=environ)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def env_float(
    name: str,
    default: float,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    environ: Mapping[str, str] | None = None,
) -> float:
    """Parse a finite decimal number, optionally bounded (inclusive)."""
    raw = env_str(name, None, environ=environ)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ImproperlyConfigured(f"{name} must be at most {maximum}, got {value}")
    return value


def env_list(name: str, default: list[str], *, environ: Mapping[str, str] | None = None) -> list[str]:
    """Parse a comma-separated list; blanks are dropped."""
    raw = env_str(name, None, environ=environ)
    if raw is None:
        return list(default)
    return [item.strip() for item in raw.split(",") if item.strip()]


def env_choice(name: str, default: str, choices: tuple[str, ...], *, environ: Mapping[str, str] | None = None) -> str:
    """Return one of ``choices``; anything else is an error naming the allowed values."""
    raw = env_str(name, None, environ=environ)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in choices:
        raise ImproperlyConfigured(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return value


_RATE = re.compile(r"^([0-9]+)/(s|sec|second|m|min|minute|h|hour|d|day)$")


def env_rate(name: str, default: str | None, *, environ: Mapping[str, str] | None = None) -> str | None:
    """A request rate as DRF throttles read it, ``<count>/<s|min|hour|day>`` (e.g. ``120/min``); ``off`` is None."""
    raw = env_str(name, None, environ=environ)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("off", "none", "0", ""):
        return None
    match = _RATE.match(value)
    if not match or int(match.group(1)) < 1:
        raise ImproperlyConfigured(f"{name} must be a rate such as 120/min (count per s, min, hour or day) or off, got {raw!r}")
    return value
