"""WebSocket routes (Channels)."""

from __future__ import annotations

from django.urls import path

from chat.consumers import ChatConsumer
from config.consumers import PingConsumer

websocket_urlpatterns = [
    path("ws/ping/", PingConsumer.as_asgi()),
    path("ws/chat/", ChatConsumer.as_asgi()),
]
