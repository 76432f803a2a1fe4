"""A tenant's text search language, and the background re-index that applies it.

An admin sets the language (``search_language_set``); the index keeps its current one until
``knowledge.tasks.apply_search_language`` has re-tokenized every chunk of the tenant, rebuilt its
statistics and postings and switched its queries, all in one transaction
(``maintenance.apply_search_language`` of ``knowledge.rag.backends.postgres``). Searches meanwhile see the old index, complete, and
after the commit the new one: there is no moment where they see part of each. The reclaim
schedule re-queues a tenant whose request was not applied (a lost task, a stopped worker), and
running the task twice does nothing the second time.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone
from django_q.tasks import async_task

from accounts.models import Tenant
from knowledge.models import DEFAULT_SEARCH_LANGUAGE, SEARCH_LANGUAGES, CorpusStat, SearchLanguage, search_config_name
from knowledge.rag.backends.postgres import maintenance
from knowledge.rag.errors import NamespaceNotFound

logger = logging.getLogger(__name__)

APPLY_TASK = "knowledge.tasks.apply_search_language"
TASK_GROUP = "knowledge-search-language"


@dataclass(frozen=True)
class LanguageState:
    """What a tenant asked for and what its index uses now (``reindexing`` while they differ)."""

    requested: str
    active: str
    error: str

    @property
    def reindexing(self) -> bool:
        return self.requested != self.active


def _active_language(tenant: Tenant) -> str | None:
    """The language of the tenant's index now (None before its first document: that one starts
    in the requested language)."""
    config = CorpusStat.objects.filter(tenant=tenant).values_list("search_config", flat=True).first()
    if config is None:
        return None
    return str(config).rsplit(".", 1)[-1].removeprefix("quarry_")  # regconfig prints schema-qualified off the search path


def search_language_state(*, tenant: Tenant) -> LanguageState:
    """The tenant's requested and active text search languages."""
    row = SearchLanguage.objects.filter(tenant=tenant).first()
    requested = row.language if row else DEFAULT_SEARCH_LANGUAGE
    return LanguageState(requested=requested, active=_active_language(tenant) or requested, error=row.error if row else "")


def enqueue(namespace: str) -> None:
    """Queue the re-index of ``namespace`` once the current transaction commits."""

    def send() -> None:
        async_task(APPLY_TASK, namespace, group=TASK_GROUP)

    # robust: a broker outage must not fail the request; the reclaim schedule queues it again.
    transaction.on_commit(send, robust=True)


@transaction.atomic
def search_language_set(*, tenant: Tenant, language: str) -> SearchLanguage:
    """Ask for ``language`` (one of ``SEARCH_LANGUAGES``) as the tenant's text search language.

    Returns the request row. The re-index runs in the background once this commits; asking for
    the language the index already uses queues nothing.
    """
    if language not in SEARCH_LANGUAGES:
        raise ValueError(f"unknown text search language {language!r}; one of {', '.join(SEARCH_LANGUAGES)}")
    row, _ = SearchLanguage.objects.select_for_update().get_or_create(tenant=tenant)
    row.language = language
    row.requested_at = timezone.now()
    row.error = ""
    row.save(update_fields=["language", "requested_at", "error"])
    if search_language_state(tenant=tenant).reindexing:
        enqueue(tenant.slug)
    return row


def search_language_apply(*, namespace: str) -> bool:
    """Re-index ``namespace`` in the language it asked for, if its index uses another; returns
    whether it did. The outcome is recorded on the request row (``applied_at`` or ``error``)."""
    backend = maintenance.configured()
    tenant = Tenant.objects.filter(slug=namespace).first()
    if backend is None or tenant is None:
        return False  # a backend without languages, or a tenant deleted since the task was queued
    row = SearchLanguage.objects.filter(tenant=tenant).first()
    language = row.language if row else DEFAULT_SEARCH_LANGUAGE
    search_config_name(language)  # an unknown language is a bug upstream: fail loudly
    try:
        changed = maintenance.apply_search_language(backend, namespace, language)
    except NamespaceNotFound:
        return False
    except Exception as exc:
        if row is not None:
            SearchLanguage.objects.filter(pk=row.pk).update(error=f"{type(exc).__name__}: {exc}"[:2000])
        raise
    if row is not None:
        # Only if nobody asked for another language meanwhile (that request queued its own task).
        SearchLanguage.objects.filter(pk=row.pk, language=language).update(applied_at=timezone.now(), error="")
    if changed:
        logger.info("tenant %s now searches in %s", namespace, language)
    return changed


def search_languages_reclaim() -> int:
    """Queue the re-index of every tenant whose index is not in the language it asked for; returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT t.slug FROM knowledge_searchlanguage l
            JOIN accounts_tenant t ON t.id = l.tenant_id
            JOIN knowledge_corpusstat s ON s.tenant_id = l.tenant_id
            JOIN pg_ts_config c ON c.oid = s.search_config
            WHERE c.cfgname <> 'quarry_' || l.language
            ORDER BY t.slug
            """
        )
        slugs = [row[0] for row in cursor.fetchall()]
    for slug in slugs:
        logger.info("search language of tenant %s re-queued", slug)
        async_task(APPLY_TASK, slug, group=TASK_GROUP)
    return len(slugs)
