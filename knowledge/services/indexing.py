"""The background indexer: postings and HNSW entries for the backlog of large ingestions.

An ingestion of more than ``QUARRY_INDEX_INLINE_MAX_CHUNKS`` chunks stores them
searchable but un-indexed (see ``knowledge.rag.backends.postgres.writes``) and says so
(``Stored.backlog``); its service queues ``knowledge.tasks.index_backlog`` for the tenant
once the write commits (``after_write``). The reclaim
schedule re-queues any tenant whose backlog was left behind (a lost task, a
worker stopped mid-way), so a backlog always drains while workers run. Several
workers may index one tenant at once: each takes chunks the others do not hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.db import transaction
from django.db.models import Exists, OuterRef
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge.models import Chunk
from knowledge.rag.backends.postgres import maintenance
from knowledge.rag.types import Stored
from knowledge.services import graphing
from knowledge.rag.errors import NamespaceNotFound

logger = logging.getLogger(__name__)

INDEX_TASK = "knowledge.tasks.index_backlog"
TASK_GROUP = "knowledge-index"
# One task indexes for about this long, then hands the rest to a fresh task so one big
# backlog does not hold a worker past django-q2's timeout or starve document processing.
TASK_SECONDS = 60.0


def enqueue(namespace: str) -> None:
    """Queue the indexer for ``namespace`` once the current transaction commits."""

    def send() -> None:
        async_task(INDEX_TASK, namespace, group=TASK_GROUP)

    # robust: a broker outage must not fail the ingestion that was just stored; the
    # reclaim schedule finds the backlog and queues it again.
    transaction.on_commit(send, robust=True)


def after_write(*, namespace: str, stored: Stored) -> None:
    """Queue, on commit of the current transaction, the background work a write left (its ``Stored``):
    the indexer for its backlog, the graph's LLM pass for the chunks it extracted. Every service that
    writes chunks calls it with what the write returned; the backend never queues anything itself."""
    if stored.backlog:
        enqueue(namespace)
    if stored.extracted:
        graphing.llm_enqueue(namespace)


def backlog_index(*, namespace: str, seconds: float | None = None, on_progress: Callable[[int], None] | None = None) -> int:
    """Index ``namespace``'s backlog; returns how many chunks this call indexed.

    Works in batches until the backlog is empty or ``seconds`` have passed (None:
    no limit). Stopped by the clock with work left, it queues a task for the rest.
    ``on_progress(done)`` is called after every batch.
    """
    indexer = maintenance.configured()
    if indexer is None:
        return 0  # a backend of the seed's contract alone indexes as it stores
    deadline = None if seconds is None else time.monotonic() + seconds
    done = 0
    while True:
        try:
            batch = maintenance.index_backlog(indexer, namespace)
        except NamespaceNotFound:
            return done  # the tenant was deleted after the task was queued: nothing left to index
        if batch == 0:
            return done  # empty, or what is left is held by another indexer
        if indexer.extract_graph:
            graphing.llm_enqueue(namespace)  # the batch's chunks joined the graph: the LLM pass may have texts
        done += batch
        if on_progress is not None:
            on_progress(done)
        if deadline is not None and time.monotonic() >= deadline:
            if maintenance.backlog(indexer, namespace):
                enqueue(namespace)
            return done


def backlogs_reclaim() -> int:
    """Queue the indexer for every tenant with a backlog; returns how many were queued."""
    with_backlog = Chunk.objects.filter(tenant=OuterRef("pk"), indexed=False)
    slugs = list(Tenant.objects.filter(Exists(with_backlog)).values_list("slug", flat=True))
    for slug in slugs:
        logger.info("indexing backlog of tenant %s re-queued", slug)
        async_task(INDEX_TASK, slug, group=TASK_GROUP)
    return len(slugs)


def backlog_drain(*, namespace: str) -> int:
    """Index all of ``namespace``'s backlog now, with a progress bar on stderr (the commands' final step)."""
    from tqdm import tqdm  # imported here: only the commands show bars

    indexer = maintenance.configured()
    total = maintenance.backlog(indexer, namespace) if indexer is not None else 0
    if not total:
        return 0
    with tqdm(total=total, desc="index", unit="chunk") as bar:
        return backlog_index(namespace=namespace, on_progress=lambda done: bar.update(done - bar.n))
