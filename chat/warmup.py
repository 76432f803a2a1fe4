"""Warm-up: what the first chat answer of a fresh web process would otherwise wait for, loaded in the background.

Nothing heavy is imported while a process starts (issue 31: every ``manage.py`` command and
``make run`` would pay for it), so the first answer of a web process would import litellm
and the offline model first: 2 s on an idle 2-core machine, 5 s on a busy one. The web
server's lifespan (``config.asgi``) calls ``start_warm_up()`` once the server is up and
answering; the import then runs in a daemon thread while the first requests are served. A
request that needs litellm before the thread is done waits for the same import (Python's
import lock), never for a second one. ``QUARRY_WARM_UP=0`` turns it off.
"""

from __future__ import annotations

import logging
import threading

from django.conf import settings

logger = logging.getLogger(__name__)

THREAD_NAME = "quarry-warm-up"


def warm_up() -> None:
    """Import the chat model machinery (litellm, the offline model). Never raises: a failure is logged,
    and the first chat request meets it again and reports it as it always does."""
    try:
        # Imported here: loading them is the point, and only now, after the server answers.
        import chat.llm.offline  # noqa: F401  (imports litellm, its loggers capped first)
    except Exception:
        logger.warning("warm-up: loading the chat model libraries failed; the first chat request will try again",
                       exc_info=True)


def start_warm_up() -> threading.Thread | None:
    """Run ``warm_up`` in a daemon thread unless ``QUARRY_WARM_UP`` is off; the thread, or None."""
    if not settings.QUARRY_WARM_UP:
        return None
    thread = threading.Thread(target=warm_up, name=THREAD_NAME, daemon=True)
    thread.start()
    return thread
