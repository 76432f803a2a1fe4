"""Source credentials at rest: a Fernet token of a JSON object, with a key derived from a setting.

The key comes from ``QUARRY_SOURCE_SECRET_KEY`` (default: ``SECRET_KEY``), stretched with HKDF so
the stored token never reveals the setting itself. Rotating the setting makes stored secrets
unreadable: the sync then fails with a sentence saying so, and an editor enters them again.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings


class SecretsUnreadable(Exception):
    """The stored secrets were written with another key."""


def _fernet() -> Fernet:
    material = (settings.QUARRY_SOURCE_SECRET_KEY or settings.SECRET_KEY).encode("utf-8")
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"quarry-sources", info=b"source secrets").derive(material)
    return Fernet(base64.urlsafe_b64encode(key))


def secrets_seal(values: Mapping[str, str]) -> str:
    """The stored form of ``values`` ("" when there are none)."""
    if not values:
        return ""
    return _fernet().encrypt(json.dumps(dict(values), sort_keys=True).encode("utf-8")).decode("ascii")


def secrets_open(token: str) -> dict[str, str]:
    """The values sealed in ``token``; raises ``SecretsUnreadable`` when the key changed."""
    if not token:
        return {}
    try:
        return json.loads(_fernet().decrypt(token.encode("ascii")))
    except InvalidToken:
        raise SecretsUnreadable("the source's stored credentials cannot be read (QUARRY_SOURCE_SECRET_KEY changed?); "
                                "enter them again") from None
