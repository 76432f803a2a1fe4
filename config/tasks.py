"""Tasks that belong to no app."""

from __future__ import annotations


def worker_ping(value: str) -> str:
    """Return ``value``: proves a worker picked a task off the broker and stored its result."""
    return value


def worker_niceness() -> int:
    """This worker process's niceness (``QUARRY_WORKER_NICE`` is applied when it starts)."""
    import os

    return os.nice(0)
