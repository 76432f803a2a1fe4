"""ASGI entry point: HTTP through Django, WebSockets through Channels.

In front of both: the request-body limit while the body arrives (HTTP), and the guard that
turns a database failure during the WebSocket handshake into an error frame (config.edge).
"""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

# Django must be set up before anything imports models (the WebSocket routes do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402

from config.edge import BodySizeLimit, WebSocketDatabaseGuard  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": BodySizeLimit(django_asgi_app, settings.DATA_UPLOAD_MAX_MEMORY_SIZE),
        "websocket": AllowedHostsOriginValidator(WebSocketDatabaseGuard(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
    }
)
