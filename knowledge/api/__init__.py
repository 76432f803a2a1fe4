"""REST endpoints for the knowledge base: search and fetch (readers); documents (readers read, editors write).

Request bodies are closed (a field an endpoint does not declare is a 400) and typed as sent
(``common.serializers``); the bounds are the RAG API's own (``knowledge.rag``), checked once,
with its messages, and stated in the OpenAPI schema as JSON Schema (``fields``). One module per
resource: ``search`` (search, graph picture, fetch) and ``documents``; the URLs are in config.urls.
"""

from knowledge.api.documents import DocumentDetailApi, DocumentListApi, DocumentUploadApi
from knowledge.api.search import ChunkFetchApi, GraphPictureApi, SearchApi

__all__ = ["ChunkFetchApi", "DocumentDetailApi", "DocumentListApi", "DocumentUploadApi", "GraphPictureApi", "SearchApi"]
