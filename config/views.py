"""Health endpoints, and the error pages: JSON in the API's error shape under /v1/, HTML elsewhere.

Django calls the error handlers (``handler400`` ... ``handler500`` in config/urls.py) for what
no view answered: an unknown URL, a disallowed host, a failed CSRF check, or an exception raised
in a middleware. Under /v1/ every response is JSON, these included.
"""

from __future__ import annotations

import logging
import sys

from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import defaults
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from config.db import database_error_kind
from config.middleware import API_PREFIX, database_error_response, error_body, internal_error_response
from config.uploads import UploadTooLarge

logger = logging.getLogger(__name__)


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        kind = database_error_kind(exc) or "unavailable"
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if kind == "overloaded":
            return JsonResponse({"status": "overloaded", "database": "busy", "detail": detail}, status=503)
        return JsonResponse({"status": "unavailable", "database": "unreachable", "detail": detail}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})


def _api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _json(status: int, code: str, detail: str) -> JsonResponse:
    response = JsonResponse(error_body(code, detail), status=status)
    response["Cache-Control"] = "no-store"
    return response


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    if isinstance(exception, UploadTooLarge):
        # Raised while a middleware (the CSRF check) read the form: the admin's uploads.
        if _api(request):
            return _json(413, "request_too_large", exception.message)
        return render(request, "413.html", {"detail": exception.message}, status=413)
    if _api(request):
        return _json(400, "bad_request", "The request could not be understood (a malformed request or a host this server does not serve).")
    return defaults.bad_request(request, exception)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _json(403, "permission_denied", str(exception) or "You do not have permission to do this.")
    return defaults.permission_denied(request, exception)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _json(404, "not_found", "There is no such endpoint. The API is described at /v1/schema.")
    return defaults.page_not_found(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    """Called by Django inside its exception handling, so the exception is at hand."""
    exc = sys.exc_info()[1]
    if exc is not None and isinstance(exc, DatabaseError):
        response = database_error_response(exc)
        if response is not None:
            return response
    if _api(request):
        return internal_error_response(request)
    return defaults.server_error(request)
