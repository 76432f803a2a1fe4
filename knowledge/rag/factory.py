"""The product's RAG providers, built from settings and kept once per process.

Three settings name a class by dotted path and its keyword options, the way Django's
``CACHES`` name cache backends (``config/settings.py`` documents their defaults):

- ``QUARRY_RAG_BACKEND``: the backend (the Django-model PostgreSQL backend by default),
- ``QUARRY_EMBEDDER``: the embedder, or None for keyword search only,
- ``QUARRY_CHUNKER``: the chunker,
- ``QUARRY_GRAPH_EXTRACTOR``: the knowledge graph's optional LLM extractor (a completer), or None.

Each is built on first use and shared by every service of the process: the local
model's inference session and the backend's pgvector probe are paid once, not per
request. A change of one of these settings (``setting_changed``, sent by tests'
``settings`` fixture) drops the built instances, so the next call builds anew.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Literal

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from knowledge.rag.errors import ConfigurationError
from knowledge.rag.service import RAGService
from knowledge.rag.types import Chunker, Embedder, RAGBackend

PROVIDER_SETTINGS = ("QUARRY_RAG_BACKEND", "QUARRY_EMBEDDER", "QUARRY_CHUNKER", "QUARRY_GRAPH_EXTRACTOR")

_built: dict[str, Any] = {}
_lock = threading.Lock()

DEFAULT: Literal["default"] = "default"


def build(spec: Mapping[str, Any] | None, *, setting: str = "provider") -> Any:
    """``CLASS(**OPTIONS)`` of a ``{"CLASS": "dotted.path", "OPTIONS": {...}}`` spec; None stays None.

    Raises ``ConfigurationError`` naming ``setting`` for a malformed spec or a class that cannot be imported.
    """
    if spec is None:
        return None
    if not isinstance(spec, Mapping) or not isinstance(spec.get("CLASS"), str):
        raise ConfigurationError(f"{setting} must be {{'CLASS': 'dotted.path', 'OPTIONS': {{...}}}} or None, got {spec!r}")
    unknown = sorted(set(spec) - {"CLASS", "OPTIONS"})
    if unknown:
        raise ConfigurationError(f"{setting} has unknown keys {unknown}; it takes CLASS and OPTIONS")
    try:
        cls = import_string(spec["CLASS"])
    except ImportError as exc:
        raise ConfigurationError(f"{setting}: cannot import {spec['CLASS']!r}: {exc}") from None
    return cls(**dict(spec.get("OPTIONS") or {}))


def _provider(name: str) -> Any:
    with _lock:
        if name not in _built:
            _built[name] = build(getattr(settings, name), setting=name)
        return _built[name]


def backend() -> RAGBackend:
    """The process's backend (``QUARRY_RAG_BACKEND``)."""
    return _provider("QUARRY_RAG_BACKEND")


def default_embedder() -> Embedder | None:
    """The process's embedder (``QUARRY_EMBEDDER``), or None when embeddings are off."""
    return _provider("QUARRY_EMBEDDER")


def chunker() -> Chunker:
    """The process's chunker (``QUARRY_CHUNKER``)."""
    return _provider("QUARRY_CHUNKER")


def graph_extractor() -> Any:
    """The process's LLM graph extractor (``QUARRY_GRAPH_EXTRACTOR``, a ``knowledge.graph.llm.Completer``), or None when off."""
    return _provider("QUARRY_GRAPH_EXTRACTOR")


def tenant_service(namespace: str, *, embedder: Embedder | None | Literal["default"] = DEFAULT) -> RAGService:
    """THE way to get a tenant's RAG service: the configured providers, namespace = the tenant's slug.

    ``embedder=None`` makes a service that never embeds (fetch, delete, keyword search).
    Services are cheap (they hold no connection); the providers behind them are shared.
    Writes through it do not supersede the document pipeline's background work: the
    product writes through ``knowledge.services.documents`` instead.
    """
    chosen = default_embedder() if embedder == DEFAULT else embedder
    return RAGService(backend(), embedder=chosen, chunker=chunker(), namespace=namespace,
                      fusion=settings.QUARRY_HYBRID_FUSION, fusion_weight=settings.QUARRY_HYBRID_FUSION_WEIGHT)


@receiver(setting_changed)
def _forget_providers(*, setting: str, **kwargs: object) -> None:
    if setting in PROVIDER_SETTINGS:
        with _lock:
            _built.clear()
