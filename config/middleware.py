"""Project-wide middleware: request ids, and database trouble or bugs as the API's JSON error shape.

- ``RequestIdMiddleware`` (first): every request gets an id (the caller's ``X-Request-ID`` when it
  is a plain token, else a new one), echoed in the ``X-Request-ID`` response header. An unhandled
  exception under ``/v1/`` is logged with it and answered ``500 {"error": "internal_error",
  "detail", "request_id"}``: a 500 only ever means a bug, and the id finds its traceback.
- ``DatabaseUnavailableMiddleware``: a database that cannot be reached is ``503
  database_unavailable``; one whose connections are all busy is ``503 overloaded``; both with
  ``Retry-After``, for pages and the admin too. DRF views get the same answers from
  ``config.errors.api_exception_handler``.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.deprecation import MiddlewareMixin

from config.db import database_error_kind

logger = logging.getLogger(__name__)

API_PREFIX = "/v1/"
REQUEST_ID_HEADER = "X-Request-ID"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{8,64}")

# The sentences of "database_unavailable" and "overloaded", HTTP or WebSocket (chat.events uses them too).
DATABASE_UNAVAILABLE = "The database is not reachable. Try again shortly."
OVERLOADED = "The server is busy: every database connection is in use. Try again shortly."
DATABASE_ERRORS: dict[str, tuple[str, str]] = {
    "unavailable": ("database_unavailable", DATABASE_UNAVAILABLE),
    "overloaded": ("overloaded", OVERLOADED),
}
# Seconds a client should wait: a restart takes a few; a busy pool frees up within its timeout.
RETRY_AFTER = {"unavailable": "5", "overloaded": "2"}


def error_body(code: str, detail: str, **extra: Any) -> dict[str, Any]:
    """The project's error shape (config/errors.py)."""
    return {"error": code, "detail": detail, **extra}


def request_id_of(request: HttpRequest) -> str:
    return getattr(request, "request_id", None) or "-"


def is_database_unavailable(exc: BaseException) -> bool:
    """True for errors that mean "the server cannot be reached (or is too busy)", not "this query is wrong"."""
    return database_error_kind(exc) is not None


def database_error_response(exc: BaseException) -> JsonResponse | None:
    """503 ``database_unavailable`` or ``overloaded`` for an error about reaching the database, else None."""
    kind = database_error_kind(exc)
    return None if kind is None else database_error_response_for(kind)


def database_error_response_for(kind: str) -> JsonResponse:
    code, detail = DATABASE_ERRORS[kind]
    response = JsonResponse(error_body(code, detail), status=503)
    response["Retry-After"] = RETRY_AFTER[kind]
    response["Cache-Control"] = "no-store"
    return response


def internal_error_response(request: HttpRequest) -> JsonResponse:
    response = JsonResponse(error_body(
        "internal_error", "Something went wrong on our side; it has been logged. Quote the request id when reporting it.",
        request_id=request_id_of(request),
    ), status=500)
    response["Cache-Control"] = "no-store"
    return response


class RequestIdMiddleware(MiddlewareMixin):
    def process_request(self, request: HttpRequest) -> None:
        offered = request.headers.get(REQUEST_ID_HEADER, "")
        request.request_id = offered if _CLIENT_REQUEST_ID.fullmatch(offered) else uuid.uuid4().hex  # type: ignore[attr-defined]

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        response.setdefault(REQUEST_ID_HEADER, request_id_of(request))
        return response

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not request.path.startswith(API_PREFIX):
            return None  # pages: Django's handler500 (config.views.server_error)
        logger.error("unhandled error in %s %s [request %s]", request.method, request.path, request_id_of(request),
                     exc_info=exception)
        return internal_error_response(request)


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, DatabaseError):
            return None
        response = database_error_response(exception)
        if response is not None:
            logger.error("database %s during %s %s [request %s]: %s", database_error_kind(exception), request.method,
                         request.path, request_id_of(request), str(exception).splitlines()[0] if str(exception) else "")
        return response
