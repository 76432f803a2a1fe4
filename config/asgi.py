"""ASGI entry point: an outer router for lifespan and ``/mcp``; HTTP through Django, WebSockets through Channels.

``/mcp`` (and ``/mcp/``) is the MCP server (``chat.mcp.http``, streamable HTTP, stateless). The
outer router answers the ASGI lifespan protocol, which Django's handler and Channels do not
speak: at once on startup, then the MCP SDK, the chat model libraries and the embedding model load
in the background (``chat.warmup``), so neither the server's start nor the first answer waits for
them; the first ``/mcp`` request starts the MCP session manager, and shutdown stops it. Behind the
router: the request-body limit while the body arrives (HTTP), and the guard that turns a
database failure during the WebSocket handshake into an error frame (config.edge).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

# Django must be set up before anything imports models (the WebSocket routes do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402

from config.edge import BodySizeLimit, RouteLimit, WebSocketDatabaseGuard  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402
from chat.api import files as files_api  # noqa: E402
from chat.warmup import start_warm_up  # noqa: E402
from starlette.types import Receive, Scope, Send  # noqa: E402

if TYPE_CHECKING:
    from chat.mcp.http import McpHttpApp

# No conversation holds more than QUARRY_CHAT_FILES_MAX_BYTES of files: an attach request past it (plus
# its multipart framing) is refused while it arrives, before Django spools the body to disk.
CHAT_FILES_LIMIT = RouteLimit(
    path=re.compile(r"/v1/chat/sessions/[^/]+/files"),
    limit=lambda: settings.QUARRY_CHAT_FILES_MAX_BYTES + files_api.MULTIPART_SLACK_BYTES,
    message=lambda limit: files_api.too_large_message(settings.QUARRY_CHAT_FILES_MAX_BYTES),
)

django_and_channels = ProtocolTypeRouter(
    {
        "http": BodySizeLimit(django_asgi_app, settings.DATA_UPLOAD_MAX_MEMORY_SIZE, routes=[CHAT_FILES_LIMIT]),
        "websocket": AllowedHostsOriginValidator(WebSocketDatabaseGuard(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))),
    }
)

MCP_PATHS = frozenset({"/mcp", "/mcp/"})


class OuterRouter:
    """Lifespan events and ``/mcp`` here; everything else to Django and Channels."""

    def __init__(self) -> None:
        self._mcp: McpHttpApp | None = None

    @property
    def mcp(self) -> McpHttpApp:
        """The ``/mcp`` app, built on first use; its session manager starts with the first request it serves.

        Not at start: the MCP SDK takes a second or more to import on a busy 2-core machine, which
        every start of the web server (``make run``'s banner) would wait for. The warm-up imports
        it in the background once the server answers (``chat.warmup``).
        """
        if self._mcp is None:  # only the event loop's thread gets here: no lock needed
            from chat.mcp.http import McpHttpApp  # deferred: see above

            self._mcp = McpHttpApp()
        return self._mcp

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and scope["path"] in MCP_PATHS:
            await self.mcp(scope, receive, send)
        else:
            await django_and_channels(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
                start_warm_up()  # after: the server answers at once, and the first chat finds litellm loaded
            elif message["type"] == "lifespan.shutdown":
                if self._mcp is not None:
                    await self._mcp.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return


application = OuterRouter()
