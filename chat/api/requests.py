"""What a question to the chat may say: the prompt and the retrieval options, checked once for every transport.

``POST /v1/chat/completions`` (JSON or SSE), the answer actions and the web chat's WebSocket
messages validate through the fields here, so a prompt or an option refused over one transport is
refused over the other with the same sentence: a 400 lists it under the field's name, the WebSocket
sends it as an ``invalid`` error (``ws_request``: the prompt's sentence as it is, an option's as
``field: sentence``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.files.selectors import session_file_get
from chat.models import ChatSession, SessionKind
from chat.retrieval import RetrievalOptions
from common.serializers import ClosedSerializer, StrictBooleanField, StrictCharField
from knowledge.rag import limits
from knowledge.rag.errors import RAGValidationError
from knowledge.rag.reranking import RERANK_CHOICES
from knowledge.rag.fields import FusionField, FusionWeightField, check_fusion_request
from knowledge.rag.types import check_characters

NO_QUESTION = "Type a question first."
TOO_LONG = f"The question is too long: at most {limits.MAX_QUERY_CHARS:,} characters."
NOT_TEXT = "The question holds characters that are not text: it {reason}."


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": limits.MAX_QUERY_CHARS, "pattern": limits.NON_BLANK_TEXT_PATTERN,
                      "description": "The question: not blank, no control characters but tab and line breaks."})
class PromptField(StrictCharField):
    """A question: a string, not blank, at most ``MAX_QUERY_CHARS``, text only (no NUL, control characters
    but tab and line breaks, or unpaired surrogates)."""

    default_error_messages = {"blank": NO_QUESTION, "null": NO_QUESTION, "max_length": TOO_LONG}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_length=limits.MAX_QUERY_CHARS, trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        value = super().to_internal_value(data)
        if not value.strip():
            raise serializers.ValidationError(NO_QUESTION)
        try:
            check_characters("prompt", value, limits.CONTROL_RE)
        except RAGValidationError as exc:
            raise serializers.ValidationError(NOT_TEXT.format(reason=exc.message)) from None
        return value


class ChatRetrievalOptionsSerializer(ClosedSerializer):
    """How an answer's passages are retrieved: the options of ``POST /v1/chat/completions`` that the web
    chat's WebSocket ``ask`` / ``regenerate`` / ``edit`` messages take too, checked by the same rules."""

    graph_search = StrictBooleanField(
        allow_null=True, default=None,
        help_text="Override QUARRY_CHAT_RETRIEVAL_GRAPH_SEARCH for this request: true adds the knowledge graph's leg to "
                  "hybrid retrieval (passages reached through the entities of the question and its top passages, each "
                  "citation saying its graph_path) and a `graph_search` diagnostic; false removes both.",
    )
    fusion = FusionField(
        help_text="How hybrid retrieval merges its keyword and semantic lists: rrf or score (as POST /v1/search). "
                  "Absent: the server's default. With graph_search, the graph's passages are placed in that list.",
    )
    fusion_weight = FusionWeightField(help_text="With fusion score: the semantic list's weight (as POST /v1/search).")
    rerank = serializers.ChoiceField(
        choices=list(RERANK_CHOICES), allow_null=True, default=None,
        help_text="Override QUARRY_CHAT_RERANK (colbert unless configured) for this request: colbert re-scores hybrid "
                  "retrieval's first candidates by late interaction before the passages are chosen; none keeps fusion's order.",
    )
    sources = serializers.ChoiceField(
        choices=["all", "files", "knowledge"], default="all",
        help_text="What retrieval searches: all (the knowledge base and the files attached to this conversation, fused "
                  "by RRF), files (the attached files only) or knowledge (the knowledge base only).",
    )
    identifier = StrictCharField(
        required=False, allow_null=True, default=None, max_length=40,
        help_text="One attached file's id (GET /v1/chat/sessions/{id}/files): search that file only.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("identifier") is not None and attrs.get("sources") == "knowledge":
            raise serializers.ValidationError({"identifier": ["names an attached file; sources knowledge searches no files"]})
        return check_fusion_request(attrs)


RETRIEVAL_OPTIONS = tuple(ChatRetrievalOptionsSerializer().fields)


def retrieval_options(validated: dict[str, Any]) -> RetrievalOptions:
    """The ``RetrievalOptions`` of a body ``ChatRetrievalOptionsSerializer`` (or a subclass) validated."""
    return RetrievalOptions.of(**{key: validated[key] for key in RETRIEVAL_OPTIONS if key in validated})


def unknown_file_error(session: ChatSession, identifier: str | None) -> dict[str, list[str]] | None:
    """The error of an ``identifier`` that names no file attached to ``session`` (None: it does, or none given)."""
    if identifier is not None and session_file_get(session=session, file_id=identifier) is None:
        return {"identifier": [f"no file {identifier[:40]!r} is attached to this conversation"]}
    return None


def first_error(errors: Any) -> str:
    """One sentence from a serializer's errors: ``field: message``."""
    if isinstance(errors, dict) and errors:
        field, messages = next(iter(errors.items()))
        message = messages[0] if isinstance(messages, list) and messages else messages
        return f"{field}: {message}" if field != "non_field_errors" else str(message)
    return str(errors)


class InvalidRequest(Exception):
    """A WebSocket message refused; ``detail`` is the one sentence to send."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class WsRequest:
    """A checked WebSocket question: its prompt (None: the message asks for none) and the stream's keyword
    arguments for the retrieval options (``options`` for a chat answer, ``graph_search`` for an agent run;
    none given: the stream's defaults)."""

    prompt: str | None
    stream_options: dict[str, Any]

    @property
    def identifier(self) -> str | None:
        options = self.stream_options.get("options")
        return options.files.identifier if isinstance(options, RetrievalOptions) else None


def ws_request(message: dict[str, Any], *, kind: str, prompt: bool) -> WsRequest:
    """``message``'s prompt (when ``prompt``) and retrieval options, checked by the rules of the HTTP API
    (``InvalidRequest`` with the sentence otherwise). Absent options take the pipeline's defaults. An
    agent run takes ``graph_search`` only: it chooses its own searches."""
    question: str | None = None
    if prompt:
        try:
            question = PromptField().run_validation(message.get("prompt", ""))
        except serializers.ValidationError as exc:
            raise InvalidRequest(str(exc.detail[0] if isinstance(exc.detail, list) else exc.detail)) from None
    given = {key: message[key] for key in RETRIEVAL_OPTIONS if key in message}
    if kind == SessionKind.AGENT:
        extra = sorted(set(given) - {"graph_search"})
        if extra:
            raise InvalidRequest(f"{extra[0]}: an agent run takes graph_search only; it chooses its own searches.")
    options = ChatRetrievalOptionsSerializer(data=given)
    if not options.is_valid():
        raise InvalidRequest(first_error(options.errors))
    if kind == SessionKind.AGENT:
        graph = options.validated_data.get("graph_search") if "graph_search" in given else None
        return WsRequest(question, {} if graph is None else {"graph_search": graph})  # null: the agent's default
    return WsRequest(question, {"options": retrieval_options({k: v for k, v in options.validated_data.items() if k in given})})
