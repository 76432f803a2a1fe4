"""The PostgreSQL backend, built on the Django models (storage comes from Django's settings).

One file per question:

- ``facade``: ``PostgresBackend``, the seed's six methods and the optional capabilities the service uses;
- ``writes``: whole-document writes and deletions in one transaction, with statistics and postings;
- ``plan``: which search statement answers a query (exact or ANN, postings or tsvectors) and the fallback;
- ``sql``: the search statements themselves; ``bm25``: BM25F's constants and formula (impact and scoring);
- ``binary_copy``: storing chunk rows by binary COPY; ``namespaces``: a namespace's tenant;
- ``maintenance``: the backlog, model moves, search languages, statistics and graph rebuilds (through
  the backend's ``index_hook``), as functions the services call.

The knowledge graph stands above this package: its reads (``knowledge.graph.service``) run on the
backend, and its writes come in as the backend's ``index_hook`` (``knowledge.rag.hooks``).

A chunk is searchable the moment its transaction commits; its postings and HNSW entry may come
later (the indexing backlog, see ``writes``), and search scores such chunks exactly meanwhile.
"""

from __future__ import annotations

from knowledge.rag.backends.postgres.facade import EXACT_MAX_CHUNKS, INDEX_BATCH_CHUNKS, INLINE_INDEX_MAX_CHUNKS, PostgresBackend

__all__ = ["EXACT_MAX_CHUNKS", "INDEX_BATCH_CHUNKS", "INLINE_INDEX_MAX_CHUNKS", "PostgresBackend"]
