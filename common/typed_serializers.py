"""DRF serializers derived from ``TypedDict`` shapes: a JSON payload is typed once and documented from that type.

    class Usage(TypedDict):
        prompt_tokens: Annotated[int, Help("Tokens of the prompt.")]
        cached: NotRequired[bool]

    UsageSerializer = typed_serializer(Usage, name="ChatUsage")   # component "ChatUsage" in the OpenAPI schema

Annotations map to fields: ``str`` / ``int`` / ``float`` / ``bool`` to ``CharField`` / ``IntegerField`` /
``FloatField`` / ``BooleanField``; ``X | None`` allows null; ``list[X]`` is a list of X (a nested serializer with
``many=True`` when X is a TypedDict); ``dict[str, X]`` an object of X; a nested TypedDict is a nested serializer derived the same way;
``Literal["a", "b"]`` is a ``ChoiceField``; ``Any`` is a ``JSONField``; ``NotRequired[X]`` is ``required=False``;
``Annotated[X, Help("...")]`` sets ``help_text``. Any other annotation raises ``TypeError`` when the serializer is
built (at import), so a shape the schema cannot describe fails loudly instead of being documented wrongly.

The serializers describe (drf-spectacular) and render output; code keeps using the TypedDict as the type. One
class is built per (TypedDict, name), so a shape nested in several responses is one component of the schema.
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    Union,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
)

from rest_framework import serializers

_SCALARS: dict[Any, type[serializers.Field]] = {
    str: serializers.CharField,
    int: serializers.IntegerField,
    float: serializers.FloatField,
    bool: serializers.BooleanField,
}

# (TypedDict, component name) -> its serializer. Derivation is pure, so this only memoizes; it is what keeps a
# shape nested in two responses one component (drf-spectacular warns about two classes of one name).
_DERIVED: dict[tuple[type, str], type[serializers.Serializer]] = {}


@dataclass(frozen=True)
class Help:
    """``Annotated`` metadata: the field's ``help_text``, i.e. its description in the OpenAPI schema."""

    text: str


def typed_serializer(
    typed: type, *, name: str | None = None, names: Mapping[type, str] | None = None
) -> type[serializers.Serializer]:
    """The serializer class of the TypedDict ``typed``: class ``<name>Serializer``, schema component ``<name>``.

    ``name`` defaults to the TypedDict's own name; ``names`` names nested TypedDicts (by default their own
    names too). The first derivation of a (TypedDict, name) is the one returned for it from then on.
    Raises ``TypeError`` when ``typed`` is not a TypedDict or one of its annotations is not supported.
    """
    names = dict(names or {})
    return _serializer(typed, name or names.get(typed, typed.__name__), names)


def _serializer(typed: type, name: str, names: Mapping[type, str]) -> type[serializers.Serializer]:
    if not is_typeddict(typed):
        raise TypeError(f"{typed!r} is not a TypedDict")
    built = _DERIVED.get((typed, name))
    if built is not None:
        return built
    fields: dict[str, serializers.Field] = {}
    for key, hint in get_type_hints(typed, include_extras=True).items():
        # NotRequired/Required are read from the annotation: with postponed annotations (PEP 563) Python 3.11
        # records every key of a total TypedDict in __required_keys__, NotRequired ones included.
        required = key in typed.__required_keys__  # type: ignore[attr-defined]
        if get_origin(hint) in (NotRequired, Required):
            required, hint = get_origin(hint) is Required, get_args(hint)[0]
        try:
            fields[key] = _field(hint, names, required=required)
        except TypeError as exc:
            raise TypeError(f"{typed.__qualname__}.{key}: {exc}") from None
    namespace: dict[str, Any] = {"__module__": typed.__module__, "__qualname__": f"{name}Serializer", **fields}
    built = type(f"{name}Serializer", (serializers.Serializer,), namespace)
    _DERIVED[(typed, name)] = built
    return built


def _field(hint: Any, names: Mapping[type, str], **options: Any) -> serializers.Field:
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *metadata = get_args(hint)
        for item in metadata:
            if isinstance(item, Help):
                options["help_text"] = item.text
        return _field(inner, names, **options)
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"only X | None unions are supported, not {hint!r}")
        return _field(members[0], names, allow_null=True, **options)
    if origin is Literal:
        return serializers.ChoiceField(choices=list(get_args(hint)), **options)
    if origin is list:
        (item,) = get_args(hint)
        if is_typeddict(item):
            return _serializer(item, names.get(item, item.__name__), names)(many=True, **options)
        return serializers.ListField(child=_field(item, names), **options)
    if origin is dict:
        key, value = get_args(hint)
        if key is not str:
            raise TypeError(f"JSON objects have string keys, not {key!r}")
        return serializers.DictField(child=_field(value, names), **options)
    if is_typeddict(hint):
        return _serializer(hint, names.get(hint, hint.__name__), names)(**options)
    if hint is Any:
        return serializers.JSONField(**options)
    if hint in _SCALARS:
        return _SCALARS[hint](**options)
    raise TypeError(f"no serializer field for {hint!r}")


def typed_json_schema(typed: type) -> dict[str, Any]:
    """The JSON Schema of a TypedDict, by the same mapping as ``typed_serializer`` (for payloads that are no
    serializer's body, such as the data of one Server-Sent Event). Raises ``TypeError`` like it does."""
    if not is_typeddict(typed):
        raise TypeError(f"{typed!r} is not a TypedDict")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for key, hint in get_type_hints(typed, include_extras=True).items():
        needed = key in typed.__required_keys__  # type: ignore[attr-defined]
        if get_origin(hint) in (NotRequired, Required):
            needed, hint = get_origin(hint) is Required, get_args(hint)[0]
        try:
            properties[key] = _json_schema(hint)
        except TypeError as exc:
            raise TypeError(f"{typed.__qualname__}.{key}: {exc}") from None
        if needed:
            required.append(key)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def _json_schema(hint: Any) -> dict[str, Any]:
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *metadata = get_args(hint)
        schema = _json_schema(inner)
        for item in metadata:
            if isinstance(item, Help):
                schema = {**schema, "description": item.text}
        return schema
    if origin in (Union, types.UnionType):
        members = [arg for arg in get_args(hint) if arg is not type(None)]
        if len(members) != 1:
            raise TypeError(f"only X | None unions are supported, not {hint!r}")
        return {"anyOf": [_json_schema(members[0]), {"type": "null"}]}
    if origin is Literal:
        return {"enum": list(get_args(hint))}
    if origin is list:
        (item,) = get_args(hint)
        return {"type": "array", "items": _json_schema(item)}
    if origin is dict:
        key, value = get_args(hint)
        if key is not str:
            raise TypeError(f"JSON objects have string keys, not {key!r}")
        return {"type": "object", "additionalProperties": _json_schema(value)}
    if is_typeddict(hint):
        return typed_json_schema(hint)
    if hint is Any:
        return {}
    scalars = {str: "string", int: "integer", float: "number", bool: "boolean"}
    if hint in scalars:
        return {"type": scalars[hint]}
    raise TypeError(f"no JSON Schema for {hint!r}")
