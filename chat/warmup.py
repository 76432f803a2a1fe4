"""Warm-up: what the first requests of a fresh web process would otherwise wait for, loaded in the background.

Nothing heavy is imported while a process starts (issue 31: every ``manage.py`` command and
``make run`` would pay for it), so the first chat answer of a web process would import litellm
and the offline model first (2 s on an idle 2-core machine, 5 s on a busy one), its first
search would load the embedding model (half a second), and its first ``/mcp`` request would
import the MCP SDK (0.5-1.3 s). The web server's lifespan (``config.asgi``) calls
``start_warm_up()`` once the server is up and answering; the loading then runs in a daemon
thread while the first requests are served. A request that needs a piece before the thread is
done waits for the same import or load (Python's import lock, the embedder's own locks), never
for a second one. ``QUARRY_WARM_UP=0`` turns it off.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

from knowledge.rag import factory

logger = logging.getLogger(__name__)

THREAD_NAME = "quarry-warm-up"


def warm_up() -> None:
    """Import the chat model machinery (litellm, the offline model) and the MCP SDK, and load the configured
    local embedder's model (an optional ``load()``; a provider embedder has nothing to load). Never raises:
    a failure is logged, and the first request that needs the piece meets it again and reports it as usual."""
    try:
        # Imported here: loading them is the point, and only now, after the server answers.
        import chat.llm.offline  # noqa: F401  (imports litellm, its loggers capped first)
        import chat.mcp.http  # noqa: F401  (the MCP SDK, which config.asgi imports on the first /mcp request)

        embedder = factory.default_embedder()
        load = getattr(embedder, "load", None)
        if callable(load):
            load()  # the model every search embeds its query with: half a second on first use
    except Exception:
        logger.warning("warm-up: loading the chat model libraries, the MCP SDK or the embedding model failed; the "
                       "first request that needs them will try again", exc_info=True)


def start_warm_up() -> threading.Thread | None:
    """Run ``warm_up`` in a daemon thread unless ``QUARRY_WARM_UP`` is off; the thread, or None."""
    if not settings.QUARRY_WARM_UP:
        return None
    thread = threading.Thread(target=warm_up, name=THREAD_NAME, daemon=True)
    thread.start()
    return thread
