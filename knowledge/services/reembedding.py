"""Moving a tenant's vectors to another embedding model without downtime (``manage.py reembed``).

``reembed_start`` records the move (an ``EmbeddingMigration``) and queues
``knowledge.tasks.reembed``. The task embeds the tenant's chunks with the new model in pk order
and stages the vectors in ``EmbeddingCache`` (by content hash), recording how far it got, for about
a minute at a time; then it queues itself again. Searches and ingests keep using the old model
meanwhile, so semantic search stays complete. Once every chunk is staged,
``maintenance.reembed_switch`` (``knowledge.rag.backends.postgres``) swaps all the vectors in one transaction (embedding the few chunks
that landed in the meantime) and the tenant's queries use the new model from the next search on.

A stopped worker loses at most a batch: the reclaim schedule re-queues a move whose heartbeat
(``updated_at``) is older than ``STALE_SECONDS``, and the new run continues after ``position``,
re-using every staged vector. A cancelled move drops what it staged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta

from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge.models import CorpusStat, EmbeddingMigration, EmbeddingMigrationStatus
from knowledge.rag import factory
from knowledge.rag.backends.postgres import PostgresBackend, maintenance
from knowledge.rag.errors import ConfigurationError, NamespaceNotFound
from knowledge.rag.protocols import Embedder, declared_dimension, embedder_model_id

logger = logging.getLogger(__name__)

REEMBED_TASK = "knowledge.tasks.reembed"
TASK_GROUP = "knowledge-reembed"
TASK_SECONDS = 60.0  # one task's share; then it hands the rest to a fresh task
STALE_SECONDS = 180  # a running move silent this long lost its worker: the reclaim re-queues it


class ReembedError(ValueError):
    """A move that cannot start (unknown model, already on it, one already running); the message says which."""


def reembed_backend() -> PostgresBackend:
    """The configured backend, which must be able to move a tenant's vectors (``ReembedError`` otherwise)."""
    configured = maintenance.configured()
    if configured is None:
        raise ReembedError(f"{type(factory.backend()).__name__} cannot move a tenant to another embedding model")
    return configured


def _embedder(name: str) -> Embedder:
    try:
        embedder = factory.embedder_named(name)
    except ConfigurationError as exc:
        raise ReembedError(str(exc)) from None
    if embedder is None:
        raise ReembedError("the target model is 'none': to stop embedding, set QUARRY_EMBEDDING_MODEL=none instead")
    return embedder


def _model_id(embedder: Embedder) -> str:
    model_id = embedder_model_id(embedder, declared_dimension(embedder))
    if model_id is None:
        raise ReembedError(f"{embedder!r} declares neither a model id nor a dimension; give it a model_id")
    return model_id


def tenant_model(tenant: Tenant) -> str:
    """The model id of the tenant's vectors ("" when it holds none yet)."""
    return CorpusStat.objects.filter(tenant=tenant).values_list("embedding_model", flat=True).first() or ""


def running(tenant: Tenant) -> EmbeddingMigration | None:
    """The tenant's move in progress, if any."""
    return EmbeddingMigration.objects.filter(tenant=tenant, status=EmbeddingMigrationStatus.RUNNING).first()


def enqueue(migration_pk: int) -> None:
    """Queue the task of a move once the current transaction commits (robust: the reclaim re-queues it)."""
    transaction.on_commit(lambda: async_task(REEMBED_TASK, migration_pk, group=TASK_GROUP), robust=True)


def reembed_start(*, tenant: Tenant, model: str, actor: str = "", queue: bool = True) -> EmbeddingMigration:
    """Start moving ``tenant`` to the embedding model ``model`` (a QUARRY_EMBEDDING_MODEL value such as
    "bge-small", or a model id). Raises ``ReembedError`` when the model is unknown, the tenant is
    already on it, or a move of the tenant runs. ``queue=False`` leaves the work to the caller
    (``reembed_run``), as ``manage.py reembed --wait`` does."""
    backend = reembed_backend()
    target = _model_id(_embedder(model))
    source = tenant_model(tenant)
    if source == target:
        raise ReembedError(f"tenant {tenant.slug} is already on {target}")
    current = running(tenant)
    if current is not None:
        raise ReembedError(
            f"tenant {tenant.slug} is already moving to {current.target_model} ({current.done} of {current.total} chunks); "
            "cancel it first (manage.py reembed --tenant SLUG --cancel)"
        )
    try:
        with transaction.atomic():
            migration = EmbeddingMigration.objects.create(
                tenant=tenant, source_model=source, target_model=target, target_name=model.strip(),
                total=maintenance.chunk_count(backend, tenant.slug), requested_by=actor[:200],
            )
            if queue:
                enqueue(migration.pk)
    except IntegrityError:  # another request started one between the check and the insert
        raise ReembedError(f"tenant {tenant.slug} is already moving to another model") from None
    logger.info("tenant %s: moving %s chunks from %s to %s", tenant.slug, migration.total, source or "no vectors", target)
    return migration


def reembed_cancel(*, tenant: Tenant) -> EmbeddingMigration | None:
    """Stop the tenant's running move and drop the vectors it staged; returns it (None: none ran).
    A task of it still running stops at its next batch."""
    migration = running(tenant)
    if migration is None:
        return None
    updated = EmbeddingMigration.objects.filter(pk=migration.pk, status=EmbeddingMigrationStatus.RUNNING).update(
        status=EmbeddingMigrationStatus.CANCELLED, finished_at=timezone.now(),
    )
    if updated:
        maintenance.reembed_discard(reembed_backend(), tenant.slug, migration.target_model)
    migration.refresh_from_db()
    return migration


def document_embedding(embedder: Embedder) -> Callable[[list[str]], list[list[float]]]:
    """``embedder``'s document vectors as a synchronous call (the move runs in a worker), checked one per text."""

    def embed(texts: list[str]) -> list[list[float]]:
        vectors = async_to_sync(embedder.embed)(texts, kind="document")
        if len(vectors) != len(texts):
            raise ReembedError(f"{embedder!r} returned {len(vectors)} vectors for {len(texts)} texts")
        return [list(map(float, v)) for v in vectors]

    return embed


def reembed_run(migration_pk: int, *, seconds: float | None = TASK_SECONDS,
                on_progress: Callable[[EmbeddingMigration], None] | None = None) -> str:
    """Work on a move for up to ``seconds`` (None: to the end); returns its status afterwards.

    Stages the new vectors batch by batch, then switches the tenant. Stopped by the clock with work
    left, it queues a task for the rest. A failure is recorded on the move (``error``, status
    failed) and what was staged stays for a new move to the same model.
    """
    migration = EmbeddingMigration.objects.select_related("tenant").filter(pk=migration_pk).first()
    if migration is None or migration.status != EmbeddingMigrationStatus.RUNNING:
        return "gone" if migration is None else migration.status
    namespace = migration.tenant.slug
    deadline = None if seconds is None else time.monotonic() + seconds
    try:
        backend = reembed_backend()
        embedder = _embedder(migration.target_name or migration.target_model)
        if _model_id(embedder) != migration.target_model:
            raise ReembedError(f"{migration.target_name} is now {_model_id(embedder)}, not {migration.target_model}: start again")
        embed = document_embedding(embedder)
        position = migration.position
        batch = settings.QUARRY_REEMBED_BATCH
        while pending := maintenance.reembed_pending(backend, namespace, migration.target_model, after=position, limit=batch):
            texts = {digest: text for _, digest, text in pending}
            maintenance.reembed_stage(backend, namespace, migration.target_model, dict(zip(texts, embed(list(texts.values())), strict=True)))
            position = pending[-1][0]
            left = maintenance.chunk_count(backend, namespace, after=position)
            total = max(migration.total, migration.done + len(pending) + left)
            alive = EmbeddingMigration.objects.filter(pk=migration.pk, status=EmbeddingMigrationStatus.RUNNING).update(
                position=position, done=total - left, total=total, updated_at=timezone.now(),
            )
            if not alive:
                return EmbeddingMigration.objects.get(pk=migration.pk).status  # cancelled meanwhile
            migration.refresh_from_db()
            if on_progress is not None:
                on_progress(migration)
            if deadline is not None and time.monotonic() >= deadline:
                enqueue(migration.pk)
                return migration.status
        # The new dimension's ANN index exists before any vector of it is switched in (both local
        # models are 384-dimensional and share one; a provider model may not).
        dimension = declared_dimension(embedder) or len(embed(["dimension probe"])[0])
        maintenance.ensure_vector_index(backend, dimension)
        with transaction.atomic():
            # Held to the commit: a cancel arriving now waits, then finds the move done.
            if not EmbeddingMigration.objects.select_for_update().filter(pk=migration.pk, status=EmbeddingMigrationStatus.RUNNING).exists():
                return EmbeddingMigration.objects.get(pk=migration.pk).status
            changed = maintenance.reembed_switch(backend, namespace, migration.target_model, embed, batch=batch)
            total = maintenance.chunk_count(backend, namespace)
            EmbeddingMigration.objects.filter(pk=migration.pk).update(
                status=EmbeddingMigrationStatus.DONE, done=total, total=total, finished_at=timezone.now(), error="",
            )
    except NamespaceNotFound:
        EmbeddingMigration.objects.filter(pk=migration.pk).update(status=EmbeddingMigrationStatus.CANCELLED, finished_at=timezone.now())
        return EmbeddingMigrationStatus.CANCELLED
    except Exception as exc:
        logger.exception("moving tenant %s to %s failed", namespace, migration.target_model)
        EmbeddingMigration.objects.filter(pk=migration.pk, status=EmbeddingMigrationStatus.RUNNING).update(
            status=EmbeddingMigrationStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000], finished_at=timezone.now(),
        )
        return EmbeddingMigrationStatus.FAILED
    logger.info("tenant %s now searches with %s (%s vectors switched)", namespace, migration.target_model, changed)
    migration.refresh_from_db()
    if on_progress is not None:
        on_progress(migration)
    return migration.status


def reembeds_reclaim() -> int:
    """Re-queue every running move whose worker went silent (see ``STALE_SECONDS``); returns how many."""
    stale = list(
        EmbeddingMigration.objects.filter(
            status=EmbeddingMigrationStatus.RUNNING, updated_at__lt=timezone.now() - timedelta(seconds=STALE_SECONDS),
        ).values_list("pk", flat=True)
    )
    for pk in stale:
        EmbeddingMigration.objects.filter(pk=pk).update(updated_at=timezone.now())  # one re-queue per silence
        logger.warning("embedding model move %s re-queued (its worker went silent)", pk)
        async_task(REEMBED_TASK, pk, group=TASK_GROUP)
    return len(stale)
