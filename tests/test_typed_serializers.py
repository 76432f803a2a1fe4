"""common.typed_serializers: DRF serializers derived from TypedDicts (the fields, their options, the schema)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired, TypedDict

import pytest
from django.urls import path
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from common.typed_serializers import Help, typed_serializer


class Point(TypedDict):
    x: float
    y: float


class Base(TypedDict):
    id: Annotated[str, Help("The shape's id.")]


class Shape(Base):
    kind: Literal["circle", "square"]
    sides: int
    filled: bool
    label: str | None
    tags: list[str]
    center: Point
    corners: list[Point]
    note: NotRequired[Annotated[str, Help("Only when someone wrote one.")]]
    extra: Any


class Loose(TypedDict, total=False):
    a: int


class Counts(TypedDict):
    by_name: dict[str, int]


class Unsupported(TypedDict):
    when: dict[int, int]


def test_each_annotation_becomes_its_field() -> None:
    fields = typed_serializer(Shape)().fields
    assert list(fields) == ["id", "kind", "sides", "filled", "label", "tags", "center", "corners", "note", "extra"]
    assert isinstance(fields["id"], serializers.CharField) and fields["id"].help_text == "The shape's id."
    assert isinstance(fields["kind"], serializers.ChoiceField) and list(fields["kind"].choices) == ["circle", "square"]
    assert isinstance(fields["sides"], serializers.IntegerField)
    assert isinstance(fields["filled"], serializers.BooleanField)
    assert isinstance(fields["label"], serializers.CharField) and fields["label"].allow_null
    assert not fields["sides"].allow_null
    assert isinstance(fields["tags"], serializers.ListField) and isinstance(fields["tags"].child, serializers.CharField)
    assert isinstance(fields["center"], serializers.Serializer)
    assert isinstance(fields["center"].fields["x"], serializers.FloatField)
    assert isinstance(fields["corners"], serializers.ListSerializer)
    assert type(fields["corners"].child) is type(fields["center"])
    assert isinstance(fields["extra"], serializers.JSONField)


def test_an_object_of_values_is_a_dict_field() -> None:
    field = typed_serializer(Counts)().fields["by_name"]
    assert isinstance(field, serializers.DictField) and isinstance(field.child, serializers.IntegerField)
    assert typed_serializer(Counts)({"by_name": {"a": 1}}).data == {"by_name": {"a": 1}}


def test_not_required_keys_are_optional_fields() -> None:
    fields = typed_serializer(Shape)().fields
    assert not fields["note"].required and fields["note"].help_text == "Only when someone wrote one."
    assert all(field.required for key, field in fields.items() if key != "note")
    assert not typed_serializer(Loose)().fields["a"].required


def test_names_choose_the_classes_and_one_shape_is_one_class() -> None:
    shape = typed_serializer(Shape, name="Drawing", names={Point: "DrawingPoint"})
    assert shape.__name__ == "DrawingSerializer"
    assert type(shape().fields["center"]).__name__ == "DrawingPointSerializer"
    assert typed_serializer(Shape, name="Drawing") is shape
    assert typed_serializer(Point, name="DrawingPoint") is type(shape().fields["center"])
    assert typed_serializer(Shape) is not shape and typed_serializer(Shape).__name__ == "ShapeSerializer"


def test_renders_a_payload_of_the_shape() -> None:
    payload: Shape = {
        "id": "s1", "kind": "square", "sides": 4, "filled": False, "label": None, "tags": ["a"],
        "center": {"x": 0.5, "y": 1.0}, "corners": [{"x": 0.0, "y": 0.0}], "extra": {"any": [1, "json"]},
    }
    assert typed_serializer(Shape)(payload).data == payload


def test_an_unsupported_annotation_fails_when_the_serializer_is_built() -> None:
    with pytest.raises(TypeError, match=r"Unsupported\.when: JSON objects have string keys"):
        typed_serializer(Unsupported)
    with pytest.raises(TypeError, match="not a TypedDict"):
        typed_serializer(dict)


def test_the_openapi_component_has_the_shape() -> None:
    class ShapeApi(APIView):
        permission_classes: list[Any] = []
        authentication_classes: list[Any] = []

        @extend_schema(responses=typed_serializer(Shape, name="SchemaShape"))
        def get(self, request: Request) -> Response:  # pragma: no cover - never called
            return Response()

    schema = SchemaGenerator(patterns=[path("shape", ShapeApi.as_view())]).get_schema(request=None, public=True)
    component = schema["components"]["schemas"]["SchemaShape"]
    assert list(component["properties"]) == list(typed_serializer(Shape)().fields)
    assert sorted(component["required"]) == sorted(set(component["properties"]) - {"note"})
    assert component["properties"]["label"]["type"] == ["string", "null"]  # OpenAPI 3.1: null is a type
    assert component["properties"]["id"]["description"] == "The shape's id."
    assert component["properties"]["corners"] == {"type": "array", "items": {"$ref": "#/components/schemas/Point"}}
    assert set(schema["components"]["schemas"]["Point"]["properties"]) == {"x", "y"}
