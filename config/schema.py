"""The OpenAPI schema (drf-spectacular): security schemes, and every error an operation can answer.

``AutoSchema`` adds to each operation the error responses the project's machinery can give it,
all in the one error shape (``Error``): 400 (bad input or query), 401, 403, 404 (also another
tenant's objects, and an unknown tenant), 406 (an ``Accept`` it cannot satisfy), 413 and 415
(operations with a body), 429 (throttles; ``Retry-After``), 500 (a bug; with ``request_id``)
and 503 (``database_unavailable`` or ``overloaded``; ``Retry-After``). An operation's own
responses for a status win.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers

from common.serializers import ClosedSerializer

ERROR_STATUSES: dict[str, str] = {
    "400": "Invalid input: `fields` names each field at fault (`{field: [messages]}`).",
    "401": "No credentials, or an unknown or revoked token.",
    "403": "The caller's role in the tenant does not allow this (or a browser session's CSRF check failed).",
    "404": "Not found: also an object or tenant the caller cannot see.",
    "406": "The `Accept` header asks for a media type this endpoint cannot produce.",
    "429": "Throttled (too many requests, or too many invalid tokens from this address); see `Retry-After`.",
    "500": "A bug: it is logged; `request_id` finds it.",
    "503": "`database_unavailable` (the database cannot be reached) or `overloaded` (all its connections are busy); see `Retry-After`.",
}
BODY_ERROR_STATUSES: dict[str, str] = {
    "413": "The request body (or an uploaded file) is over its limit.",
    "415": "The request body's content type is not one this endpoint accepts.",
}
RETRY_AFTER_HEADER = {"Retry-After": {"description": "Seconds to wait before trying again.", "required": True,
                                      "schema": {"type": "integer", "minimum": 1}}}


class ErrorSerializer(serializers.Serializer):
    """The project's error shape (config/errors.py)."""

    error = serializers.CharField(help_text="A stable code, e.g. invalid, not_found, throttled, overloaded.")
    detail = serializers.CharField(help_text="A sentence for people.")
    fields = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False,
                                   help_text="With error=invalid: the messages per field.")
    request_id = serializers.CharField(required=False, help_text="With a 500: quote it when reporting the problem.")

    class Meta:
        ref_name = "Error"


class AutoSchema(SpectacularAutoSchema):
    def _map_basic_serializer(self, serializer: Any, direction: str) -> dict[str, Any]:  # type: ignore[override]
        schema = super()._map_basic_serializer(serializer, direction)  # type: ignore[arg-type]
        for name, field in serializer.fields.items():
            # Nested ``many=True`` serializers: drf-spectacular leaves out their bounds.
            prop = schema.get("properties", {}).get(field.field_name or name)
            if isinstance(field, serializers.ListSerializer) and isinstance(prop, dict) and prop.get("type") == "array":
                minimum = max(field.min_length or 0, 0 if field.allow_empty else 1)
                if minimum:
                    prop["minItems"] = minimum
                if field.max_length is not None:
                    prop["maxItems"] = field.max_length
        if isinstance(serializer, ClosedSerializer):
            schema["additionalProperties"] = False  # the server refuses what it does not declare
        return schema

    def _get_response_bodies(self, direction: str = "response") -> dict[str, Any]:  # type: ignore[override]
        responses = super()._get_response_bodies(direction)  # type: ignore[arg-type]
        if direction != "response" or self._is_public():
            return responses
        statuses = dict(ERROR_STATUSES)
        if self.method in ("POST", "PUT", "PATCH"):
            statuses.update(BODY_ERROR_STATUSES)
        error = self.resolve_serializer(ErrorSerializer(), "response").ref
        for code, description in sorted(statuses.items()):
            if code in responses:
                continue
            response: dict[str, Any] = {"description": description, "content": {"application/json": {"schema": error}}}
            if code in ("429", "503"):
                response["headers"] = RETRY_AFTER_HEADER
            responses[code] = response
        return responses

    def _is_public(self) -> bool:
        return not self.view.get_authenticators() and not self.view.get_permissions()


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": "An API token: `manage.py create_api_token` or POST /v1/tokens."}


class BrowserSessionScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.SessionAuthentication"
    name = "cookieAuth"
    priority = 1

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        from django.conf import settings

        return {"type": "apiKey", "in": "cookie", "name": settings.SESSION_COOKIE_NAME,
                "description": "The signed-in browser session (unsafe methods also need the CSRF token)."}


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Operations list their security schemes; no operation is callable anonymously."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict) and "security" in operation:
                operation["security"] = [entry for entry in operation["security"] if entry]
    return result
