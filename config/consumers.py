"""A tiny WebSocket consumer proving the Channels stack end to end (layer included)."""

from __future__ import annotations

from typing import Any

from channels.generic.websocket import AsyncJsonWebsocketConsumer


class PingConsumer(AsyncJsonWebsocketConsumer):
    """Echoes ``{"ping": x}`` as ``{"pong": x}`` through the channel layer, so a test
    over a real server exercises the configured layer (in-memory or Redis)."""

    async def connect(self) -> None:
        await self.accept()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        await self.channel_layer.send(self.channel_name, {"type": "pong", "value": content.get("ping")})

    async def pong(self, event: dict[str, Any]) -> None:
        await self.send_json({"pong": event["value"]})
