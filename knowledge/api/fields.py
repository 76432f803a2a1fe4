"""The REST API's shared pieces: RAG errors as HTTP errors, and the RAG API's values as typed fields whose bounds
are stated in the OpenAPI schema as JSON Schema (patterns, lengths)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import exceptions, serializers, status

from common.serializers import StrictCharField
from knowledge import rag
from knowledge.rag import limits


class EmbeddingUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "embedding_unavailable"
    default_detail = "The embedding model failed; keyword search still works."


def rag_error_to_api(exc: rag.RAGError) -> exceptions.APIException:
    """Translate the RAG API's errors into HTTP ones; every bound becomes a 400 naming its field."""
    if isinstance(exc, rag.RAGValidationError | rag.RAGTypeError):
        return exceptions.ValidationError({exc.field: [exc.message]})
    if isinstance(exc, rag.ConfigurationError):
        return exceptions.ValidationError({"mode": [str(exc)]})
    if isinstance(exc, rag.EmbedderError):
        return EmbeddingUnavailable(f"The embedding model failed: {exc}")
    raise exc


def document_id_in_url(document_id: str) -> str:
    """A document id from a URL, checked as ids in bodies are (a lookup: any id that could be stored)."""
    if not limits.DOCUMENT_ID_RE.fullmatch(document_id):
        raise exceptions.ValidationError({"document_id": [f"{document_id[:80]!r} is not a valid document id."]})
    return document_id


# --- JSON Schema of the RAG API's values ---------------------------------------------------------

SCALAR_SCHEMA: dict[str, Any] = {"anyOf": [
    {"type": "string", "maxLength": limits.MAX_METADATA_STRING_CHARS, "pattern": limits.TEXT_PATTERN},
    {"type": "number"},
    {"type": "boolean"},
]}
FIELDS_SCHEMA: dict[str, Any] = {"maxProperties": limits.MAX_FIELDS, "propertyNames": {"pattern": limits.FIELD_PATTERN, "maxLength": 64}}


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA, "additionalProperties": SCALAR_SCHEMA,
    "description": "Flat metadata: field names of letters, digits and _; values text, numbers or true/false.",
})
class MetadataField(serializers.DictField):
    """An object; its names and values are checked by the RAG API (messages name ``metadata.<field>``)."""


@extend_schema_field({
    "type": "object", **FIELDS_SCHEMA,
    "additionalProperties": {"anyOf": [
        *SCALAR_SCHEMA["anyOf"],
        {"type": "array", "minItems": 1, "maxItems": limits.MAX_MEMBERS, "items": SCALAR_SCHEMA},
    ]},
    "description": '{"field": value} is equality, {"field": [a, b]} membership; fields AND together.',
})
class FiltersField(serializers.DictField):
    pass


def string_schema(pattern: str, max_length: int, *, min_length: int = 1, description: str = "") -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string", "minLength": min_length, "maxLength": max_length, "pattern": pattern}
    return {**schema, "description": description} if description else schema


@extend_schema_field(string_schema(limits.NON_BLANK_TEXT_PATTERN, limits.MAX_QUERY_CHARS,
                             description="The question or keywords: not blank, no control characters but tab and line breaks."))
class QueryField(StrictCharField):
    pass


@extend_schema_field(string_schema(limits.CHUNK_ID_PATTERN, limits.MAX_CHUNK_ID_CHARS, description=(
    "A chunk id ('<document id>:<n>' for Quarry's own chunks): letters, digits and ._:/@+=-, at most 207.")))
class ChunkIdField(StrictCharField):
    pass


@extend_schema_field(string_schema(limits.DOCUMENT_ID_PATTERN, 200, description=(
    "The caller's id: letters, digits and ._:/@+=-, at most 200; '/'-separated parts are neither empty nor only dots.")))
class NewDocumentIdField(StrictCharField):
    pass


@extend_schema_field(string_schema(limits.DOCUMENT_TEXT_PATTERN, limits.MAX_CHARS_PER_DOCUMENT, description="Not blank, no NUL."))
class DocumentTextField(StrictCharField):
    pass


@extend_schema_field({"type": ["string", "null"], "maxLength": limits.MAX_TITLE_CHARS, "pattern": limits.LINE_PATTERN})
class TitleField(StrictCharField):
    pass


@extend_schema_field({"type": ["string", "null"], "maxLength": limits.MAX_URI_CHARS, "pattern": limits.LINE_PATTERN})
class UriField(StrictCharField):
    pass
