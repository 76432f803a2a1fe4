"""Chat models for Quarry: the catalog (``config/models.yaml``), litellm's Router, the offline model.

    async for event in stream_chat(messages):   # TextDelta | ReasoningDelta | UsageReport | Finished
    async for event in stream_chat(messages, tools=[...]):   # ... and ToolCalls before Finished
        ...

Nothing else in the project imports litellm for chat.
"""

from __future__ import annotations

from chat.llm.catalog import OFFLINE_MODEL, OFFLINE_PROVIDER, Catalog, CatalogError, Deployment, LogicalModel, load_catalog
from chat.llm.router import (
    Finished,
    ModelEvent,
    ModelUnavailable,
    ReasoningDelta,
    TextDelta,
    ToolCallRequest,
    ToolCalls,
    UsageReport,
    build_router,
    catalog_path,
    get_router,
    stream_chat,
)

__all__ = [
    "OFFLINE_MODEL", "OFFLINE_PROVIDER", "Catalog", "CatalogError", "Deployment", "Finished", "LogicalModel",
    "ModelEvent", "ModelUnavailable", "ReasoningDelta", "TextDelta", "ToolCallRequest", "ToolCalls", "UsageReport", "build_router", "catalog_path",
    "get_router", "load_catalog", "stream_chat",
]
