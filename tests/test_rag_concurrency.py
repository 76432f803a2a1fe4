"""Concurrent re-ingestion of one document on real PostgreSQL connections."""

from __future__ import annotations

import re
import threading

import pytest
from asgiref.sync import async_to_sync
from django.db import connection

from knowledge import rag
from knowledge.models import Chunk, CorpusStat, Document
from tests.embedders import BagOfWordsEmbedder
from tests.factories import make_tenant


def versions_in(texts: list[str]) -> set[str]:
    return {m for t in texts for m in re.findall(r"(\w+)-word\d+", t)}


def version_text(tag: str) -> str:
    return " ".join(f"{tag}-word{i} filler text for the chunker." for i in range(120))


@pytest.mark.django_db(transaction=True)
def test_concurrent_reingestion_leaves_one_complete_version_and_readers_never_see_a_mix() -> None:
    tenant = make_tenant("acme")
    chunker = rag.FixedSizeChunker(size=300, overlap=0)
    async_to_sync(rag.postgres(BagOfWordsEmbedder(), chunker, namespace="acme").ingest)([rag.RAGDocument("doc", version_text("v0"))])
    tags = [f"w{i}" for i in range(6)]
    errors: list[BaseException] = []
    mixes: list[set[str]] = []
    stop = threading.Event()

    def writer(tag: str) -> None:
        try:
            service = rag.postgres(BagOfWordsEmbedder(), chunker, namespace="acme")
            async_to_sync(service.ingest)([rag.RAGDocument("doc", version_text(tag))])
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    def reader() -> None:
        try:
            while not stop.is_set():
                texts = list(Chunk.objects.filter(tenant=tenant, document__external_id="doc").values_list("text", flat=True))
                versions = versions_in(texts)
                if len(versions) != 1:
                    mixes.append(versions)
        finally:
            connection.close()

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(tag,)) for tag in tags]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join(timeout=120)
    stop.set()
    for t in readers:
        t.join(timeout=30)

    assert errors == []
    assert mixes == [], "a reader saw chunks of two versions at once"
    doc = Document.objects.get(tenant=tenant, external_id="doc")
    chunks = list(Chunk.objects.filter(document=doc).order_by("ordinal"))
    final = versions_in([c.text for c in chunks])
    assert len(final) == 1 and final <= set(tags)
    assert doc.version == 1 + len(tags), "every replacement counted: no lost update"
    assert doc.chunk_count == len(chunks) and doc.text == version_text(final.pop())
    stats = CorpusStat.objects.get(tenant=tenant)
    assert stats.chunk_count == len(chunks)
