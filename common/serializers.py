"""Strict input fields for JSON bodies, shared by every API.

DRF is lenient by default: a ``CharField`` turns the number ``5`` into ``"5"``, an
``IntegerField`` takes ``"5"`` and ``5.0``, a ``BooleanField`` takes ``"yes"`` and ``1``, and
fields a serializer does not declare are dropped silently. The API promises the types its
schema states, so bodies are checked as sent: a wrong type is a 400 naming the field, and so
is a field the endpoint does not accept. (Query strings and multipart forms carry only text:
their serializers keep DRF's parsing fields.)
"""

from __future__ import annotations

import re
from typing import Any

from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

NOT_ACCEPTED = "Not accepted."  # the start of every unknown field's message (clients match on it)
TENANT_RE = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"  # accounts.models.TENANT_SLUG_RE (config imports no app)
_TENANT = re.compile(TENANT_RE)
TENANT_HELP = "Tenant slug; default: the token's tenant (with a browser session: DEFAULT). Any other tenant is 404."


class ClosedSerializer(serializers.Serializer):
    """Refuses fields it does not declare, naming the ones it takes:
    ``{"fields": {"foo": ["Not accepted. This takes: ids, tenant."]}}``. In a query string, a parameter
    given without a value (``?status=``) is refused too, where DRF would treat it as omitted."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict | QueryDict):
            extra = sorted(set(data) - set(self.fields))
            if extra:
                # A misspelt or guessed field ("message" for "prompt") is fixed fastest when the answer lists the right ones.
                taken = ", ".join(sorted(name for name, field in self.fields.items() if not field.read_only))
                raise serializers.ValidationError({key: [f"{NOT_ACCEPTED} This takes: {taken}."] for key in extra})
        if isinstance(data, QueryDict):
            empty = sorted(key for key, values in data.lists() if any(value == "" for value in values))
            if empty:
                raise serializers.ValidationError({key: ["Must not be empty: omit the parameter instead."] for key in empty})
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """Only a JSON string (DRF's CharField would turn ``5`` into ``"5"``)."""

    default_error_messages = {"invalid": "Not a valid string: send a JSON string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """Only a JSON integer (not ``"5"`` or ``true``); ``5.0`` is one, as JSON Schema says."""

    default_error_messages = {"invalid": "A valid integer is required (a JSON number without a fraction, not a string)."}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, float) and data.is_integer():
            data = int(data)
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """Only a JSON number (not ``"0.5"`` or ``true``)."""

    default_error_messages = {"invalid": "A valid number is required (a JSON number, not a string)."}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """Only ``true`` or ``false`` (not ``"yes"`` or ``1``)."""

    default_error_messages = {"invalid": "Must be a valid boolean: true or false."}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


@extend_schema_field({"type": "string", "pattern": TENANT_RE, "minLength": 1, "maxLength": 64, "description": TENANT_HELP})
class TenantField(serializers.CharField):
    """A tenant slug; never empty (omit it to mean the default)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", TENANT_HELP)
        super().__init__(allow_blank=False, trim_whitespace=False, max_length=64, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        value = super().to_internal_value(data)
        if not _TENANT.fullmatch(value):
            raise serializers.ValidationError("Must be a tenant slug: letters, digits, '-' or '_', at most 64 characters.")
        return value
