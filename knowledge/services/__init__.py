"""Writes and workflows of the knowledge base: the one door every caller writes through.

- ``documents``: requests (JSON ingest, uploads, edits, re-index, retry, cancel, delete) from the
  API, the admin, the commands and the demo corpus alike.
- ``processing``: the background worker that extracts, chunks, embeds and swaps a document's chunks.
- ``reclaim``: the periodic repair of work whose worker stopped.
- ``indexing``: the background indexer of large ingestions (postings, HNSW).
- ``state``: the transitions of a document's status, each a conditional UPDATE, and task enqueueing.
"""
