"""Tasks that belong to no app."""

from __future__ import annotations


def worker_ping(value: str) -> str:
    """Return ``value``: proves a worker picked a task off the broker and stored its result."""
    return value
