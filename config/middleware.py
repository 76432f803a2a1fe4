"""Project-wide middleware."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse

logger = logging.getLogger(__name__)

# The sentence of every "database_unavailable" error, HTTP or WebSocket (chat.events uses it too).
DATABASE_UNAVAILABLE = "The database is not reachable. Try again shortly."


def is_database_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "the server cannot be reached", not "this query is wrong"."""
    return isinstance(exc, (OperationalError, InterfaceError))


class DatabaseUnavailableMiddleware:
    """Turn an unreachable database into a 503 with a JSON body, never a stack trace.

    DRF views get the same answer from ``config.errors.api_exception_handler``; this
    covers everything else (admin, pages, session loading).
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, DatabaseError) and is_database_unavailable(exception):
            logger.error("database unavailable during %s %s: %s", request.method, request.path, exception)
            return database_unavailable_response()
        return None


def database_unavailable_response() -> JsonResponse:
    response = JsonResponse({"error": "database_unavailable", "detail": DATABASE_UNAVAILABLE}, status=503)
    response["Retry-After"] = "5"
    return response
