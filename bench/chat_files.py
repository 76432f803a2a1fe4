"""What attached files cost chat retrieval, as JSON.

    .venv/bin/python bench/chat_files.py [--chunks 2000] [--file-chunks 200] [--queries 100]

Indexes ``--chunks`` chunks of real scientific text (SciFact windows, perturbed real embeddings as in
bench/search_latency.py) into a throwaway tenant, and ``--file-chunks`` more into the private store of
one of its conversations (as the document worker lands an attached file's passages), then times
``chat.retrieval.retrieve`` for ``--queries`` questions (each embedded by the local model, as in chat):
the knowledge base alone (a conversation without files), the knowledge base and the files fused by
RRF (the default once a file is attached), and the files alone (``sources: files``). Runs against the
configured database (migrated); the tenant, its conversation and the store are deleted afterwards.
"""

from __future__ import annotations

import argparse
import time

from _common import bench_tenant, emit, index_perturbed_corpus, passages, setup_django, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--file-chunks", type=int, default=200)
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    setup_django()

    from asgiref.sync import async_to_sync

    from chat.files.services import _store_create, session_files_drop
    from chat.models import ChatSession
    from chat.retrieval import FileScope, RetrievalOptions, retrieve
    from knowledge import rag
    from knowledge.models import Chunk

    with bench_tenant("bench-chat-files") as tenant:
        index_perturbed_corpus(tenant.slug, args.chunks, min(args.chunks, 500), seed=31)
        session = ChatSession.objects.create(tenant=tenant, principal="bench")
        store = _store_create(session)
        texts = passages(args.file_chunks, words_per=120, seed=77)
        service = rag.postgres(rag.default_embedder(), namespace=store.slug)
        async_to_sync(service.ingest)([rag.RAGDocument("file-00000000000000aa", "\n\n".join(texts), metadata={"file_id": "file-00000000000000aa"})])
        questions = [" ".join(p.split()[:12]) for p in passages(args.queries, words_per=40, seed=5)]

        def timed(scope: FileScope) -> tuple[dict[str, float] | None, float]:
            times, found = [], 0
            async_to_sync(retrieve)(tenant=tenant, prompt=questions[0], options=RetrievalOptions(files=scope))  # warm the embedder and caches
            for question in questions:
                started = time.perf_counter()
                hits, _ = async_to_sync(retrieve)(tenant=tenant, prompt=question, options=RetrievalOptions(files=scope))
                times.append(1000 * (time.perf_counter() - started))
                found += sum(1 for h in hits if h.chunk.document_id.startswith("file-"))
            return summary(times), round(found / len(questions), 2)

        knowledge, _ = timed(FileScope(None))
        fused, fused_file_hits = timed(FileScope(store.slug))
        only_files, _ = timed(FileScope(store.slug, "files"))
        file_chunks = Chunk.objects.filter(tenant=store).count()
        session_files_drop(session=session, actor="bench")
    emit({
        "chunks": args.chunks, "file_chunks": file_chunks, "queries": args.queries,
        "knowledge_base_only": knowledge, "knowledge_base_and_files_rrf": fused, "files_only": only_files,
        "file_passages_per_answer_fused": fused_file_hits,
    })


if __name__ == "__main__":
    main()
