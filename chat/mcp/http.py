"""``/mcp``: the MCP server over streamable HTTP, stateless, behind Quarry's bearer API tokens.

One ``McpHttpApp`` per process (``config.asgi`` builds it). A request goes through:

1. the SDK's bearer middleware with ``ApiTokenVerifier`` (the SDK's token-verifier hook): a
   missing, malformed, unknown or revoked token, or a deactivated owner, is 401 with
   ``WWW-Authenticate: Bearer ...``; a miss counts against the address's bad-token allowance of
   the REST API (``BadTokenThrottle``), and one over it is 429 instead (``_BadTokenRefusal``).
   A valid token passes whatever its address sent before, as on the REST API;
3. the tenant: ``?tenant=<slug>`` on the URL or the token's own, resolved by
   ``accounts.access.token_tenant_context`` exactly as the REST API does (another tenant is 404);
4. the SDK's session manager in stateless mode (any process can answer any request: no
   session id, nothing kept between requests), which checks the Host and Origin headers
   against ``ALLOWED_HOSTS`` and bounds the body (``QUARRY_MCP_MAX_REQUEST_BYTES``, 413).

The session manager must be running (it owns the task group the requests are served in).
Neither Django's ASGI handler nor Channels speak the ASGI lifespan protocol, so the outer
router in ``config.asgi`` calls ``startup``/``shutdown`` on lifespan events, and a request that
arrives while it is not running (a server started with ``--lifespan off``) starts it first.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import re
from typing import Any
from urllib.parse import parse_qs

from asgiref.sync import sync_to_async
from django.conf import settings
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend, RequireAuthMiddleware
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ConfigDict
from rest_framework import exceptions
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from accounts.access import TenantContext, token_tenant_context
from accounts.models import TENANT_SLUG_RE, ApiToken
from accounts.selectors import api_token_for_secret
from accounts.services import api_token_touch
from chat.mcp.server import CALLER, build_server
from common import replicas
from common.throttling import BadTokenThrottle, Throttled

logger = logging.getLogger(__name__)

# As the REST API's authenticator: real secrets are far shorter.
MAX_SECRET_CHARS = 200


class _Peer:
    """What ``BadTokenThrottle`` reads of a request (``client_ip``): its META."""

    def __init__(self, scope: Scope) -> None:  # the ASGI scope, before any middleware read it
        client = scope.get("client") or (None, None)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        self.META: dict[str, Any] = {"REMOTE_ADDR": client[0]}
        if "x-forwarded-for" in headers:
            self.META["HTTP_X_FORWARDED_FOR"] = headers["x-forwarded-for"]


# The request's address, for the verifier to count a bad token against (the SDK hook gets the token only).
_PEER: contextvars.ContextVar[_Peer | None] = contextvars.ContextVar("quarry_mcp_peer", default=None)


class ApiTokenAccess(AccessToken):
    """The SDK's access token carrying the Quarry token it was verified as."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    api_token: ApiToken


def _verify(secret: str, peer: _Peer | None) -> ApiToken | None:
    """The live token whose secret this is, or None; a miss is counted against ``peer``'s address and
    raises ``Throttled`` once the address is over its allowance (a valid token is never refused)."""
    if not secret or " " in secret or len(secret) > MAX_SECRET_CHARS or not secret.isprintable():
        token = None
    else:
        token = api_token_for_secret(secret=secret)
    if token is None:
        if peer is not None:
            BadTokenThrottle(peer).record_miss()  # type: ignore[arg-type]
        return None
    if not token.owner.is_active:
        return None
    api_token_touch(token=token, every_seconds=settings.QUARRY_TOKEN_TOUCH_SECONDS)
    return token


class ApiTokenVerifier:
    """The SDK's ``TokenVerifier`` over Quarry's API tokens (``accounts``): None for anything not a live token."""

    async def verify_token(self, token: str) -> AccessToken | None:
        found = await sync_to_async(_verify)(token.strip(), _PEER.get())
        if found is None:
            return None
        return ApiTokenAccess(token=found.prefix, client_id=f"token:{found.pk}", subject=f"user:{found.owner_id}",
                              scopes=[found.role], api_token=found)


async def _send_json(send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()), *(headers or []),
    ]})
    await send({"type": "http.response.body", "body": data})


def _requested_tenant(scope: Scope) -> str | None:
    values = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("tenant")
    return values[-1] if values else None


def _header(scope: Scope, name: bytes) -> str | None:
    """The last value of a request header (``name`` in lower case), or None."""
    values = [v for k, v in scope.get("headers", []) if k.lower() == name]
    return values[-1].decode("latin-1") if values else None


def _context(token: ApiToken, slug: str | None) -> TenantContext:
    return token_tenant_context(token=token, slug=slug)


class _Tenant:
    """Resolves the authenticated token's tenant (``?tenant=`` or its own) and serves the request as that caller."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        assert isinstance(user, AuthenticatedUser) and isinstance(user.access_token, ApiTokenAccess)  # RequireAuth ran
        slug = _requested_tenant(scope)
        if slug is not None and not re.fullmatch(TENANT_SLUG_RE, slug):
            await _send_json(send, 400, {"error": "invalid", "detail": "tenant: must be a tenant slug: letters, digits, '-' or '_'."})
            return
        try:
            ctx = await sync_to_async(_context)(user.access_token.api_token, slug)
        except exceptions.APIException as exc:
            code = getattr(exc.detail, "code", None) or exc.default_code
            await _send_json(send, exc.status_code, {"error": code, "detail": str(exc.detail)},
                             [(b"www-authenticate", b'Bearer error="invalid_token"')] if exc.status_code == 401 else None)
            return
        reset = CALLER.set(ctx)
        # The token is the principal whose writes (through the REST API) pin it to the primary (common.replicas).
        replicas.begin(replicas.principal_key(authorization=_header(scope, b"authorization")))
        try:
            await self.app(scope, receive, send)
        finally:
            CALLER.reset(reset)
            replicas.clear()


class _BadTokenRefusal:
    """Gives the verifier the request's address, and answers 429 for a miss over its address's allowance.

    The SDK's verifier hook can only accept a token or not (401); ``_verify`` raises ``Throttled``
    through the SDK's authentication middleware (which lets anything but its own error pass), before
    anything was sent. One raised after the response started is not a refusal to answer: re-raised.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        reset = _PEER.set(_Peer(scope))
        started = False

        async def tracked(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Throttled as exc:
            if started:
                raise
            await _send_json(send, 429, {"error": "throttled", "detail": str(exc.detail)},
                             [(b"retry-after", str(int(exc.wait or 1)).encode())])
        finally:
            _PEER.reset(reset)


def transport_security() -> TransportSecuritySettings:
    """Host and Origin checks from ``ALLOWED_HOSTS`` (any port); ``*`` turns them off, as it does for Django."""
    hosts = [h for h in settings.ALLOWED_HOSTS if h]
    if "*" in hosts:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    allowed_hosts = [pattern for h in hosts for pattern in (h, f"{h}:*")]
    origins = [f"{scheme}://{pattern}" for scheme in ("http", "https") for pattern in allowed_hosts]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=allowed_hosts, allowed_origins=origins)


class McpHttpApp:
    """The ``/mcp`` endpoint as an ASGI app, with its session manager's lifecycle."""

    def __init__(self) -> None:
        self.manager = StreamableHTTPSessionManager(
            app=build_server(),
            stateless=True,
            json_response=True,  # one JSON answer per POST: nothing of a tool call streams
            security_settings=transport_security(),
            max_request_body_size=settings.QUARRY_MCP_MAX_REQUEST_BYTES,
        )
        served = RequireAuthMiddleware(_Tenant(self.manager.handle_request), required_scopes=[])
        self.app = _BadTokenRefusal(AuthenticationMiddleware(
            AuthContextMiddleware(served), backend=BearerAuthBackend(ApiTokenVerifier()),
        ))
        self._runner: asyncio.Task[None] | None = None
        self._started = asyncio.Event()
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def startup(self) -> None:
        """Start the session manager in a task of its own (idempotent); returns once it serves."""
        async with self._lock:
            if self._runner is None:
                self._runner = asyncio.get_running_loop().create_task(self._run(), name="mcp-session-manager")
        await self._started.wait()

    async def _run(self) -> None:
        # The manager's task group must be entered and left in one task: this one, for the process's life.
        async with self.manager.run():
            self._started.set()
            await self._stop.wait()

    async def shutdown(self) -> None:
        if self._runner is not None:
            self._stop.set()
            await self._runner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._started.is_set():
            await self.startup()  # served without lifespan events (uvicorn --lifespan off, or another server)
        await self.app(scope, receive, send)
