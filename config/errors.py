"""One JSON error shape for the whole API.

Every error body is ``{"error": <code>, "detail": <sentence>}``, plus ``"fields"``
(``{field: [messages]}``) for validation errors, so a client can always show
``detail`` and a form can always highlight ``fields``.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.db import DatabaseError
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import set_rollback

from common.db import database_error_kind
from common.db import DATABASE_ERRORS, RETRY_AFTER
from common.uploads import UploadTooLarge

logger = logging.getLogger(__name__)


def _flatten(detail: Any) -> dict[str, list[str]]:
    """DRF's nested ValidationError detail -> ``{"a.b": ["message", ...]}``."""
    out: dict[str, list[str]] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                # A list's items (DRF reports them as {index: errors}) read "ids[0]", as the RAG API names them.
                walk(f"{prefix}[{key}]" if isinstance(key, int) and prefix else f"{prefix}.{key}" if prefix else str(key), inner)
        elif isinstance(value, list) and value and not all(isinstance(v, (str, exceptions.ErrorDetail)) for v in value):
            for index, inner in enumerate(value):
                walk(f"{prefix}[{index}]" if prefix else str(index), inner)
        elif isinstance(value, list):
            out.setdefault(prefix or "non_field_errors", []).extend(str(v) for v in value)
        elif value not in (None, ""):
            out.setdefault(prefix or "non_field_errors", []).append(str(value))

    walk("", detail)
    return out


def _summary(fields: dict[str, list[str]]) -> str:
    parts = []
    for field, messages in fields.items():
        joined = " ".join(messages)
        parts.append(joined if field == "non_field_errors" else f"{field}: {joined}")
    return "; ".join(parts) or "Invalid input."


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF exception handler producing the project's error shape."""
    kind = database_error_kind(exc) if isinstance(exc, DatabaseError) else None
    if kind is not None:
        logger.error("database %s: %s", kind, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        set_rollback()
        code, detail = DATABASE_ERRORS[kind]
        return Response({"error": code, "detail": detail}, status=503, headers={"Retry-After": RETRY_AFTER[kind]})
    if isinstance(exc, UploadTooLarge):
        set_rollback()
        return Response({"error": "request_too_large", "detail": exc.message, "fields": {exc.field: [exc.message]}}, status=413)
    if isinstance(exc, TooManyFilesSent | TooManyFieldsSent):
        set_rollback()
        field, limit = ("files", settings.DATA_UPLOAD_MAX_NUMBER_FILES) if isinstance(exc, TooManyFilesSent) else (
            "non_field_errors", settings.DATA_UPLOAD_MAX_NUMBER_FIELDS)
        message = f"At most {limit} {'files' if field == 'files' else 'form fields'} per request."
        return Response({"error": "invalid", "detail": message, "fields": {field: [message]}}, status=400)
    if isinstance(exc, RequestDataTooBig):
        set_rollback()
        return Response({"error": "request_too_large", "detail": f"The request is too large: {exc}"}, status=413)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    if not isinstance(exc, exceptions.APIException):
        return None  # a real bug: let Django log it and answer 500

    headers: dict[str, str] = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header  # type: ignore[attr-defined]
    if getattr(exc, "wait", None) is not None:
        headers["Retry-After"] = str(max(1, math.ceil(exc.wait)))  # type: ignore[attr-defined]
    elif exc.status_code == 429:
        headers["Retry-After"] = "1"

    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        body: dict[str, Any] = {"error": "invalid", "detail": _summary(fields), "fields": fields}
    else:
        detail = exc.detail
        if isinstance(detail, dict):
            message = str(detail.get("detail", detail))
        elif isinstance(detail, list):
            message = " ".join(str(d) for d in detail)
        else:
            message = str(detail)
        code = exc.get_codes() if isinstance(exc.get_codes(), str) else exc.default_code
        body = {"error": code, "detail": message}
    set_rollback()
    return Response(body, status=exc.status_code, headers=headers)
