"""Backends standing in for a datastore at the far side of the network (configured through
``settings.QUARRY_RAG_BACKEND``, never by patching Quarry's own backend)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import OperationalError


class UnreachableDatabase:
    """A RAG backend (the seed's six methods) whose server went away: every call fails as a dropped connection does."""

    def _gone(self) -> OperationalError:
        return OperationalError("server closed the connection unexpectedly")

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def replace(self, namespace: str, document_ids: Sequence[str], chunks: Sequence[Any]) -> None:
        raise self._gone()

    async def delete(self, namespace: str, document_ids: Sequence[str]) -> None:
        raise self._gone()

    async def fetch(self, namespace: str, chunk_ids: Sequence[str]) -> list[Any]:
        raise self._gone()

    async def search(self, query: Any) -> list[Any]:
        raise self._gone()


class BuggyDriver(UnreachableDatabase):
    """A datastore whose driver fails in a way nobody planned for: what a bug looks like from the outside."""

    async def search(self, query: Any) -> list[Any]:
        raise ZeroDivisionError("the driver tripped over itself")
