"""Exceptions of the RAG API. Every message names the field and the bound it broke."""

from __future__ import annotations


class RAGError(Exception):
    """Base class for every error raised by ``knowledge.rag``."""


class RAGValidationError(RAGError, ValueError):
    """A value is out of bounds or malformed. ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class RAGTypeError(RAGError, TypeError):
    """A value has the wrong type (e.g. nested metadata). ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class EmbedderError(RAGError):
    """The embedder failed or returned something other than one finite vector per input."""


class BackendContractError(RAGError):
    """A backend returned results that break the contract (namespace, order, bounds)."""


class CapacityError(RAGError):
    """A bounded backend is full."""


class ConfigurationError(RAGError):
    """The service cannot do this as configured (e.g. semantic search without an embedder)."""


class NamespaceNotFound(RAGError):
    """The namespace does not exist in this backend (for Postgres: no tenant with that slug)."""


class EmbeddingModelChanged(RAGError):
    """The namespace's vectors are of another embedding model than the ones being written.

    A namespace holds vectors of one model (searches compare a query only with vectors of its
    own model). Raised when an ingest embedded with ``written`` while the namespace is on
    ``current``: typically ``manage.py reembed`` switched it meanwhile. Retrying with the
    namespace's embedder succeeds; nothing was written.
    """

    def __init__(self, namespace: str, *, current: str, written: str) -> None:
        super().__init__(
            f"namespace {namespace!r} holds vectors of {current}, not {written}: embed with {current} "
            "(or move the namespace with manage.py reembed)"
        )
        self.namespace = namespace
        self.current = current
        self.written = written
