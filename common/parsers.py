"""JSON as the API accepts it: bounded nesting, and no string PostgreSQL cannot store.

Python's decoder recurses once per nesting level, so a body of ten thousand ``[`` ends in a
``RecursionError`` (a 500) instead of a 400; nothing Quarry accepts nests deeper than a few
levels. A NUL character or a lone UTF-16 surrogate (``"\\ud800"``) in any string, key or value,
cannot be stored in PostgreSQL text or jsonb: refused here with the JSON path of the string,
before any field sees it.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import Any

from django import forms
from django.forms.fields import InvalidJSONInput
from rest_framework import exceptions, serializers
from rest_framework.parsers import JSONParser

MAX_JSON_DEPTH = 32
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


class JSONTooDeep(ValueError):
    pass


class UnstorableString(ValueError):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _path(parts: tuple[str | int, ...]) -> str:
    """``documents[0].metadata.team``; a key that is not a plain name is quoted: ``filters["a b"]``."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _NAME.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "body"


def _unstorable(text: str) -> str | None:
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    return "must not contain NUL characters" if found.group() == "\x00" else "must not contain unpaired surrogates"


def check_json_value(value: Any, *, root: tuple[str | int, ...] = (), max_depth: int = MAX_JSON_DEPTH) -> None:
    """Raise ``JSONTooDeep`` or ``UnstorableString`` (naming the path) for a decoded JSON value."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 0, root)]
    while stack:
        item, depth, parts = stack.pop()
        if isinstance(item, dict | list):
            if depth >= max_depth:
                raise JSONTooDeep(f"JSON nested deeper than {max_depth} levels")
            children: Iterator[tuple[str | int, Any]] = iter(item.items()) if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and (problem := _unstorable(key)):
                    raise UnstorableString(_path(parts), f"its keys {problem}")
                stack.append((child, depth + 1, (*parts, key)))
        elif isinstance(item, str) and (problem := _unstorable(item)):
            raise UnstorableString(_path(parts), problem)


def loads_bounded(text: str | bytes, *, root: tuple[str | int, ...] = ()) -> Any:
    """``json.loads`` for untrusted input: NaN/Infinity refused, depth and strings checked (ValueError subclasses)."""
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except RecursionError:
        raise JSONTooDeep(f"JSON nested deeper than {MAX_JSON_DEPTH} levels") from None
    check_json_value(value, root=root)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class BoundedJSONParser(JSONParser):
    """DRF's JSON parser with ``loads_bounded``'s checks: too deep is a parse error, an unstorable string a 400 naming it."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        encoding = (parser_context or {}).get("encoding", "utf-8")
        try:
            text = codecs.getreader(encoding)(stream).read()
            return loads_bounded(text)
        except UnstorableString as exc:
            raise exceptions.ValidationError({exc.path: [exc.message]}) from None
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, JSONTooDeep
            raise exceptions.ParseError(f"JSON parse error - {exc}") from None


class BoundedJSONField(serializers.JSONField):
    """A JSON value sent as a string (multipart forms), parsed with ``loads_bounded``."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str | bytes):
            raise serializers.ValidationError("Must be a JSON document (a string).")
        try:
            return loads_bounded(data.decode("utf-8") if isinstance(data, bytes) else data)
        except UnstorableString as exc:
            raise serializers.ValidationError(f"{exc.path}: {exc.message}") from None
        except ValueError as exc:
            raise serializers.ValidationError(f"Value must be valid JSON: {exc}") from None


class BoundedJSONFormField(forms.JSONField):
    """Django's form JSONField with ``loads_bounded``: deep nesting or NUL is a form error, not a 500."""

    def to_python(self, value: Any) -> Any:
        if self.disabled or value in self.empty_values or not isinstance(value, str):
            return super().to_python(value)
        try:
            return loads_bounded(value)
        except UnstorableString as exc:
            raise forms.ValidationError(f"{exc.path}: {exc.message}", code="invalid") from None
        except ValueError as exc:
            raise forms.ValidationError(f"Enter a valid JSON: {exc}.", code="invalid") from None

    def prepare_value(self, value: Any) -> Any:
        # A bound form without the field (a search URL with no filters) has None: show an empty
        # box, not the JSON "null" the user never typed.
        return "" if value is None else super().prepare_value(value)

    def bound_data(self, data: Any, initial: Any) -> Any:
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return loads_bounded(data)
        except ValueError:
            return InvalidJSONInput(data)
