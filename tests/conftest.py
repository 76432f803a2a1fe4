"""Shared fixtures: two tenants and the owner / teammate / outsider trio (STYLE 11)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dj_database_url
from django.conf import settings
from django.db import connections

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from accounts.models import Role, Tenant
from tests.chat_support import index_world, write_catalog
from tests.factories import make_member, make_tenant, make_token
from tests.fake_openai import FakeOpenAI, fake_openai_server
from tests.servers import postgres_available

# The system PostgreSQL without pgvector (127.0.0.1:5432 on this machine kind):
# the backend tests run against it too, as database alias "stock", so the
# plain-SQL path is exercised exactly like the pgvector one.
STOCK_DATABASE_URL = os.environ.get("QUARRY_STOCK_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
STOCK_AVAILABLE = postgres_available(STOCK_DATABASE_URL)
# The stock server is shared by every checkout on the machine: a name per checkout keeps two
# test runs (two clones, two worktrees) from creating and dropping each other's database.
STOCK_TEST_DATABASE = "test_quarry_stock_" + hashlib.sha1(str(Path(__file__).resolve().parent).encode()).hexdigest()[:8]


def pytest_configure(config: pytest.Config) -> None:
    if STOCK_AVAILABLE:
        # Django's ConnectionHandler already holds (and shares) settings.DATABASES with its
        # defaults filled in; fill them for the new alias the same way before adding it.
        stock = {**dj_database_url.parse(STOCK_DATABASE_URL), "TEST": {"NAME": STOCK_TEST_DATABASE}}
        settings.DATABASES["stock"] = connections.configure_settings({"default": stock})["default"]


def backend_setting(**options: Any) -> dict[str, Any]:
    """``settings.QUARRY_RAG_BACKEND`` as configured, with some of its options changed."""
    configured = settings.QUARRY_RAG_BACKEND
    return {"CLASS": configured["CLASS"], "OPTIONS": {**configured["OPTIONS"], **options}}


@pytest.fixture(scope="session", autouse=True)
def warm_embedding_model() -> None:
    """The local embedding model, loaded once before the first test (the model's session is per process).

    Why: a test that processes a document inside its own transaction (``process_document`` in a
    ``django_db`` test) has the lease renewed from the heartbeat's own connection, which cannot see the
    transaction's rows; a first embedding slower than one beat (loading the model on a loaded machine)
    then reads as a lost lease and the document stays "processing". Workers never see this: their rows
    are committed. Which test comes first depends on the selection, so the model is warm for all of them.
    """
    from asgiref.sync import async_to_sync

    from knowledge import rag

    async_to_sync(rag.default_embedder().embed)(["warm up"])


@dataclass
class World:
    """``acme`` is ours; ``globex`` belongs to someone else.

    owner: admin of acme; editor: editor of acme; teammate: reader of acme;
    outsider: admin of globex only.
    """

    acme: Tenant
    globex: Tenant
    owner: User
    editor: User
    teammate: User
    outsider: User

    def client(self, user: User | None = None, *, tenant: Tenant | None = None, role: Role | str | None = None) -> APIClient:
        """An API client carrying a bearer token of ``user`` (anonymous when None)."""
        client = APIClient()
        if user is not None:
            tenant = tenant or (self.globex if user == self.outsider else self.acme)
            client.credentials(HTTP_AUTHORIZATION=f"Bearer {make_token(tenant, user, role)}")
        return client


@pytest.fixture
def world(db: None) -> World:
    acme, globex = make_tenant("acme"), make_tenant("globex")
    return World(
        acme=acme,
        globex=globex,
        owner=make_member(acme, Role.ADMIN, "owner"),
        editor=make_member(acme, Role.EDITOR, "editor"),
        teammate=make_member(acme, Role.READER, "teammate"),
        outsider=make_member(globex, Role.ADMIN, "outsider"),
    )


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """The OpenAI-compatible model server on 127.0.0.1 (modules that share one override this)."""
    with fake_openai_server() as server:
        yield server


@pytest.fixture
def model_world(world: World, fake: FakeOpenAI, tmp_path: Path, settings: Any) -> World:
    """``world`` with documents indexed in acme and globex, and the chat catalog on the fake server."""
    index_world(world)
    settings.QUARRY_MODEL_CONFIG_PATH = write_catalog(tmp_path / "models.yaml", fake.base_url)
    return world


@pytest.fixture(scope="session")
def streaming_replica(django_db_setup: None, django_db_blocker: Any) -> Iterator[Any]:
    """One real streaming replica of the test database's server for the whole session (tests/replica.py)."""
    from tests.replica import streaming_replica_of_test_database

    with django_db_blocker.unblock(), streaming_replica_of_test_database() as replica:
        yield replica
