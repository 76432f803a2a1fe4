"""Moving a tenant to another embedding model without downtime (issue 21; knowledge.services.reembedding).

Real models on both sides: the tenant starts on the local MiniLM and moves to bge-small, both
shipped in PyPI packages. A service pinned to MiniLM sees every old vector until the switch and
none after it, which is how these tests tell "never a mix" apart from "half switched".
"""

from __future__ import annotations

import importlib
import threading
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection, connections
from django.test import Client
from django.utils import timezone

from accounts.models import Role, Tenant
from knowledge import rag, tasks
from knowledge.models import Chunk, CorpusStat, Document, EmbeddingCache, EmbeddingMigration
from knowledge.rag import factory
from knowledge.rag.backends.postgres import maintenance
from knowledge.rag.embedding import BGE_MODEL_ID, LOCAL_MODEL_ID, BgeSmallEmbedder, LocalEmbedder
from knowledge.services import reembedding
from knowledge.services.documents import document_ingest
from tests.embedders import RecordingBgeEmbedder
from tests.factories import chunk_vectors, make_member, make_tenant

MIGRATION = importlib.import_module("knowledge.migrations.0014_embedding_migration")

TOPICS = ["espresso brewing", "sourdough baking", "bicycle repair", "orbital mechanics", "tax law", "tide pools",
          "jazz harmony", "beekeeping", "glacier retreat", "chess openings"]


def corpus(n: int = 40, prefix: str = "d") -> list[rag.RAGDocument]:
    return [
        rag.RAGDocument(f"{prefix}{i:03}", f"Notes number {i} about {TOPICS[i % len(TOPICS)]}: how it works and what to watch for.",
                        title=f"{TOPICS[i % len(TOPICS)].title()} {i}")
        for i in range(n)
    ]


def semantic(service: rag.RAGService, text: str = "making coffee with an espresso machine") -> list[str]:
    return [h.chunk.chunk_id for h in async_to_sync(service.search)(text, mode="semantic", limit=10)]


def models_of(tenant: Tenant) -> set[str]:
    return set(Chunk.objects.filter(tenant=tenant).values_list("embedding_model", flat=True))


@pytest.fixture
def acme(db: None) -> Tenant:
    tenant = make_tenant("acme")
    start_on_minilm("acme", corpus())
    return tenant


def start_on_minilm(namespace: str, documents: list[rag.RAGDocument]) -> None:
    """The tenant's first vectors are MiniLM's (whatever the configured default), so its model is MiniLM."""
    async_to_sync(rag.tenant_service(namespace, embedder=LocalEmbedder()).ingest)(documents)


@pytest.fixture
def small_batches(settings: Any) -> None:
    settings.QUARRY_REEMBED_BATCH = 8


def test_the_first_vectors_set_the_tenant_model_and_a_service_following_it_refuses_others(acme: Tenant) -> None:
    assert CorpusStat.objects.get(tenant=acme).embedding_model == LOCAL_MODEL_ID
    # A service that follows the tenant's model but embeds with another (as one does whose tenant was
    # switched while it embedded) is refused, tries once more, and writes nothing.
    confused = rag.service(rag.tenant_service("acme").backend, BgeSmallEmbedder(), namespace="acme",
                           embedder_for_model=lambda model: BgeSmallEmbedder())
    with pytest.raises(rag.EmbeddingModelChanged, match=f"holds vectors of {LOCAL_MODEL_ID}, not {BGE_MODEL_ID}"):
        async_to_sync(confused.ingest)([rag.RAGDocument("x", "Vectors of another model must not land here.")])
    assert not Document.objects.filter(tenant=acme, external_id="x").exists()
    assert models_of(acme) == {LOCAL_MODEL_ID}
    # The seed's API with an embedder of the caller's choosing writes what it embedded (the seed's
    # contract); the tenant keeps its model and its semantic search leaves that document out.
    async_to_sync(rag.postgres(BgeSmallEmbedder(), None, namespace="acme").ingest)([rag.RAGDocument("y", "Espresso, chosen by the caller.")])
    assert models_of(acme) == {LOCAL_MODEL_ID, BGE_MODEL_ID} and CorpusStat.objects.get(tenant=acme).embedding_model == LOCAL_MODEL_ID
    assert "y:0" not in semantic(rag.tenant_service("acme"), "espresso")


def test_a_move_stages_while_searches_keep_the_old_vectors_then_switches(acme: Tenant, small_batches: None) -> None:
    old = rag.postgres(LocalEmbedder(), None, namespace="acme")
    before = semantic(old)
    # A service resolves the tenant's model once (per request): each check below is a request of its own.
    assert before and semantic(rag.tenant_service("acme")) == before
    migration = reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    assert (migration.source_model, migration.target_model, migration.total) == (LOCAL_MODEL_ID, BGE_MODEL_ID, 40)

    assert reembedding.reembed_run(migration.pk, seconds=0) == "running"  # one batch, then the clock stops it
    migration.refresh_from_db()
    assert (migration.done, migration.position > 0) == (8, True)
    assert EmbeddingCache.objects.filter(tenant=acme, model_id=BGE_MODEL_ID).count() == 8
    assert models_of(acme) == {LOCAL_MODEL_ID} and semantic(old) == before and semantic(rag.tenant_service("acme")) == before

    assert reembedding.reembed_run(migration.pk, seconds=None) == "done"
    migration.refresh_from_db()
    assert (migration.status, migration.done, migration.total, migration.percent) == ("done", 40, 40, 100)
    assert models_of(acme) == {BGE_MODEL_ID} == {CorpusStat.objects.get(tenant=acme).embedding_model}
    assert set(Document.objects.filter(tenant=acme).values_list("embedding_model", flat=True)) == {BGE_MODEL_ID}
    assert not EmbeddingCache.objects.filter(tenant=acme).exists()  # staged copies dropped with the switch
    assert semantic(old) == []  # no MiniLM vector is left to compare with
    after = semantic(rag.tenant_service("acme"))  # the tenant's next service embeds queries with bge
    assert after and after[0].startswith("d") and int(after[0][1:4]) % len(TOPICS) == 0  # an espresso note first
    assert semantic(rag.postgres(BgeSmallEmbedder(), None, namespace="acme")) == after


def test_a_stopped_move_resumes_without_embedding_anything_twice(acme: Tenant, small_batches: None, settings: Any) -> None:
    # The target model is the real bge-small, recording what it embeds: the configured embedder (bge-small is
    # QUARRY_EMBEDDING_MODEL's default), given by dotted path as a deployment gives its provider.
    settings.QUARRY_EMBEDDER = {"CLASS": "tests.embedders.RecordingBgeEmbedder", "OPTIONS": {}}
    target = factory.embedder_named("bge-small")
    assert isinstance(target, RecordingBgeEmbedder)
    migration = reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    reembedding.reembed_run(migration.pk, seconds=0)
    reembedding.reembed_run(migration.pk, seconds=0)
    # The worker died here; the reclaim re-queues a move that went silent.
    EmbeddingMigration.objects.filter(pk=migration.pk).update(updated_at=timezone.now() - timedelta(minutes=10))
    assert reembedding.reembeds_reclaim() == 1 and reembedding.reembeds_reclaim() == 0
    assert tasks.reembed(migration.pk) == "done"
    assert len(target.texts) == len(set(target.texts)) == 40
    assert models_of(acme) == {BGE_MODEL_ID}


def test_documents_written_during_a_move_are_switched_too(acme: Tenant, small_batches: None) -> None:
    migration = reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    reembedding.reembed_run(migration.pk, seconds=0)
    # Through the product's write path, on the old model: a new document, a changed one, a removed one.
    document_ingest(tenant=acme, documents=[
        rag.RAGDocument("late", "A late note about espresso grinders and burr sizes.", title="Grinders"),
        rag.RAGDocument("d039", "Rewritten: chess endgames with a lone king.", title="Chess endings"),
    ], actor="editor")
    async_to_sync(rag.tenant_service("acme", embedder=None).delete)(["d038"])
    assert models_of(acme) == {LOCAL_MODEL_ID}
    assert reembedding.reembed_run(migration.pk, seconds=None) == "done"
    assert models_of(acme) == {BGE_MODEL_ID}
    assert Chunk.objects.filter(tenant=acme).count() == 40
    assert "late:0" in semantic(rag.tenant_service("acme"), "espresso grinder burrs")
    # After the switch the product path embeds with the tenant's new model.
    document_ingest(tenant=acme, documents=[rag.RAGDocument("later", "Another note on milk frothing.")], actor="editor")
    assert models_of(acme) == {BGE_MODEL_ID}


@pytest.mark.django_db(transaction=True)
def test_searches_during_the_switch_see_all_old_vectors_or_all_new_ones() -> None:
    tenant = make_tenant("acme")
    start_on_minilm("acme", corpus(300))
    old = rag.postgres(LocalEmbedder(), None, namespace="acme")
    new = rag.postgres(BgeSmallEmbedder(), None, namespace="acme")
    before = semantic(old)
    migration = reembedding.reembed_start(tenant=tenant, model="bge-small", queue=False)
    # Stage everything but the last chunks, so that the switch itself still embeds some.
    last = Chunk.objects.filter(tenant=tenant).order_by("-id").values_list("id", flat=True)[5]
    for pk, digest, text in maintenance.reembed_pending(reembedding.reembed_backend(), "acme", BGE_MODEL_ID, limit=1000):
        if pk < last:
            maintenance.reembed_stage(reembedding.reembed_backend(), "acme", BGE_MODEL_ID, {digest: reembedding.document_embedding(BgeSmallEmbedder())([text])[0]})
    EmbeddingMigration.objects.filter(pk=migration.pk).update(position=last)
    errors: list[BaseException] = []
    done = threading.Event()

    def switch() -> None:
        try:
            reembedding.reembed_run(migration.pk, seconds=None)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()
            done.set()

    thread = threading.Thread(target=switch)
    thread.start()
    seen: list[tuple[list[str], list[str]]] = []
    while not done.is_set():  # how many land during the switch depends on the machine; each must be whole
        seen.append((semantic(old), semantic(new)))
    thread.join()
    after = semantic(new)
    assert errors == [] and before and after
    # Each search on its own (the switch may commit between the two of a pair): whole or empty.
    assert all(o in (before, []) and n in ([], after) for o, n in seen), "a search saw vectors of both models"
    assert (before, []) in seen or ([], after) in seen
    assert EmbeddingMigration.objects.get(pk=migration.pk).status == "done"


def test_cancel_drops_what_was_staged_and_keeps_the_old_model(acme: Tenant, small_batches: None) -> None:
    migration = reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    reembedding.reembed_run(migration.pk, seconds=0)
    assert EmbeddingCache.objects.filter(tenant=acme, model_id=BGE_MODEL_ID).exists()
    cancelled = reembedding.reembed_cancel(tenant=acme)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert not EmbeddingCache.objects.filter(tenant=acme, model_id=BGE_MODEL_ID).exists()
    assert reembedding.reembed_run(migration.pk, seconds=None) == "cancelled"  # a task still queued does nothing
    assert models_of(acme) == {LOCAL_MODEL_ID} == {CorpusStat.objects.get(tenant=acme).embedding_model}
    assert reembedding.reembed_cancel(tenant=acme) is None


def test_refusals_name_the_problem(acme: Tenant) -> None:
    with pytest.raises(reembedding.ReembedError, match="unknown embedding model 'gpt-embed-9': one of local, bge-small"):
        reembedding.reembed_start(tenant=acme, model="gpt-embed-9")
    with pytest.raises(reembedding.ReembedError, match=f"already on {LOCAL_MODEL_ID}"):
        reembedding.reembed_start(tenant=acme, model="local")
    reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    with pytest.raises(reembedding.ReembedError, match="already moving to local/bge-small-en-v1.5-int8 \\(0 of 40 chunks\\)"):
        reembedding.reembed_start(tenant=acme, model="bge-small")


def test_moving_one_tenant_leaves_the_others_alone(acme: Tenant) -> None:
    globex = make_tenant("globex")
    start_on_minilm("globex", corpus(12, prefix="g"))
    migration = reembedding.reembed_start(tenant=acme, model="bge-small", queue=False)
    assert reembedding.reembed_run(migration.pk, seconds=None) == "done"
    assert models_of(acme) == {BGE_MODEL_ID} and models_of(globex) == {LOCAL_MODEL_ID}
    assert semantic(rag.tenant_service("globex")) and all(c.startswith("g") for c in semantic(rag.tenant_service("globex")))
    assert all(c.startswith("d") or c.startswith("late") for c in semantic(rag.tenant_service("acme")))


def test_the_upgrade_pins_tenants_that_hold_vectors_to_their_model(acme: Tenant) -> None:
    empty = make_tenant("empty")
    CorpusStat.objects.filter(tenant=acme).update(embedding_model="")
    CorpusStat.objects.create(tenant=empty)
    with connection.cursor() as cursor:
        if reembedding.reembed_backend().has_pgvector():
            # 0014 ran on rows holding their vector in the array: write them back so (0022 moved them to the
            # halfvec column; its trigger is off for this transaction, which the test rolls back).
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")  # no ALTER TABLE with deferred checks pending
            cursor.execute("ALTER TABLE knowledge_chunk DISABLE TRIGGER chunk_vector_half")
            cursor.execute("UPDATE knowledge_chunk SET embedding = embedding_half::real[]::float8[], embedding_half = NULL")
        cursor.execute(MIGRATION.PIN_EXISTING)
    assert CorpusStat.objects.get(tenant=acme).embedding_model == LOCAL_MODEL_ID
    assert CorpusStat.objects.get(tenant=empty).embedding_model == ""  # its first vectors will decide


def test_the_command_starts_shows_waits_and_cancels(acme: Tenant, django_capture_on_commit_callbacks: Any) -> None:
    from django_q.models import OrmQ

    out = StringIO()
    call_command("reembed", tenant="acme", stdout=out)
    assert out.getvalue() == f"tenant acme: model {LOCAL_MODEL_ID}\n"
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("reembed", tenant="acme", model="bge-small", stdout=out)
    assert out.getvalue() == f"tenant acme: queued {LOCAL_MODEL_ID} -> {BGE_MODEL_ID}: running, 0 of 40 chunks (0%)\n"
    assert [task.func() for task in OrmQ.objects.all()] == [reembedding.REEMBED_TASK]
    with pytest.raises(CommandError, match="already moving"):
        call_command("reembed", tenant="acme", model="bge-small", stdout=StringIO())
    out = StringIO()
    call_command("reembed", tenant="acme", cancel=True, stdout=out)
    assert "cancelled" in out.getvalue()
    out = StringIO()
    call_command("reembed", tenant="acme", model="bge-small", now=True, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[-1] == f"tenant acme: {LOCAL_MODEL_ID} -> {BGE_MODEL_ID}: done, 40 of 40 chunks (100%)"
    out = StringIO()
    call_command("reembed", tenant="acme", stdout=out)
    assert out.getvalue().splitlines() == [
        f"tenant acme: model {BGE_MODEL_ID}", f"last move {LOCAL_MODEL_ID} -> {BGE_MODEL_ID}: done, 40 of 40 chunks (100%)",
    ]
    with pytest.raises(CommandError, match="tenant 'nobody' does not exist"):
        call_command("reembed", tenant="nobody")
    with pytest.raises(CommandError, match="unknown embedding model"):
        call_command("reembed", tenant="acme", model="nope")


def test_editors_start_and_watch_a_move_in_the_admin_for_their_tenant_only(acme: Tenant, django_capture_on_commit_callbacks: Any) -> None:
    globex = make_tenant("globex")
    editor, outsider = make_member(acme, Role.EDITOR, "editor"), make_member(globex, Role.ADMIN, "outsider")
    User.objects.filter(pk__in=[editor.pk, outsider.pk]).update(is_staff=True)
    client, other = Client(), Client()
    client.force_login(User.objects.get(pk=editor.pk))
    other.force_login(User.objects.get(pk=outsider.pk))
    form = client.get("/admin/knowledge/embeddingmigration/add/").content.decode()
    assert 'value="bge-small"' in form and 'value="local"' in form
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post("/admin/knowledge/embeddingmigration/add/", {"tenant": acme.pk, "target_name": "bge-small"})
    assert response.status_code == 302
    migration = EmbeddingMigration.objects.get(tenant=acme)
    assert migration.requested_by == "editor" and migration.status == "running"
    listing = client.get("/admin/knowledge/embeddingmigration/").content.decode()
    assert "0 / 40 (0%)" in listing and BGE_MODEL_ID in listing
    assert "0 / 40" not in other.get("/admin/knowledge/embeddingmigration/").content.decode()
    assert other.get(f"/admin/knowledge/embeddingmigration/{migration.pk}/change/").status_code in (302, 403, 404)
    # A second move while one runs: the reason, not a 500.
    response = client.post("/admin/knowledge/embeddingmigration/add/", {"tenant": acme.pk, "target_name": "bge-small"}, follow=True)
    assert response.status_code == 200 and "already moving" in response.content.decode()
    # Another tenant's id is not a choice for this editor.
    response = client.post("/admin/knowledge/embeddingmigration/add/", {"tenant": globex.pk, "target_name": "bge-small"})
    assert response.status_code == 200 and not EmbeddingMigration.objects.filter(tenant=globex).exists()
    assert reembedding.reembed_run(migration.pk, seconds=None) == "done"
    assert "40 / 40 (100%)" in client.get("/admin/knowledge/embeddingmigration/").content.decode()
    response = client.post("/admin/knowledge/embeddingmigration/", {"action": "cancel_selected", "_selected_action": [migration.pk]}, follow=True)
    assert "0 moves cancelled" in response.content.decode()


def test_the_switch_embeds_chunks_nothing_staged_under_its_lock(acme: Tenant) -> None:
    """Chunks that landed after the staging finished get their vector inside the switch's transaction."""
    backend = reembedding.reembed_backend()
    changed = maintenance.reembed_switch(backend, "acme", BGE_MODEL_ID, reembedding.document_embedding(BgeSmallEmbedder()), batch=16)
    assert changed == 40 and models_of(acme) == {BGE_MODEL_ID}
    assert semantic(rag.tenant_service("acme"))


@pytest.mark.django_db(transaction=True)
def test_a_move_to_another_dimension_builds_its_ann_index_before_the_switch(settings: Any) -> None:
    settings.LOCAL_EMBEDDERS = {**settings.LOCAL_EMBEDDERS, "words": ("tests.embedders.BagOfWordsEmbedder", 64)}
    acme = make_tenant("acme")
    start_on_minilm("acme", corpus())
    backend = reembedding.reembed_backend()
    migration = reembedding.reembed_start(tenant=acme, model="words", queue=False)
    assert migration.target_model == "test/bag-of-words"
    assert reembedding.reembed_run(migration.pk, seconds=None) == "done"
    assert models_of(acme) == {"test/bag-of-words"}
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_embedding_hnsw_64'")
        row = cursor.fetchone()
    assert (row is not None) == backend.has_pgvector()  # the embedded server has pgvector
    try:
        hits = semantic(rag.tenant_service("acme"), "espresso brewing")
        assert hits and all(v is not None and len(v) == 64 for v in chunk_vectors(Chunk.objects.filter(tenant=acme)))
    finally:
        with connection.cursor() as cursor:  # the index outlives the flush of a transactional test
            cursor.execute("DROP INDEX IF EXISTS chunk_embedding_hnsw_64")


def test_a_tenant_on_a_model_this_deployment_lacks_says_so_and_keyword_search_works(acme: Tenant) -> None:
    CorpusStat.objects.filter(tenant=acme).update(embedding_model="openai/text-embedding-3-small")
    service = rag.tenant_service("acme")
    with pytest.raises(rag.ConfigurationError, match="embedding model openai/text-embedding-3-small, which is not configured here"):
        semantic(service)
    assert [h.chunk.document_id for h in async_to_sync(service.search)("espresso", mode="keyword", limit=3)]
    with pytest.raises(reembedding.ReembedError, match="unknown embedding model 'openai/text-embedding-3-small'"):
        reembedding.reembed_start(tenant=acme, model="openai/text-embedding-3-small")
    migration = reembedding.reembed_start(tenant=acme, model="local", queue=False)  # back to a model it has
    assert reembedding.reembed_run(migration.pk, seconds=None) == "done" and semantic(rag.tenant_service("acme"))
