"""The knowledge graph (DESIGN 3 and 5): entities, mentions and relations per tenant, extracted
from chunks in the transactions that change them, and the reads that use them.

- ``extract``: offline extraction from one chunk (titles, headings, names, acronyms, sentences).
- ``llm``: the optional LLM extractor's prompt, answers and cache.
- ``store``: ``GraphWriter``, the graph side of the chunk transactions, and the rebuild.
- ``search``: the graph leg of hybrid search, triplets, neighbours, pictures.

Below ``knowledge.rag``: the PostgreSQL backend calls it; everything else reaches the graph
through the RAG API (``RAGService.graph_search`` and friends).
"""
