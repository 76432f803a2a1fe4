"""The seed's samples run over each backend: ``memory``, ``postgres`` (Quarry's, on the test
database; as in the seed, a namespace needs no setup: the first write creates its tenant) and
``custom`` (the seed's "Build another backend")."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from knowledge.rag import RAGService, rag
from tests.embedders import BagOfWordsEmbedder
from tests.seed.company_search import CompanySearchBackend
from tests.seed.host import context
from tests.seed.samples import Embeddings
BACKENDS = ["memory", "postgres", "custom"]


class Store:
    """Builds services as the seed's samples do, over the backend under test."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.custom = CompanySearchBackend()
        self._memory: Any = None

    def __call__(self, **options: Any) -> RAGService:
        """``rag.memory(...)``, ``rag.postgres(...)`` or ``rag.service(CompanySearchBackend(), ...)``
        with the sample's options; the services of one test share one store."""
        if self.kind == "memory":
            if self._memory is None:
                service = rag.memory(**options)
                self._memory = service.backend
                return service
            return rag.service(self._memory, **options)
        if self.kind == "postgres":
            return rag.postgres(**options)
        return rag.service(self.custom, **options)


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, db: None) -> Store:
    """Every kind runs in a test transaction (the session must see ``db`` to create the test database)."""
    return Store(request.param)


@pytest.fixture
def client() -> BagOfWordsEmbedder:
    """The embedding client the seed's ``Embeddings`` adapts: ``await client.embed(texts)``."""
    return BagOfWordsEmbedder(dimension=64)


@pytest.fixture
def embeddings(client: BagOfWordsEmbedder) -> Embeddings:
    return Embeddings(client)


@pytest.fixture(autouse=True)
def _fresh_host() -> Iterator[None]:
    context.reset()
    yield
    context.reset()


def run(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run a coroutine function from a synchronous test (so PostgreSQL work joins the test's transaction)."""
    return async_to_sync(function)(*args, **kwargs)
