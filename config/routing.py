"""WebSocket routes (Channels). The chat consumer is added by the chat app."""

from __future__ import annotations

from django.urls import path

from config.consumers import PingConsumer

websocket_urlpatterns = [
    path("ws/ping/", PingConsumer.as_asgi()),
]
