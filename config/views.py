"""Health endpoints, the site icon, Redoc's script, and the error pages: JSON in the API's error shape under /v1/, HTML elsewhere.

Django calls the error handlers (``handler400`` ... ``handler500`` in config/urls.py) for what
no view answered: an unknown URL, a disallowed host, or an exception raised in a view or a
middleware; ``csrf_failure`` is its ``CSRF_FAILURE_VIEW``. With DEBUG on Django shows its
technical pages instead, so ``config.middleware.ErrorHandlersMiddleware`` calls these handlers
itself: both modes answer alike. Under /v1/ every response is JSON, these included; pages get
Quarry's templates (templates/400.html ... 500.html), styled by the site's stylesheet under the
strict Content-Security-Policy, never Django's error pages, which style themselves inline.
"""

from __future__ import annotations

import functools
import logging
import sys

from django.contrib.staticfiles import finders
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.shortcuts import render
from django.template import loader
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_safe

from common import replicas
from common.db import database_error_kind
from config.middleware import API_PREFIX, database_error_response, error_body, internal_error_response, request_id_of
from common.uploads import UploadTooLarge

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
    body: dict[str, object] = {"status": "ok", "database": "ok"}
    if replicas.replica_aliases():
        # Informational: reads fall back to the primary, so a replica down or behind never makes this process unready.
        body["replicas"] = replicas.status()
    return JsonResponse(body)


@require_safe
def favicon(request: HttpRequest) -> HttpResponse:
    """The product's icon for browsers that ask for /favicon.ico (a page that names no icon: JSON in a tab)."""
    return HttpResponsePermanentRedirect(static("chat/favicon.svg"))


# Redoc's footer draws its maker's logo from this address, which no option changes; the pages' policy
# refuses it (a console error on every load) and Quarry loads nothing from other sites.
REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOC_LOGO_URL = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_script() -> bytes:
    """The sidecar's Redoc bundle with the footer's logo served by us (read once per process)."""
    path = finders.find(REDOC_BUNDLE)
    if not path:
        raise FileNotFoundError(f"{REDOC_BUNDLE} is missing: is drf-spectacular-sidecar installed?")
    with open(path, "rb") as bundle:
        return bundle.read().replace(REDOC_LOGO_URL, static("docs/redoc-logo.svg").encode())


@require_safe
def redoc_script(request: HttpRequest) -> HttpResponse:
    """Redoc for /v1/redoc (templates/drf_spectacular/redoc.html), its logo from this site."""
    response = HttpResponse(_redoc_script(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=3600"
    return response


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
    return render(request, "400.html", status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _json(403, "permission_denied", str(exception) or "You do not have permission to do this.")
    return render(request, "403.html", {"detail": str(exception)}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a form posted without its token (an old tab, or cookies blocked)."""
    if _api(request):
        return _json(403, "permission_denied", f"CSRF Failed: {reason}")
    detail = "This form has expired or your browser did not send its security cookie: reload the page and try again."
    return render(request, "403.html", {"detail": detail}, status=403)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    if _api(request):
        return _json(404, "not_found", "There is no such endpoint. The API is described at /v1/schema.")
    return render(request, "404.html", status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """Called by Django inside its exception handling, so the exception is at hand."""
    exc = sys.exc_info()[1]
    if exc is not None and isinstance(exc, DatabaseError):
        response = database_error_response(exc)
        if response is not None:
            return response
    if _api(request):
        return internal_error_response(request)
    # Without the request's context processors: they read the session and the user, which is
    # how a broken database or session store would turn this page into a second error.
    return HttpResponse(loader.render_to_string("500.html", {"request_id": request_id_of(request)}), status=500)
