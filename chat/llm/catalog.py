"""The chat model catalog: ``config/models.yaml`` parsed and validated (DESIGN 6).

The catalog names *logical* models (what the product asks for, e.g. ``chat``),
each served by one or more *deployments* (a provider's model, its base URL and
key), plus the Router's retry and timeout policy and fallbacks between logical
models. Callers never see or choose any of it.

Strings may reference the environment as ``${NAME}`` (required) or
``${NAME:-default}`` (optional; an empty result means "unset"). A deployment
whose ``model`` is empty after expansion is left out, so an optional deployment
can be switched on from the environment. No ``.env`` file is read. Every problem raises ``CatalogError`` naming the key, e.g.
``models.chat.deployments[0].api_base: must be an http(s) URL``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The built-in offline provider (chat.llm.offline) and the one model it offers.
OFFLINE_PROVIDER = "quarry"
OFFLINE_MODEL = "offline-extractive"
# The key of litellm's call metadata under which ``stream_chat`` hands the offline model the passages'
# similarities to the question ({passage number: cosine}); metadata stays in this process.
SIMILARITIES = "quarry_passage_similarities"

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_TOP_KEYS = {"default_model", "router", "models"}
_ROUTER_KEYS = {"num_retries", "timeout", "stream_timeout", "allowed_fails", "cooldown_time"}
_MODEL_KEYS = {"deployments", "fallbacks", "routing"}
_DEPLOYMENT_KEYS = {"provider", "model", "api_base", "api_key", "api_version", "temperature", "max_tokens"}
_ROUTING = ("priority", "balanced")


# litellm (and the openai SDK under it) can log whole requests, messages included, at DEBUG;
# prompts must never reach the logs, whatever QUARRY_LOG_LEVEL says.
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "litellm", "openai")


def load_litellm() -> Any:
    """``import litellm`` with its loggers capped at WARNING first (it logs at DEBUG while loading).

    Imported lazily everywhere in chat/: the import takes a second and most
    processes (workers, management commands) never call a chat model.
    """
    for name in _LITELLM_LOGGERS:
        log = logging.getLogger(name)
        if log.level < logging.WARNING:
            log.setLevel(logging.WARNING)
    import litellm

    return litellm


class CatalogError(Exception):
    """The catalog file is missing, malformed or inconsistent; the message names the key."""


@dataclass(frozen=True)
class Deployment:
    """One provider model that can serve a logical model. ``api_key`` never appears in a repr."""

    provider: str
    model: str
    api_base: str | None = None
    api_key: str | None = field(default=None, repr=False)
    api_version: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None

    @property
    def litellm_model(self) -> str:
        return f"{self.provider}/{self.model}"

    @property
    def is_offline(self) -> bool:
        return self.provider == OFFLINE_PROVIDER


@dataclass(frozen=True)
class LogicalModel:
    """A name the product asks for; its deployments in priority order (or balanced), then its fallbacks."""

    name: str
    deployments: tuple[Deployment, ...]
    fallbacks: tuple[str, ...] = ()
    routing: str = "priority"


@dataclass(frozen=True)
class RouterPolicy:
    num_retries: int = 2
    timeout: float = 60.0
    stream_timeout: float = 30.0
    allowed_fails: int = 3
    cooldown_time: float = 30.0


@dataclass(frozen=True)
class Catalog:
    default_model: str
    models: Mapping[str, LogicalModel]
    router: RouterPolicy = RouterPolicy()
    source: str = ""

    def deployment_by_id(self, deployment_id: str) -> tuple[LogicalModel, Deployment] | None:
        """Resolve the ``<model>#<index>`` ids the Router reports back (``_hidden_params["model_id"]``)."""
        name, _, index = deployment_id.rpartition("#")
        model = self.models.get(name)
        if model is None or not index.isdigit() or int(index) >= len(model.deployments):
            return None
        return model, model.deployments[int(index)]


def load_catalog(path: Path, *, environ: Mapping[str, str] | None = None) -> Catalog:
    """Read, expand and validate the catalog at ``path``."""
    env = os.environ if environ is None else environ
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"{path}: cannot read the model catalog ({exc.strerror or exc})") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: not valid YAML: {exc}") from None
    try:
        return parse_catalog(raw, environ=env, source=str(path))
    except CatalogError as exc:
        raise CatalogError(f"{path}: {exc}") from None


def parse_catalog(raw: Any, *, environ: Mapping[str, str], source: str = "") -> Catalog:
    """Validate an already-parsed catalog document (see the module docstring)."""
    top = _mapping(raw, "", _TOP_KEYS, required={"models"})
    models_raw = _mapping(top["models"], "models", None)
    if not models_raw:
        raise CatalogError("models: at least one logical model is required")
    models: dict[str, LogicalModel] = {}
    for name, spec in models_raw.items():
        where = f"models.{name}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise CatalogError(f"{where}: a model name is 1-64 letters, digits, '.', '_' or '-'")
        models[name] = _logical_model(name, spec, where, environ)
    for model in models.values():
        for index, target in enumerate(model.fallbacks):
            if target not in models:
                raise CatalogError(f"models.{model.name}.fallbacks[{index}]: unknown model {target!r}")
            if target == model.name:
                raise CatalogError(f"models.{model.name}.fallbacks[{index}]: a model cannot fall back to itself")
    default = top.get("default_model", next(iter(models)))
    default = _expand(default, "default_model", environ) if isinstance(default, str) else default
    if default not in models:
        raise CatalogError(f"default_model: {default!r} is not one of the models ({', '.join(models)})")
    router = _router_policy(top.get("router") or {}, environ)
    return Catalog(default_model=default, models=models, router=router, source=source)


# --- pieces ------------------------------------------------------------------------


def _key(where: str, key: object) -> str:
    return f"{where}.{key}" if where else str(key)


def _mapping(value: Any, where: str, allowed: set[str] | None, *, required: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """``value`` as a mapping with only ``allowed`` keys (any when None) and every ``required`` one; ``where`` "" is the top."""
    if not isinstance(value, dict):
        raise CatalogError(f"{where or 'the catalog'}: must be a mapping, got {type(value).__name__}")
    if allowed is not None:
        unknown = sorted(str(k) for k in value if k not in allowed)
        if unknown:
            raise CatalogError(f"{_key(where, unknown[0])}: unknown key (allowed: {', '.join(sorted(allowed))})")
    for key in sorted(required):
        if key not in value:
            raise CatalogError(f"{_key(where, key)}: required")
    return value


def _expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise CatalogError(f"{where}: environment variable {name} is not set (use ${{{name}:-}} to make it optional)")

    return _ENV_REF.sub(replace, value)


def _string(spec: Mapping[str, Any], key: str, where: str, environ: Mapping[str, str], *, required: bool = False) -> str | None:
    value = spec.get(key)
    if value is None:
        if required:
            raise CatalogError(f"{where}.{key}: required")
        return None
    if not isinstance(value, str):
        raise CatalogError(f"{where}.{key}: must be a string, got {type(value).__name__}")
    expanded = _expand(value, f"{where}.{key}", environ).strip()
    if not expanded:
        if required:
            raise CatalogError(f"{where}.{key}: must not be empty")
        return None
    return expanded


def _number(value: Any, where: str, environ: Mapping[str, str], *, integer: bool, minimum: float, maximum: float) -> Any:
    if isinstance(value, str):
        text = _expand(value, where, environ).strip()
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise CatalogError(f"{where}: must be {'an integer' if integer else 'a number'}, got {text!r}") from None
    if isinstance(value, bool) or not isinstance(value, int if integer else (int, float)):
        raise CatalogError(f"{where}: must be {'an integer' if integer else 'a number'}, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise CatalogError(f"{where}: must be between {minimum:g} and {maximum:g}, got {value}")
    return value


def _router_policy(spec: Any, environ: Mapping[str, str]) -> RouterPolicy:
    spec = _mapping(spec, "router", _ROUTER_KEYS)
    bounds = {
        "num_retries": (True, 0, 10), "timeout": (False, 1, 3600), "stream_timeout": (False, 1, 3600),
        "allowed_fails": (True, 0, 1000), "cooldown_time": (False, 0, 3600),
    }
    values = {
        key: _number(spec[key], f"router.{key}", environ, integer=integer, minimum=low, maximum=high)
        for key, (integer, low, high) in bounds.items()
        if key in spec
    }
    return RouterPolicy(**values)


def _logical_model(name: str, spec: Any, where: str, environ: Mapping[str, str]) -> LogicalModel:
    spec = _mapping(spec, where, _MODEL_KEYS, required={"deployments"})
    raw_deployments = spec["deployments"]
    if not isinstance(raw_deployments, list) or not raw_deployments:
        raise CatalogError(f"{where}.deployments: must be a non-empty list")
    built = (_deployment(d, f"{where}.deployments[{i}]", environ) for i, d in enumerate(raw_deployments))
    deployments = tuple(d for d in built if d is not None)
    if not deployments:
        raise CatalogError(f"{where}.deployments: every deployment's model is empty; set at least one")
    fallbacks_raw = spec.get("fallbacks") or []
    if not isinstance(fallbacks_raw, list) or not all(isinstance(f, str) for f in fallbacks_raw):
        raise CatalogError(f"{where}.fallbacks: must be a list of model names")
    if len(set(fallbacks_raw)) != len(fallbacks_raw):
        raise CatalogError(f"{where}.fallbacks: names must not repeat")
    routing = spec.get("routing", "priority")
    if routing not in _ROUTING:
        raise CatalogError(f"{where}.routing: must be one of {', '.join(_ROUTING)}, got {routing!r}")
    return LogicalModel(name=name, deployments=deployments, fallbacks=tuple(fallbacks_raw), routing=routing)


def _litellm_providers() -> set[str]:
    """The provider names litellm knows. Asked only for a provider deployment: importing litellm takes
    two seconds, which the default (offline-only) catalog, checked by every ``manage.py`` command, must not pay."""
    return {str(p.value if hasattr(p, "value") else p) for p in load_litellm().provider_list}


def _deployment(spec: Any, where: str, environ: Mapping[str, str]) -> Deployment | None:
    spec = _mapping(spec, where, _DEPLOYMENT_KEYS, required={"model"})
    model = _string(spec, "model", where, environ)
    if model is None:
        return None  # switched off from the environment
    provider = _string(spec, "provider", where, environ)
    provider_key = "provider" if provider is not None else "model"
    if provider is None:
        provider, sep, model = model.partition("/")
        if not sep or not model:
            raise CatalogError(
                f"{where}.model: {provider!r} names no provider; write '<provider>/<model>' "
                "(e.g. openai/gpt-4o-mini) or set provider"
            )
    if provider != OFFLINE_PROVIDER and provider not in _litellm_providers():
        raise CatalogError(f"{where}.{provider_key}: unknown provider {provider!r}")
    if provider == OFFLINE_PROVIDER and model != OFFLINE_MODEL:
        raise CatalogError(f"{where}.model: the offline provider {OFFLINE_PROVIDER!r} offers only {OFFLINE_MODEL!r}, got {model!r}")
    api_base = _string(spec, "api_base", where, environ)
    if api_base is not None and not re.match(r"^https?://[^\s/]+", api_base):
        raise CatalogError(f"{where}.api_base: must be an http(s) URL")
    temperature = spec.get("temperature")
    max_tokens = spec.get("max_tokens")
    return Deployment(
        provider=provider,
        model=model,
        api_base=api_base,
        api_key=_string(spec, "api_key", where, environ),
        api_version=_string(spec, "api_version", where, environ),
        temperature=None if temperature is None else float(
            _number(temperature, f"{where}.temperature", environ, integer=False, minimum=0, maximum=2)
        ),
        max_tokens=None if max_tokens is None else _number(max_tokens, f"{where}.max_tokens", environ, integer=True, minimum=1, maximum=1_000_000),
    )
