"""Admission to the async endpoints: DRF's access rules for views that DRF does not dispatch.

The completions and resume endpoints are async Django views (a streamed answer
holds no thread while it waits on the model, and a client that disconnects
cancels the generation). Each names an ``AsyncEndpointApi`` subclass with
``@serves``: that class holds the access rules (authenticators, the reader
permission, throttles) and is what drf-spectacular documents. ``admit`` runs
those rules in a worker thread exactly as DRF's dispatch would, resolves the
tenant once, then runs the endpoint's own ``step`` (validate the body, load the
session); any refusal comes back as a rendered response in the project's JSON
error shape.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import TenantContext, resolve_tenant_context
from accounts.permissions import IsTenantReader
from common.serializers import ClosedSerializer, StrictCharField

T = TypeVar("T")
V = TypeVar("V", bound=Callable[..., Any])

# Fields a caller might try in order to steer the model; the server owns all of them.
SERVER_OWNED = frozenset({
    "model", "models", "provider", "api_key", "api_base", "base_url", "headers", "extra_headers", "tools",
    "tool_choice", "functions", "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop",
    "messages", "system", "template", "prompt_template", "fallbacks", "num_retries", "timeout",
})
STEERING_REFUSED = "Not accepted: the server chooses the model, credentials, base URL, headers, tools and sampling."


class AsyncEndpointApi(APIView):
    """Access rules and schema of an endpoint served by an async view (JSON or SSE).

    Only a reader is admitted; refusals are JSON even for a client that accepts
    only text/event-stream. Subclasses document ``post`` with
    ``@extend_schema_view(post=extend_schema(...))``.
    """

    permission_classes = [IsTenantReader]

    def perform_content_negotiation(self, request: Request, force: bool = False) -> tuple[Any, str]:
        return (JSONRenderer(), JSONRenderer.media_type)

    def post(self, request: Request, **kwargs: Any) -> Response:  # pragma: no cover - never dispatched
        """What the schema documents; ``admit`` runs this class's rules and the async view answers."""
        raise exceptions.MethodNotAllowed("POST", detail="Served by an async view.")


SESSION_ID_PATTERN = r"^session-[A-Za-z0-9_-]{1,32}$"
RUN_ID_PATTERN = r"^run-[A-Za-z0-9_-]{1,32}$"
_SESSION_ID = re.compile(SESSION_ID_PATTERN)
_RUN_ID = re.compile(RUN_ID_PATTERN)


def is_session_id(value: object) -> bool:
    """Whether ``value`` could be a session's public id (anything else cannot exist: 404 without a query)."""
    return isinstance(value, str) and bool(_SESSION_ID.fullmatch(value))


def is_run_id(value: object) -> bool:
    return isinstance(value, str) and bool(_RUN_ID.fullmatch(value))


@extend_schema_field({"type": "string", "pattern": SESSION_ID_PATTERN, "maxLength": 40,
                      "description": "A session's id (session-...), as its creation returned it."})
class SessionIdField(StrictCharField):
    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not is_session_id(value):
            raise serializers.ValidationError("Not a session id: session-... as POST /v1/chat/sessions or /v1/agent/sessions returns it.")
        return value


class ClosedInputSerializer(ClosedSerializer):
    """Request bodies of chat and agent: unknown fields are refused like everywhere else, and the
    ones a caller might try in order to steer the model say why (the server chooses them)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            steering = sorted((set(data) - set(self.fields)) & SERVER_OWNED)
            if steering:
                raise serializers.ValidationError({key: [STEERING_REFUSED] for key in steering})
        return super().to_internal_value(data)


def admit(
    api: type[AsyncEndpointApi],
    django_request: HttpRequest,
    step: Callable[..., T],
    **kwargs: Any,
) -> T | HttpResponse:
    """DRF's dispatch up to the handler, then ``step(request, ctx, **kwargs)``; a refusal is a rendered response.

    In order: only POST (405), authenticate, permit, throttle (``APIView.initial``), resolve the tenant
    (``resolve_tenant_context``), then ``step`` with the DRF request, the tenant context and the URL's
    ``kwargs``. An API error raised anywhere (``step`` included) becomes the rendered JSON error response;
    anything else propagates (a bug: 500). Runs synchronously: call it through ``sync_to_async``.
    """
    view = api()
    view.args, view.kwargs = (), kwargs
    request = view.initialize_request(django_request)
    view.request = request
    view.headers = view.default_response_headers
    try:
        if django_request.method != "POST":
            raise exceptions.MethodNotAllowed(django_request.method or "")
        view.initial(request)
        ctx: TenantContext = resolve_tenant_context(request)
        return step(request, ctx, **kwargs)
    except Exception as exc:
        response = view.handle_exception(exc)  # re-raises what is not an API error (a bug: 500)
    response = view.finalize_response(request, response)
    response.render()
    return response


def serves(api: type[AsyncEndpointApi]) -> Callable[[V], V]:
    """Mark an async view as the one serving ``api``'s endpoint.

    drf-spectacular documents a URL whose callback carries an APIView class (``.cls``).
    The view is CSRF-exempt here because DRF's SessionAuthentication, run by ``admit``,
    enforces CSRF itself, as in every APIView.
    """

    def mark(view: V) -> V:
        exempt = csrf_exempt(view)
        exempt.cls = api  # type: ignore[attr-defined]
        exempt.initkwargs = {}  # type: ignore[attr-defined]
        return exempt  # type: ignore[return-value]

    return mark
