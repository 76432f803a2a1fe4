"""Health endpoints: liveness (the process answers) and readiness (the database answers)."""

from __future__ import annotations

from django.db import DatabaseError, connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET


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
        return JsonResponse({"status": "unavailable", "database": "unreachable", "detail": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}, status=503)
    return JsonResponse({"status": "ok", "database": "ok"})
