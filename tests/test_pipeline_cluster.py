"""The pipeline on real django-q2 clusters (separate processes) against the test database.

- ORM broker: a batch with good and bad files, live progress, and concurrent re-index requests.
- Redis broker: upload over HTTP (uvicorn), processed by a cluster, polled and searched over HTTP.
- A worker killed mid-document (SIGKILL to the cluster's process group): the previous chunks
  stay searchable, and a new cluster's reclaim schedule picks the document up and finishes it,
  re-using the vectors the killed worker had stored instead of embedding them again.

The clusters embed with the real local model. Uploads are stored under a temporary
QUARRY_DATA_DIR shared with the child processes.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.utils import timezone
from django_q.models import Schedule, Success

from knowledge import rag
from knowledge.services import documents as doc_services
from knowledge.services import indexing, reclaim, state
from knowledge.models import Chunk, Document, EmbeddingCache, Posting
from knowledge.selectors import chunk_search
from tests.conftest import World
from tests.factories import chunk_vectors, make_token
from tests.servers import asgi_server, child_env, graceful_qcluster, read_log, redis_available, wait_for
from tests.test_extraction import make_pdf

REDIS_URL = "redis://127.0.0.1:6379/0"
needs_redis = pytest.mark.skipif(not redis_available(REDIS_URL), reason="no Redis server at 127.0.0.1:6379")
TERMINAL = ("ready", "failed")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def data_dir(settings, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return tmp_path


cluster = graceful_qcluster


def cluster_env(data_dir: Path, **overrides: str) -> dict[str, str]:
    """Children on the test database and our data dir, with a 3 s lease (heartbeat every second)."""
    return child_env(**{"REDIS_URL": "", "QUARRY_DATA_DIR": str(data_dir), "QUARRY_DOCUMENT_LEASE_SECONDS": "3", **overrides})


def statuses(world: World) -> dict[str, tuple[str, str]]:
    return {d.external_id: (d.status, d.error) for d in Document.objects.filter(tenant=world.acme)}


def keyword_ids(world: World, query: str) -> list[str]:
    return sorted({h.chunk.document_id for h in chunk_search(tenant=world.acme, reader=None, query=query, mode="keyword", limit=50)})


def long_text(word: str, paragraphs: int) -> str:
    return "\n\n".join(f"Paragraph {n} of the {word} handbook. " + f"The {word} procedure is described here in detail. " * 30 for n in range(paragraphs))


def test_a_batch_is_processed_by_a_cluster_on_the_orm_broker(world: World, data_dir: Path) -> None:
    batch = [
        SimpleUploadedFile("manual.md", ("# Granite manual\n\n" + long_text("granite", 40)).encode()),
        SimpleUploadedFile("report.pdf", make_pdf(["Quarterly marble output."])),
        SimpleUploadedFile("corrupt.pdf", b"%PDF-1.7\n1 0 obj broken"),
        SimpleUploadedFile("empty.txt", b""),
        SimpleUploadedFile("slides.key", b"keynote", content_type="application/octet-stream"),
    ]
    doc_services.document_upload_create(tenant=world.acme, actor="editor", files=batch)
    manual = Document.objects.get(tenant=world.acme, external_id="manual.md")
    seen: list[float] = []
    with cluster(cluster_env(data_dir), log_name="qcluster-pipeline-orm"):
        def settled() -> bool:
            manual.refresh_from_db(fields=["status", "progress"])
            if manual.status == "processing":
                seen.append(manual.progress)
            return all(status in TERMINAL for status, _ in statuses(world).values())

        wait_for(settled, timeout=120, interval=0.05, what=f"the batch to settle: {statuses(world)}")

        # Two re-index requests for one document at the same moment, each with its own text.
        texts = ["Version A: " + long_text("basalt", 3), "Version B: " + long_text("slate", 4)]
        barrier = threading.Barrier(2)

        def request(text: str) -> None:
            try:
                barrier.wait()
                doc_services.document_text_save(tenant=world.acme, external_id="manual.md", text=text, actor="editor")
            finally:
                connection.close()

        threads = [threading.Thread(target=request, args=(t,)) for t in texts]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wait_for(lambda: Document.objects.get(pk=manual.pk).status in TERMINAL and not Document.objects.filter(pk=manual.pk, lease_id__gt="").exists(),
                 timeout=90, what="the concurrent re-index to settle")
        time.sleep(1.5)  # a late duplicate task must not change anything
    assert statuses(world) == {
        "manual.md": ("ready", ""),
        "report.pdf": ("ready", ""),
        "corrupt.pdf": ("failed", statuses(world)["corrupt.pdf"][1]),
        "empty.txt": ("failed", "empty.txt is empty"),
        "slides.key": ("failed", "slides.key: unsupported file type '.key'; supported: .txt, .md, .html, .pdf, .docx, .pptx, .xlsx, .csv, .png, .jpg"),
    }, read_log("qcluster-pipeline-orm")[-3000:]
    assert statuses(world)["corrupt.pdf"][1].startswith("corrupt.pdf is corrupt or not a PDF")
    assert any(0 < p < 1 for p in seen), f"progress never moved: {seen[:20]}"
    assert seen == sorted(seen)
    # One consistent final version: the latest request's text, all of its chunks, nothing of the other.
    manual = Document.objects.get(pk=manual.pk)
    assert manual.text == manual.source_text and manual.text in texts
    chunks = list(Chunk.objects.filter(document=manual).order_by("ordinal"))
    assert len(chunks) == manual.chunk_count and all(manual.text[c.start_char : c.end_char] == c.text for c in chunks)
    assert None not in chunk_vectors(Chunk.objects.filter(document=manual))
    winner, loser = ("basalt", "slate") if manual.text == texts[0] else ("slate", "basalt")
    assert keyword_ids(world, winner) == ["manual.md"] and keyword_ids(world, loser) == [] and keyword_ids(world, "granite") == []
    assert keyword_ids(world, "marble") == ["report.pdf"]
    assert set(Success.objects.filter(func=state.PROCESS_TASK).values_list("result", flat=True)) <= {"ready", "failed", "requeued", "skipped"}


@needs_redis
def test_upload_over_http_is_processed_by_a_cluster_on_the_redis_broker(world: World, data_dir: Path) -> None:
    env = cluster_env(data_dir, REDIS_URL=REDIS_URL, QUARRY_Q_NAME=f"pipe-{uuid.uuid4().hex[:6]}")
    token = make_token(world.acme, world.editor)
    headers = {"Authorization": f"Bearer {token}"}
    with asgi_server(env, log_name="uvicorn-pipeline-redis") as base, cluster(env, log_name="qcluster-pipeline-redis"):
        response = httpx.post(
            f"{base}/v1/documents/upload", headers=headers, timeout=30,
            files=[("files", ("granite.txt", b"Granite is an igneous rock quarried in blocks.")),
                   ("files", ("broken.pdf", b"%PDF-1.4 nonsense"))],
            data={"metadata": '{"source": "redis-test"}'},
        )
        assert response.status_code == 202, response.text
        assert response.json() == {"document_ids": ["granite.txt", "broken.pdf"]}

        def settled() -> dict[str, dict[str, object]] | None:
            bodies = {i: httpx.get(f"{base}/v1/documents/{i}", headers=headers, timeout=10).json() for i in ("granite.txt", "broken.pdf")}
            return bodies if all(b["status"] in TERMINAL for b in bodies.values()) else None

        bodies = wait_for(settled, timeout=120, interval=0.3, what="the uploads to be processed via Redis")
        hits = httpx.post(f"{base}/v1/search", headers=headers, json={"query": "igneous rock"}, timeout=30).json()["hits"]
    assert (bodies["granite.txt"]["status"], bodies["granite.txt"]["chunk_count"], bodies["granite.txt"]["metadata"]) == ("ready", 1, {"source": "redis-test"})
    assert bodies["broken.pdf"]["status"] == "failed" and bodies["broken.pdf"]["error"].startswith("broken.pdf is corrupt or not a PDF")
    assert hits[0]["document_id"] == "granite.txt"


def test_a_large_json_ingestion_is_searchable_at_once_and_a_cluster_indexes_it(world: World, data_dir: Path) -> None:
    """Over HTTP on the ORM broker: the request stores the chunks (a backlog past the inline limit)
    and queues the indexer; a cluster then gives them postings, and the answers stay the same."""
    env = cluster_env(data_dir, QUARRY_INDEX_INLINE_MAX_CHUNKS="2", QUARRY_EMBEDDING_MODEL="none")
    headers = {"Authorization": f"Bearer {make_token(world.acme, world.editor)}"}
    documents = [{"id": f"note-{i}", "text": f"Field note {i}: the {word} face was mapped and sampled."}
                 for i, word in enumerate(["granite", "marble", "granite", "slate", "basalt", "granite"])]
    with asgi_server(env, log_name="uvicorn-backlog") as base:
        response = httpx.post(f"{base}/v1/documents", headers=headers, json={"documents": documents}, timeout=60)
        assert response.status_code == 200, response.text
        assert Chunk.objects.filter(tenant=world.acme, indexed=False).count() == 6
        query = {"query": "granite", "mode": "keyword", "limit": 10}
        before = httpx.post(f"{base}/v1/search", headers=headers, json=query, timeout=30).json()["hits"]
        with cluster(env, log_name="qcluster-backlog"):
            wait_for(lambda: not Chunk.objects.filter(tenant=world.acme, indexed=False).exists(), timeout=90,
                     what=f"the backlog to be indexed: {read_log('qcluster-backlog')[-2000:]}")
        after = httpx.post(f"{base}/v1/search", headers=headers, json=query, timeout=30).json()["hits"]
    assert sorted(h["document_id"] for h in before) == ["note-0", "note-2", "note-5"]
    assert [(h["chunk_id"], h["score"]) for h in after] == [(h["chunk_id"], h["score"]) for h in before]
    assert Posting.objects.filter(tenant=world.acme).values("chunk_id").distinct().count() == 6
    assert Success.objects.filter(func=indexing.INDEX_TASK).exists()


def test_a_killed_worker_leaves_old_chunks_searchable_and_a_new_cluster_finishes_the_document(world: World, data_dir: Path) -> None:
    doc_services.document_ingest(tenant=world.acme, actor="seed", embedder=None,
                              documents=[rag.RAGDocument("handbook", "The granite handbook, first edition.")])
    document = doc_services.document_text_save(tenant=world.acme, external_id="handbook", text=long_text("marble", 40), actor="editor")
    env = cluster_env(data_dir, QUARRY_WORKERS="1")
    with cluster(env, log_name="qcluster-pipeline-killed") as first:
        # Extracted (progress 0.1, written by the lease heartbeat) and now embedding: kill it.
        wait_for(lambda: Document.objects.filter(pk=document.pk, status="processing", progress__gte=0.1).exists(),
                 timeout=90, interval=0.05, what="the first cluster to be embedding the new version")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    killed = Document.objects.get(pk=document.pk)
    assert killed.status == "processing" and killed.lease_id and killed.attempts == 1
    assert killed.progress < 0.95  # it really died mid-way
    # Nothing of the half-done version is visible; the first edition still is.
    assert keyword_ids(world, "granite") == ["handbook"] and keyword_ids(world, "marble") == []
    assert (killed.version, killed.chunk_count) == (1, 1)

    # The reclaim schedule exists (it is ensured whenever work is queued) and is due: as if its
    # minute had passed. The new cluster's scheduler runs it ~30 s after start (django-q2's cadence).
    assert Schedule.objects.filter(name=state.RECLAIM_SCHEDULE_NAME).update(next_run=timezone.now()) == 1
    with cluster(env, log_name="qcluster-pipeline-rescue"):
        wait_for(lambda: Document.objects.get(pk=document.pk).status in TERMINAL, timeout=150, interval=0.2,
                 what=f"the new cluster to finish the document: {read_log('qcluster-pipeline-rescue')[-2000:]}")
    rescued = Document.objects.get(pk=document.pk)
    assert (rescued.status, rescued.error, rescued.version, rescued.attempts) == ("ready", "", 2, 2)
    assert rescued.chunk_count > 30 and rescued.lease_expires_at is None
    assert keyword_ids(world, "marble") == ["handbook"] and keyword_ids(world, "granite") == []
    assert Success.objects.filter(func=state.RECLAIM_TASK).exists()


def test_a_worker_killed_mid_embedding_resumes_from_its_stored_vectors(world: World, data_dir: Path) -> None:
    text = "\n\n".join(f"Chapter {n}: the quartz ledger, entry {n * 7919 % 10007}. " + f"Quartz shipment {n} was weighed, logged and stored. " * 38
                       for n in range(160))
    document = doc_services.document_text_save(tenant=world.acme, external_id="ledger", text=text, actor="editor")
    env = cluster_env(data_dir, QUARRY_WORKERS="1")
    with cluster(env, log_name="qcluster-resume-killed") as first:
        wait_for(lambda: EmbeddingCache.objects.filter(tenant=world.acme).count() >= 64, timeout=180, interval=0.05,
                 what=f"the first cluster to have stored two batches: {read_log('qcluster-resume-killed')[-2000:]}")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)
    killed = Document.objects.get(pk=document.pk)
    stored = EmbeddingCache.objects.filter(tenant=world.acme).count()
    assert killed.status == "processing" and killed.phase == "embedding" and 0 < killed.phase_done < killed.phase_total
    assert stored < killed.phase_total  # it really died mid-way

    # The lease lapses (3 s); the reclaim task re-queues the document, and a new cluster takes it.
    wait_for(lambda: Document.objects.filter(pk=document.pk, lease_expires_at__lt=timezone.now()).exists(), timeout=10, what="the lease to lapse")
    assert reclaim.documents_reclaim().requeued == 1
    requeued = Document.objects.get(pk=document.pk)
    assert requeued.progress >= killed.progress  # the bar does not jump back
    with cluster(env, log_name="qcluster-resume-rescue"):
        wait_for(lambda: Document.objects.get(pk=document.pk).status in TERMINAL, timeout=300, interval=0.2,
                 what=f"the new cluster to finish the document: {read_log('qcluster-resume-rescue')[-2000:]}")
    rescued = Document.objects.get(pk=document.pk)
    assert (rescued.status, rescued.error, rescued.attempts, rescued.progress) == ("ready", "", 2, 1.0)
    line = re.search(r"embedded (\d+) of (\d+) texts; (\d+) re-used", read_log("qcluster-resume-rescue"))
    assert line is not None, read_log("qcluster-resume-rescue")[-2000:]
    embedded, total, reused = map(int, line.groups())
    assert total == rescued.chunk_count and reused >= stored and embedded == total - reused
    assert not EmbeddingCache.objects.filter(tenant=world.acme).exists()
    assert keyword_ids(world, "quartz") == ["ledger"]
