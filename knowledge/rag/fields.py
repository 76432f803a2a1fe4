"""The RAG API's search options as REST fields, shared by every HTTP surface that takes them
(``POST /v1/search``, chat's retrieval options), so each states the same bounds and messages.

Imported by the interfaces only (it needs Django REST framework); the typed API never imports it.
"""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions, serializers

from common.serializers import StrictFloatField
from knowledge.rag.types import MAX_FUSION_WEIGHT, Fusion, SearchMode


class FusionField(serializers.ChoiceField):
    """Hybrid search's fusion (``rag.Fusion``); null or absent: the server's default (QUARRY_HYBRID_FUSION)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", (
            "Hybrid mode: how the keyword and semantic lists are merged. rrf: Reciprocal Rank Fusion (ranks). score: each "
            "list's scores normalised (0..1), keyword + fusion_weight x semantic, each list's first hits kept within the "
            "first places. Absent: the server's default."))
        super().__init__(choices=[f.value for f in Fusion], required=False, allow_null=True, default=None, **kwargs)


class FusionWeightField(StrictFloatField):
    """Score fusion's weight of the semantic list, 0..``MAX_FUSION_WEIGHT``; null or absent: the server's default."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("help_text", (
            f"With fusion score: the semantic list's weight (0..{MAX_FUSION_WEIGHT:g}). Absent: the server's default."))
        super().__init__(required=False, allow_null=True, default=None, min_value=0.0, max_value=MAX_FUSION_WEIGHT, **kwargs)


def check_fusion_request(attrs: dict[str, Any]) -> dict[str, Any]:
    """A request's fusion fields agree with its mode (absent: hybrid); errors name the field."""
    fusion, weight = attrs.get("fusion"), attrs.get("fusion_weight")
    mode = attrs.get("mode", SearchMode.HYBRID.value)
    if (fusion is not None or weight is not None) and mode != SearchMode.HYBRID.value:
        field = "fusion" if fusion is not None else "fusion_weight"
        raise exceptions.ValidationError({field: [f"fusion applies to hybrid search; it cannot be used with mode {mode}"]})
    if weight is not None and fusion == Fusion.RRF.value:
        raise exceptions.ValidationError({"fusion_weight": ["fusion_weight applies to score fusion; this request asks for rrf"]})
    return attrs
