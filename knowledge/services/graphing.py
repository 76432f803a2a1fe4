"""The knowledge graph's jobs: rebuilding a tenant's graph, and the optional LLM extraction pass.

Extraction itself runs inside the chunk transactions (``knowledge.graph.store``, called by the
PostgreSQL backend, which reports it in ``Stored.extracted``); what lives here works on a whole tenant:

- ``graph_rebuild``: recompute a tenant's graph from its indexed chunks (``manage.py rebuild_graph``).
- ``llm_extract_pending``: when ``QUARRY_GRAPH_LLM_MODEL`` names a catalog model, send each chunk
  text that has no cached answer to it (outside any transaction), store the answers, and
  re-extract the chunks with those texts so their triples join the graph. Bounded per tenant
  by ``QUARRY_GRAPH_LLM_TOKEN_BUDGET`` tokens a calendar month. Queued on commit of every
  transaction that extracted chunks (``llm_enqueue``, called by the services that wrote them:
  ``indexing.after_write``, ``indexing.backlog_index``, ``graph_rebuild``).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from collections.abc import Callable


from asgiref.sync import async_to_sync
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge.graph.llm import LlmSpec, extract_triples
from knowledge.graph.store import GraphWriter
from knowledge.models import GraphTokenUsage
from knowledge.rag import factory
from knowledge.rag.backends.postgres import maintenance
from knowledge.rag.errors import NamespaceNotFound

logger = logging.getLogger(__name__)

LLM_TASK = "knowledge.tasks.extract_graph_llm"
TASK_GROUP = "knowledge-graph"
LLM_BATCH = 16  # chunk texts per round: one short transaction writes their answers
TASK_SECONDS = 60.0


def graph_rebuild(*, namespace: str, on_progress: Callable[[int, int], None] | None = None) -> int:
    """Recompute ``namespace``'s graph from its indexed chunks (one transaction); returns the chunks read."""
    backend = maintenance.configured()
    if backend is None:
        raise TypeError(f"the configured backend {type(factory.backend()).__name__} keeps no knowledge graph")
    count = maintenance.rebuild_graph(backend, namespace, on_progress=on_progress)
    if count:
        llm_enqueue(namespace)
    return count


def llm_enqueue(namespace: str) -> None:
    """Queue the LLM pass for ``namespace`` once the current transaction commits (nothing when it is off)."""
    if factory.graph_extractor() is None:
        return

    def send() -> None:
        async_task(LLM_TASK, namespace, group=TASK_GROUP)

    # robust: a broker outage must not fail the ingestion; the next ingestion queues the pass again.
    transaction.on_commit(send, robust=True)


def _month() -> dt.date:
    return timezone.now().date().replace(day=1)


def llm_budget_left(*, tenant: Tenant) -> int:
    """Tokens the tenant may still spend on LLM extraction this month."""
    used = GraphTokenUsage.objects.filter(tenant=tenant, month=_month()).values_list("tokens", flat=True).first() or 0
    return max(0, settings.QUARRY_GRAPH_LLM_TOKEN_BUDGET - int(used))


def llm_extract_pending(*, namespace: str, seconds: float | None = None) -> int:
    """Run the LLM pass over ``namespace``'s chunk texts without an answer; returns how many texts were answered.

    Stops when none are left, when the month's budget is spent, after ``seconds`` (then it
    queues itself again), or at the first model failure (the next ingestion retries).
    """
    completer = factory.graph_extractor()
    if completer is None:
        return 0
    tenant = Tenant.objects.filter(slug=namespace).first()
    if tenant is None:
        return 0
    spec = LlmSpec(completer.model_id)
    deadline = None if seconds is None else time.monotonic() + seconds
    done = 0
    while True:
        if llm_budget_left(tenant=tenant) <= 0:
            logger.info("graph LLM extraction of tenant %s stopped: this month's token budget is spent", namespace)
            return done
        pending = _pending(tenant.pk, spec)
        if not pending:
            return done
        answers: list[tuple[str, list[list[str]], int]] = []
        for digest, text in pending:
            try:
                triples, tokens = async_to_sync(extract_triples)(completer, text)
            except Exception as exc:  # noqa: BLE001 - a provider failure ends the pass, never the worker
                logger.warning("graph LLM extraction of tenant %s stopped: %s", namespace, type(exc).__name__)
                _store(tenant.pk, spec, answers)
                return done + len(answers)
            answers.append((digest, triples, tokens))
        _store(tenant.pk, spec, answers)
        done += len(answers)
        if deadline is not None and time.monotonic() >= deadline:
            async_task(LLM_TASK, namespace, group=TASK_GROUP)
            return done


def _pending(tenant_id: int, spec: LlmSpec) -> list[tuple[str, str]]:
    """Up to ``LLM_BATCH`` indexed chunk texts (content hash, text) with no cached answer."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT DISTINCT ON (c.content_hash) c.content_hash, c.text FROM knowledge_chunk c
            WHERE c.tenant_id = %s AND c.indexed AND NOT EXISTS (
                SELECT 1 FROM knowledge_graphextraction x WHERE x.tenant_id = c.tenant_id
                AND x.content_hash = c.content_hash AND x.model = %s AND x.prompt_version = %s)
            ORDER BY c.content_hash LIMIT %s
            """,
            [tenant_id, spec.model, spec.prompt_version, LLM_BATCH],
        )
        return list(cursor.fetchall())


def _store(tenant_id: int, spec: LlmSpec, answers: list[tuple[str, list[list[str]], int]]) -> None:
    """Cache the answers, meter their tokens, and re-extract the chunks with those texts, in one transaction."""
    if not answers:
        return
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_graphextraction (tenant_id, content_hash, model, prompt_version, triples, tokens, created_at) "
            "SELECT %s, x.h, %s, %s, x.t::jsonb, x.n, now() FROM unnest(%s::text[], %s::text[], %s::int[]) AS x(h, t, n) "
            "ON CONFLICT DO NOTHING",
            [tenant_id, spec.model, spec.prompt_version, [a[0] for a in answers],
             [json.dumps(a[1], ensure_ascii=False) for a in answers], [a[2] for a in answers]],
        )
        cursor.execute(
            "INSERT INTO knowledge_graphtokenusage (tenant_id, month, tokens) VALUES (%s, %s, %s) "
            "ON CONFLICT (tenant_id, month) DO UPDATE SET tokens = knowledge_graphtokenusage.tokens + EXCLUDED.tokens",
            [tenant_id, _month(), sum(a[2] for a in answers)],
        )
        graph = GraphWriter(cursor, tenant_id, llm=spec)
        # Read under the graph lock: a chunk replaced meanwhile is either gone or has its graph removed after us.
        cursor.execute(
            "SELECT id FROM knowledge_chunk WHERE tenant_id = %s AND indexed AND content_hash = ANY(%s) ORDER BY id",
            [tenant_id, [a[0] for a in answers]],
        )
        chunks = [row[0] for row in cursor.fetchall()]
        graph.remove(chunks)
        graph.index(chunks)
        graph.finish()


def llm_task(namespace: str) -> int:
    """The task body: one minute of the LLM pass."""
    try:
        return llm_extract_pending(namespace=namespace, seconds=TASK_SECONDS)
    except NamespaceNotFound:
        return 0
