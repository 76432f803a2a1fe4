"""The product's RAG providers, built from settings and kept once per process.

Three settings name a class by dotted path and its keyword options, the way Django's
``CACHES`` name cache backends (``config/settings.py`` documents their defaults):

- ``QUARRY_RAG_BACKEND``: the backend (the Django-model PostgreSQL backend by default),
- ``QUARRY_EMBEDDER``: the embedder, or None for keyword search only,
- ``QUARRY_CHUNKER``: the chunker,
- ``QUARRY_GRAPH_EXTRACTOR``: the knowledge graph's optional LLM extractor (a completer), or None,
- ``QUARRY_CHUNK_INDEX_HOOK``: what the backend calls inside its write transactions to keep the
  knowledge graph in step with the chunks (``knowledge.rag.hooks.ChunkIndexHook``), or None; built
  per backend (``chunk_index_hook``), since its options include the backend's database alias,
- ``QUARRY_GRAPH_READS``: the knowledge graph's reads that ``RAGService``'s graph methods delegate to
  (``knowledge.rag.hooks.GraphReads``), or None for no graph search,
- ``QUARRY_RERANKER``: the re-ranking stage after fusion (``knowledge.rag.reranking``), or None.

Each is built on first use and shared by every service of the process: the local
model's inference session and the backend's pgvector probe are paid once, not per
request. A change of one of these settings (``setting_changed``, sent by tests'
``settings`` fixture) drops the built instances, so the next call builds anew.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from knowledge.rag.errors import ConfigurationError
from knowledge.rag.hooks import ChunkIndexHook, GraphReads
from knowledge.rag.service import RAGService
from knowledge.rag.types import RAGHit
from knowledge.rag.reranking import ColbertReranker, Reranked, rerank_hits
from knowledge.rag.protocols import Chunker, Embedder, RAGBackend, declared_dimension, embedder_model_id
from knowledge.rag.types import Reader

PROVIDER_SETTINGS = (
    "QUARRY_RAG_BACKEND", "QUARRY_EMBEDDER", "QUARRY_CHUNKER", "QUARRY_GRAPH_EXTRACTOR", "QUARRY_EMBEDDING_MODEL", "LOCAL_EMBEDDERS",
    "QUARRY_CHUNK_INDEX_HOOK", "QUARRY_GRAPH_READS", "QUARRY_RERANKER",
)

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


def _provider_spec(key: str, spec: Mapping[str, Any]) -> Any:
    """A provider built from ``spec`` once per process under ``key`` (dropped with the others)."""
    with _lock:
        if key not in _built:
            _built[key] = build(spec, setting=key)
        return _built[key]


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


def graph_reads() -> GraphReads | None:
    """The process's graph reads (``QUARRY_GRAPH_READS``), or None when graph search is off or Django
    is not configured (the memory backend's plain-Python use keeps no graph anyway)."""
    if not settings.configured:
        return None
    reads = _provider("QUARRY_GRAPH_READS")
    if reads is not None and not isinstance(reads, GraphReads):
        raise ConfigurationError(f"QUARRY_GRAPH_READS: {type(reads).__name__} is not a GraphReads (serves, search, triplets, ...)")
    return reads


def reranker() -> ColbertReranker | None:
    """The process's re-ranker (``QUARRY_RERANKER``), None when the setting is None. Building it does
    not load the model (the first re-ranking does), so a broken model path fails there, reported."""
    return _provider("QUARRY_RERANKER")


def rerank_depth(limit: int) -> int:
    """How many candidates a search that will be re-ranked reads for a page of ``limit``: the re-ranker's
    depth when deeper (then the stage has candidates below the page to promote), within search's bound."""
    try:
        model = reranker()
    except ConfigurationError:
        return limit
    return min(100, max(limit, model.depth)) if model is not None else limit


async def rerank(query: str, hits: Sequence[RAGHit], *, limit: int) -> Reranked:
    """``hits`` (best first, as fusion ordered them) re-ranked by the process's re-ranker and cut to
    ``limit``. Never raises for the model's sake: without a usable model the hits keep their order and
    ``Reranked.reason`` says why (``knowledge.rag.reranking.rerank_hits``)."""
    try:
        model = reranker()
    except ConfigurationError as exc:
        return await rerank_hits(None, query, hits, limit=limit, unavailable=f"QUARRY_RERANKER: {exc}")
    return await rerank_hits(model, query, hits, limit=limit, unavailable="no re-ranker is configured (QUARRY_RERANKER is None)")


def chunk_index_hook(*, using: str, llm_model: str | None = None) -> ChunkIndexHook | None:
    """A new hook of ``QUARRY_CHUNK_INDEX_HOOK`` for a backend on database ``using`` (None: the setting is None).

    Not shared: each backend gets its own, given its alias and the LLM extractor's model (``llm_model``)
    on top of the setting's options. Raises ``ConfigurationError`` for what is not a ``ChunkIndexHook``.
    """
    spec = settings.QUARRY_CHUNK_INDEX_HOOK
    if spec is None:
        return None
    if not isinstance(spec, Mapping):
        raise ConfigurationError(f"QUARRY_CHUNK_INDEX_HOOK must be {{'CLASS': 'dotted.path', 'OPTIONS': {{...}}}} or None, got {spec!r}")
    options = {**dict(spec.get("OPTIONS") or {}), "using": using, **({"llm_model": llm_model} if llm_model else {})}
    hook = build({**spec, "OPTIONS": options}, setting="QUARRY_CHUNK_INDEX_HOOK")
    if not isinstance(hook, ChunkIndexHook):
        raise ConfigurationError(f"QUARRY_CHUNK_INDEX_HOOK: {type(hook).__name__} is not a ChunkIndexHook (prepare, apply, rebuild)")
    return hook


def _model_id(embedder: Embedder | None) -> str | None:
    return None if embedder is None else embedder_model_id(embedder, declared_dimension(embedder))


def embedder_named(name: str) -> Embedder | None:
    """The embedder ``name`` stands for: a value of ``QUARRY_EMBEDDING_MODEL`` ("local", "bge-small",
    the configured provider model, "none") or a model id as chunks store it.

    The configured model is the process's own instance; the other local models are built once
    with their default options. Raises ``ConfigurationError`` naming the choices for anything else
    (a provider model needs its settings: configure it as QUARRY_EMBEDDING_MODEL first).
    """
    wanted = name.strip()
    if wanted.lower() == "none":
        return None
    configured = default_embedder()
    if wanted.lower() == str(settings.QUARRY_EMBEDDING_MODEL).lower() or (configured is not None and wanted == _model_id(configured)):
        return configured
    for key, (path, _dimension) in settings.LOCAL_EMBEDDERS.items():
        if wanted.lower() == key:
            return _provider_spec(f"local:{key}", {"CLASS": path, "OPTIONS": {}})
    for key, (path, _dimension) in settings.LOCAL_EMBEDDERS.items():
        built = _provider_spec(f"local:{key}", {"CLASS": path, "OPTIONS": {}})  # cheap: models load on first use
        if wanted == _model_id(built):
            return built
    choices = ", ".join(dict.fromkeys([*settings.LOCAL_EMBEDDERS, *([settings.QUARRY_EMBEDDING_MODEL] if configured is not None else [])]))
    raise ConfigurationError(
        f"unknown embedding model {name!r}: one of {choices} (a provider model is configured as QUARRY_EMBEDDING_MODEL first)"
    )


def embedder_for_model(model_id: str) -> Embedder | None:
    """The embedder whose vectors carry ``model_id``, or None when this process cannot embed with it
    (a provider model that is no longer configured): then the namespace gets no new vectors and its
    semantic search is off until ``manage.py reembed`` moves it to an available model."""
    try:
        return embedder_named(model_id)
    except ConfigurationError:
        return None


def namespace_model(namespace: str) -> str:
    """The model id the namespace's vectors are in ("" before its first vectors). A synchronous query."""
    from knowledge.models import CorpusStat  # deferred: this module is imported while apps load

    return CorpusStat.objects.filter(tenant__slug=namespace).values_list("embedding_model", flat=True).first() or ""


def tenant_embedder(namespace: str) -> Embedder | None:
    """The embedder of the namespace's model (the configured one for a namespace without vectors).
    Synchronous (it queries the database): async code gets it through ``tenant_service``."""
    model = namespace_model(namespace)
    return embedder_for_model(model) if model else default_embedder()


def tenant_service(
    namespace: str, *, embedder: Embedder | None | Literal["default"] = DEFAULT, reader: Reader | None = None,
) -> RAGService:
    """THE way to get a tenant's RAG service: the configured providers, namespace = the tenant's slug.

    By default it embeds with the tenant's model (``CorpusStat.embedding_model``, resolved once per
    service with the tenant itself, so make one per request: a tenant that ``manage.py reembed`` moved
    gets the new model from the next service on, and an ingest that raced the switch embeds again),
    and a tenant without vectors with the configured one. ``embedder=None`` makes a service that never
    embeds (fetch, delete, keyword search); another embedder is used as given.
    ``reader`` (``reader_of(context)`` for a request): search, fetch and the graph see only what that reader
    may read; None is trusted code's full view (workers, commands, the write door).
    Services are cheap (they hold no connection); the providers behind them are shared.
    Writes through it do not supersede the document pipeline's background work: the
    product writes through ``knowledge.services.documents`` instead.
    """
    follow = embedder == DEFAULT
    chosen = default_embedder() if follow else embedder
    return RAGService(backend(), embedder=chosen, chunker=chunker(), namespace=namespace,
                      fusion=settings.QUARRY_HYBRID_FUSION, fusion_weight=settings.QUARRY_HYBRID_FUSION_WEIGHT,
                      embedder_for_model=embedder_for_model if follow else None, graph_reads=graph_reads(), reader=reader)


def reader_for_principal(*, tenant_id: int, principal: str) -> Reader | None:
    """The reader a stored principal (``TenantContext.principal``: ``user:<id>``, ``cli``, ``anonymous``) is in
    the tenant now, for work that outlives its request (a chat answer, an agent run, an export): read
    anew on every call, so a membership or role change counts from the next one. None: it reads
    everything (the shell, the tenant's admins, superusers); ``Reader.nobody``: a user who is no member of
    the tenant (any more) reads nothing. It knows no API token, so no token's role cap: a request's work
    reads as ``reader_of(its context)`` instead, and this serves only work without a request (commands)."""
    from accounts.models import Group, Membership  # deferred: this module is imported while apps load

    if principal == "cli":
        return None
    if not principal.startswith("user:") or not principal[5:].isdigit():
        return Reader(None)  # anonymous (QUARRY_AUTH_MODE=none): what the whole tenant reads
    user_id = int(principal[5:])
    row = Membership.objects.filter(tenant_id=tenant_id, user_id=user_id).values_list("role", "user__is_superuser").first()
    if row is not None and (row[0] == "admin" or row[1]):
        return None
    if row is None:
        from django.contrib.auth import get_user_model  # deferred: as above

        if get_user_model().objects.filter(pk=user_id, is_superuser=True, is_active=True).exists():
            return None
        # Removed from the tenant (or never in it): what the whole tenant reads is not theirs either.
        return Reader.nobody(user_id)
    groups = Group.objects.filter(tenant_id=tenant_id, members__pk=user_id).values_list("pk", flat=True)
    return Reader(user_id, tuple(groups))


def reader_of(context: Any) -> Reader | None:
    """The reader of a request's tenant context (``accounts.access.TenantContext``, taken by its shape:
    this layer imports no access code): None when it reads everything (tenant admins, the shell),
    else its user and its groups, as the context read them for this request."""
    if context.reads_everything:
        return None
    return Reader(context.user_id, tuple(context.group_ids))


@receiver(setting_changed)
def _forget_providers(*, setting: str, **kwargs: object) -> None:
    if setting in PROVIDER_SETTINGS:
        with _lock:
            _built.clear()
