"""Management commands: ingest, ingest_beir, evaluate, demo_corpus."""

from __future__ import annotations

import io
import json
from pathlib import Path
from urllib.parse import unquote

import docx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from knowledge.models import AuditEvent, Chunk, Document
from knowledge.services.documents import demo_corpus_ingest
from tests.documents import FOUR_SLIDES, make_deck
from tests.factories import make_tenant


def test_ingest_command_indexes_a_folder_and_reports_failures(db: None, tmp_path: Path) -> None:
    make_tenant("acme")
    (tmp_path / "notes.txt").write_text("Plain notes about otters and rivers.")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "page.html").write_text("<html><head><title>Otter page</title><script>evil()</script></head><body><p>Otters hold hands.</p></body></html>")
    document = docx.Document()
    document.add_paragraph("A Word file about beavers.")
    document.save(tmp_path / "beavers.docx")
    (tmp_path / "empty.md").write_text("")
    (tmp_path / "clip.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42")
    (tmp_path / ".DS_Store").write_bytes(b"\x00\x01")
    out, err = io.StringIO(), io.StringIO()
    call_command("ingest", str(tmp_path), "--tenant", "acme", stdout=out, stderr=err)
    assert out.getvalue().strip().endswith("3 documents, 3 chunks, 2 skipped, 1 failed")
    report = err.getvalue().splitlines()
    assert f"failed: {tmp_path / 'empty.md'}: empty.md is empty" in report
    assert any(line.startswith(f"skipped: {tmp_path / 'clip.mp4'}: clip.mp4: unsupported file type") for line in report)
    assert f"skipped: {tmp_path / '.DS_Store'}: a hidden file" in report
    docs = dict(Document.objects.values_list("external_id", "title"))
    assert docs == {"notes.txt": "notes", "sub/page.html": "Otter page", "beavers.docx": "beavers"}
    assert "evil" not in Chunk.objects.get(chunk_id="sub/page.html:0").text
    assert AuditEvent.objects.filter(actor="cli").count() == 3


def test_ingest_command_makes_a_passage_per_slide(db: None, tmp_path: Path) -> None:
    make_tenant("acme")
    (tmp_path / "induction.pptx").write_bytes(make_deck(FOUR_SLIDES))
    out = io.StringIO()
    call_command("ingest", str(tmp_path), "--tenant", "acme", stdout=out, stderr=io.StringIO())
    assert out.getvalue().strip().endswith("1 documents, 4 chunks, 0 skipped, 0 failed")
    texts = list(Chunk.objects.order_by("ordinal").values_list("text", flat=True))
    assert texts == [f"Slide {n}: {title}\n{body}" for n, (title, body) in enumerate(FOUR_SLIDES, 1)]


def test_ingest_command_gives_every_file_its_own_document_whatever_its_name_and_a_rerun_versions_them(db: None, tmp_path: Path) -> None:
    """Issue 30: file names in other scripts, with accents, or differing only in punctuation stay apart."""
    make_tenant("acme")
    texts = {
        "咖啡指南.md": "Espresso wants finely ground beans.", "日本茶.md": "Sencha is steamed green tea.",
        "café.txt": "The corner cafe opens at seven.", "cafe.txt": "A plain ASCII cafe file.",
        "a b.txt": "Spaces in the name.", "a-b.txt": "Dashes in the name.", "茶/笔记.txt": "Notes in a tea folder.",
    }
    for name, text in texts.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    for run in (1, 2):
        out = io.StringIO()
        call_command("ingest", str(tmp_path), "--tenant", "acme", stdout=out, stderr=io.StringIO())
        assert out.getvalue().strip().endswith(f"{len(texts)} documents, {len(texts)} chunks, 0 skipped, 0 failed")
        documents = list(Document.objects.all())
        # Every file is its own document (found again by a re-run: version 2), its text intact.
        assert sorted((d.uri, d.version, d.text) for d in documents) == sorted(((tmp_path / n).as_uri(), run, t) for n, t in texts.items())
    assert all(d.metadata["source_path"] == unquote(d.uri).removeprefix(tmp_path.as_uri() + "/") for d in documents)
    ids = {d.metadata["source_path"]: d.external_id for d in documents}
    assert len(set(ids.values())) == len(texts)
    # The first in path order keeps the readable id; the other of the same readable id gets the name's hash.
    assert ids["cafe.txt"] == "cafe.txt" and ids["a b.txt"] == "a-b.txt"
    assert ids["café.txt"].startswith("cafe-") and ids["a-b.txt"].startswith("a-b-") and ids["茶/笔记.txt"].endswith(".txt")
    assert not {ids["咖啡指南.md"], ids["日本茶.md"]} & {"md"}


def test_ingest_command_finds_the_documents_an_earlier_run_indexed_and_versions_them(db: None, tmp_path: Path) -> None:
    from knowledge import rag
    from knowledge.services.documents import document_ingest
    from tests.embedders import BagOfWordsEmbedder

    tenant = make_tenant("acme")
    (tmp_path / "notes.txt").write_text("New notes.")
    (tmp_path / "café.txt").write_text("New cafe.")
    # What a run before metadata.source_path indexed: ids by the earlier rule, the file known by its URI.
    document_ingest(tenant=tenant, actor="cli", embedder=BagOfWordsEmbedder(), documents=[
        rag.RAGDocument(old_id, "Old text.", uri=(tmp_path / name).resolve().as_uri(), metadata={"source_name": name})
        for old_id, name in (("notes.txt", "notes.txt"), ("caf-.txt", "café.txt"))
    ])
    call_command("ingest", str(tmp_path), "--tenant", "acme", stdout=io.StringIO(), stderr=io.StringIO())
    assert sorted(Document.objects.values_list("external_id", "version", "text")) == [("caf-.txt", 2, "New cafe."), ("notes.txt", 2, "New notes.")]


def test_ingest_command_needs_an_existing_tenant(db: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="tenant 'ghost' does not exist"):
        call_command("ingest", str(tmp_path), "--tenant", "ghost")


def write_beir(folder: Path) -> None:
    corpus = [
        {"_id": "d1", "title": "Otters", "text": "Sea otters use rocks as tools to open shellfish."},
        {"_id": "d2", "title": "Beavers", "text": "Beavers build dams from branches and mud across streams."},
        {"_id": "d3", "title": "Owls", "text": "Owls hunt at night with silent flight and sharp hearing."},
        {"_id": "d4", "title": "", "text": ""},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus))
    queries = [{"_id": "q1", "text": "which animal uses tools to crack shells?"},
               {"_id": "q2", "text": "animals that construct dams"},
               {"_id": "q3", "text": "a query without judgements"}]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries))
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")


def test_ingest_beir_command(db: None, tmp_path: Path) -> None:
    make_tenant("beir")
    write_beir(tmp_path)
    out = io.StringIO()
    call_command("ingest_beir", str(tmp_path), "--tenant", "beir", stdout=out, stderr=io.StringIO())
    assert out.getvalue().strip() == "3 documents, 3 chunks"
    assert Document.objects.get(external_id="d1").title == "Otters"


def test_evaluate_prints_json_per_mode_and_reuses_embeddings(db: None, tmp_path: Path) -> None:
    write_beir(tmp_path)
    out = io.StringIO()
    call_command("evaluate", str(tmp_path), "--tenant", "evalset", "--json", stdout=out)
    report = json.loads(out.getvalue())
    # Hybrid mode is reported for both fusions: RRF as "hybrid", normalised score fusion as "hybrid+score".
    assert report["dataset"] == tmp_path.name and set(report["modes"]) == {"keyword", "semantic", "hybrid", "hybrid+score"}
    assert report["fusion_weight"] == 1.5 and report["embedding_model"] == "local/bge-small-en-v1.5-int8"
    for mode, figures in report["modes"].items():
        assert figures["queries"] == 2
        assert set(figures) == {"ndcg@10", "recall@5", "recall@10", "recall@100", "all@10", "p50_ms", "p95_ms", "queries"}
        assert figures["recall@100"] == 1.0, mode  # three documents: everything relevant is retrieved
    assert report["modes"]["semantic"]["ndcg@10"] == 1.0
    chunks_before = list(Chunk.objects.values_list("id", flat=True))
    call_command("evaluate", str(tmp_path), "--tenant", "evalset", "--modes", "keyword", "--json", stdout=io.StringIO())
    assert list(Chunk.objects.values_list("id", flat=True)) == chunks_before, "a re-run does not re-ingest"


def test_evaluate_rejects_unknown_modes_and_missing_files(db: None, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="corpus.jsonl not found"):
        call_command("evaluate", str(tmp_path), "--tenant", "x")
    write_beir(tmp_path)
    with pytest.raises(CommandError, match="must be one of keyword, semantic, hybrid"):
        call_command("evaluate", str(tmp_path), "--tenant", "x", "--modes", "keyword,fuzzy")
    with pytest.raises(CommandError, match="--fusions: must be one of rrf, score"):
        call_command("evaluate", str(tmp_path), "--tenant", "x", "--fusions", "rrf,borda")
    with pytest.raises(CommandError, match="--fusion-weight: must be a number between 0 and 100"):
        call_command("evaluate", str(tmp_path), "--tenant", "x", "--fusion-weight", "-1")


def test_demo_corpus_answers_questions_about_quarry(db: None) -> None:
    from asgiref.sync import async_to_sync

    from knowledge import rag

    tenant = make_tenant("DEFAULT")
    assert demo_corpus_ingest(tenant=tenant) >= 5
    hits = async_to_sync(rag.tenant_service(tenant.slug).search)("How can I add files to the knowledge base?")
    assert hits[0].chunk.document_id == "demo/uploading-documents"
    again = demo_corpus_ingest(tenant=tenant)  # what every `make run` does: nothing changed, no new versions
    assert Document.objects.filter(tenant=tenant, version=1).count() == 5 and again >= 5
    Document.objects.filter(tenant=tenant, external_id="demo/search-modes").update(title="Edited by hand")
    demo_corpus_ingest(tenant=tenant)  # a demo document that differs from its file is indexed again
    assert dict(Document.objects.filter(tenant=tenant).values_list("external_id", "version"))["demo/search-modes"] == 2
