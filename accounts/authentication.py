"""DRF authentication: ``Authorization: Bearer <token>`` and the browser session."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import authentication, exceptions
from rest_framework.request import Request

from accounts.models import ApiToken
from accounts.selectors import api_token_for_secret
from accounts.services import api_token_touch
from common.throttling import BadTokenThrottle


# Real secrets are far shorter; anything longer is refused before it is hashed.
MAX_SECRET_CHARS = 200


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Authenticates API tokens. ``request.auth`` is the ``ApiToken``.

    Every presented token is looked up (by its digest), and a valid one passes whatever else came
    from its address. An unknown, revoked or malformed one is a miss, counted per client address
    (``BadTokenThrottle``): 401, or 429 with ``Retry-After`` once the address is over
    ``QUARRY_THROTTLE_BAD_TOKENS``. Refusing before the lookup would lock out every valid token
    behind the same address (an office's NAT) because of one client's misses.
    """

    keyword = "Bearer"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = authentication.get_authorization_header(request).decode("latin-1")
        if not header:
            return None
        scheme, _, secret = header.partition(" ")
        if scheme.lower() != self.keyword.lower():
            return None  # another scheme: leave it to other authenticators
        secret = secret.strip()
        if not secret or " " in secret or len(secret) > MAX_SECRET_CHARS or not secret.isprintable():
            BadTokenThrottle(request).record_miss()
            raise exceptions.AuthenticationFailed("Malformed Authorization header: expected 'Bearer <token>'.")
        token = api_token_for_secret(secret=secret)
        if token is None:
            BadTokenThrottle(request).record_miss()
            raise exceptions.AuthenticationFailed("Invalid or revoked API token.")
        if not token.owner.is_active:
            raise exceptions.AuthenticationFailed("The API token's owner is deactivated.")
        api_token_touch(token=token, every_seconds=settings.QUARRY_TOKEN_TOUCH_SECONDS)
        return token.owner, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


class SessionAuthentication(authentication.SessionAuthentication):
    """The browser session (with CSRF checks on unsafe methods), for the web chat and admin users."""
