"""Project-wide middleware: request ids, and database trouble or bugs as the API's JSON error shape.

- ``RequestIdMiddleware`` (first): every request gets an id (the caller's ``X-Request-ID`` when it
  is a plain token, else a new one), echoed in the ``X-Request-ID`` response header. An unhandled
  exception under ``/v1/`` is logged with it and answered ``500 {"error": "internal_error",
  "detail", "request_id"}``: a 500 only ever means a bug, and the id finds its traceback.
- ``ErrorHandlersMiddleware``: an unknown URL, a disallowed ``Host``, a view's ``Http404``,
  ``PermissionDenied`` or bad request, and (with DEBUG on) a bug in a page are answered by the
  error handlers of config/urls.py in every mode; with DEBUG on, Django would show its technical
  pages instead: HTML under /v1/ too, and unstyled under the pages' Content-Security-Policy.
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

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import BadRequest, DisallowedHost, PermissionDenied, SuspiciousOperation
from django.db import DatabaseError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import Resolver404, get_resolver, get_urlconf, is_valid_path
from django.utils.deprecation import MiddlewareMixin

from common import replicas
from common.db import DATABASE_ERRORS, RETRY_AFTER, database_error_kind

logger = logging.getLogger(__name__)

API_PREFIX = "/v1/"
REQUEST_ID_HEADER = "X-Request-ID"
_CLIENT_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{8,64}")



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


def _handled(request: HttpRequest, status: int, exception: Exception | None = None) -> HttpResponse:
    """What the ``handler<status>`` of the URL map answers, as Django calls it with DEBUG off."""
    handler = get_resolver(getattr(request, "urlconf", None) or get_urlconf()).resolve_error_handler(status)
    return handler(request) if status == 500 else handler(request, exception=exception)


def _unrouted(request: HttpRequest) -> bool:
    """No URL pattern matches the path, and CommonMiddleware will not redirect it to one with a slash."""
    path, urlconf = request.path_info, getattr(request, "urlconf", None)
    if is_valid_path(path, urlconf):
        return False
    return not (settings.APPEND_SLASH and not path.endswith("/") and is_valid_path(f"{path}/", urlconf))


class ErrorHandlersMiddleware(MiddlewareMixin):
    """The error handlers of config/urls.py answer in every mode, DEBUG included.

    Django turns these cases into its technical pages when DEBUG is on, in the exception
    handling around each middleware, where no middleware can step in afterwards; so this
    one answers them before they are raised (a bad host, an unknown URL) or as a view raises
    them (``process_exception``). With DEBUG off the answers are the same ones Django gives.

    Placed after ContentSecurityPolicyMiddleware (its policy applies to these pages) and before
    every middleware that reads the host (CommonMiddleware, CSRF) or could redirect a path
    (CommonMiddleware's APPEND_SLASH, which ``_unrouted`` leaves alone).
    """

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        try:
            request.get_host()
        except DisallowedHost as exc:
            # Logged as Django logs it, without the traceback: a wrong Host header is the client's mistake.
            logging.getLogger("django.security.DisallowedHost").error(str(exc), extra={"status_code": 400, "request": request})
            return _handled(request, 400, exc)
        if _unrouted(request):
            return _handled(request, 404, Resolver404({"path": request.path_info}))
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, Http404):
            return _handled(request, 404, exception)
        if isinstance(exception, PermissionDenied):
            return _handled(request, 403, exception)
        if isinstance(exception, SuspiciousOperation | BadRequest | MultiPartParserError):
            if isinstance(exception, SuspiciousOperation):
                logging.getLogger(f"django.security.{type(exception).__name__}").error(
                    str(exception), extra={"status_code": 400, "request": request})
            return _handled(request, 400, exception)
        if settings.DEBUG and not request.path.startswith(API_PREFIX):
            # A bug in a page: Django's own handling (DEBUG off) signals, logs the traceback and calls
            # handler500; with DEBUG on it would show the traceback in the page instead. The API's bugs
            # are RequestIdMiddleware's, in both modes.
            signals.got_request_exception.send(sender=None, request=request)
            logging.getLogger("django.request").error("Internal Server Error: %s", request.path, exc_info=exception,
                                                      extra={"status_code": 500, "request": request})
            return _handled(request, 500)
        return None


class ReplicaRoutingMiddleware:
    """Opens each request's replica routing for its principal (``common.replicas``), and pins a principal
    that wrote to the primary afterwards. Installed only with ``DATABASE_REPLICA_URLS``.

    Under ASGI the routing is not closed when the view returns: a streamed answer retrieves while its
    body is sent, in the request's own task, whose context ends with it.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self.__acall__(request)
        routing = replicas.begin(_principal(request))
        try:
            return self.get_response(request)
        finally:
            replicas.finish(routing)
            replicas.clear()  # a sync server's thread serves the next request in this same context

    async def __acall__(self, request: HttpRequest) -> Any:
        routing = replicas.begin(_principal(request))
        response = await self.get_response(request)
        if routing is not None and routing.wrote:
            await sync_to_async(replicas.finish)(routing)
        return response


def _principal(request: HttpRequest) -> str | None:
    return replicas.principal_key(authorization=request.headers.get("Authorization"),
                                  session_key=request.COOKIES.get(settings.SESSION_COOKIE_NAME))
