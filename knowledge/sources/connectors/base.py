"""The connector protocol: list items with a version token; fetch one item.

A sync calls ``check_config`` (shape, before anything is stored), ``probe`` (can the source be
reached: a folder that exists, a bucket that can be listed), then ``list_items`` once, and
``fetch`` for each item whose version token differs from the one last written. ``list_items`` may
read content itself when the listing has to (a crawler reads pages to find links): it then
attaches it to the item and ``fetch`` is not called.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol
from urllib.parse import urlsplit

from django.conf import settings


class ConfigError(ValueError):
    """A configuration the connector refuses; ``field`` names the input at fault (``config.url``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class ListingError(Exception):
    """The listing could not be completed: nothing may be deleted on its account."""


class ItemError(Exception):
    """One item could not be read; the sync reports it and tries again next time."""


@dataclass(frozen=True)
class Content:
    """An item's bytes, as an upload would carry them: the name's extension selects the extractor."""

    data: bytes
    name: str
    content_type: str = ""


@dataclass(frozen=True)
class Item:
    """One item of a listing.

    ``path`` is its stable key in the source (relative path, URL, object key); ``version`` a token
    that changes whenever its content may have (ETag, blob id, mtime and size); ``uri`` where a
    person opens it. ``extra`` is kept with the item and handed back on the next listing
    (``Known.extra``). ``content`` is set when the listing already read the item; ``error`` when
    the listing found the item but could not read it now (a page answering 500): it is reported,
    its document stays, and it is tried again next time.
    """

    path: str
    version: str
    uri: str
    title: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    content: Content | None = None
    error: str = ""


@dataclass(frozen=True)
class Known:
    """What the last sync wrote for an item: the connector may use it to ask only for changes."""

    version: str
    extra: Mapping[str, Any]


@dataclass(frozen=True)
class Context:
    """What a connector gets besides its configuration."""

    workdir: Path  # its own folder for caches (a clone), kept between syncs
    user_agent: str
    max_item_bytes: int
    default_suffixes: tuple[str, ...]  # file kinds the knowledge base can read: the default include


class Connector(Protocol):
    """One kind of source. Instances live for one sync."""

    kind: ClassVar[str]
    secret_fields: ClassVar[tuple[str, ...]]  # config fields stored encrypted and never shown

    @classmethod
    def check_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        """The normalised configuration (secrets excluded); raises ``ConfigError`` naming the field. No I/O."""
        ...

    def __init__(self, config: Mapping[str, Any], secrets: Mapping[str, str], context: Context) -> None: ...

    def probe(self) -> None:
        """Reach the source once (list a bucket, find the folder); raises ``ConfigError`` naming the field."""
        ...

    def list_items(self, known: Mapping[str, Known], cursor: Mapping[str, Any]) -> Iterator[Item]:
        """Every item of the source, each once; raises ``ListingError`` if the listing cannot be completed."""
        ...

    def fetch(self, item: Item) -> Content:
        """The item's bytes; raises ``ItemError`` with a reason."""
        ...

    def cursor(self) -> dict[str, Any]:
        """State to keep for the next sync once this listing completed (git: the commit indexed)."""
        ...

    # Optional, found with getattr: ``close()`` (called when the sync ends) and ``warnings`` (a list of
    # sentences the sync adds to its errors, e.g. the crawl stopped at max_pages).


# --- Helpers the file-like kinds share ------------------------------------------------------------


def string_list(config: Mapping[str, Any], name: str) -> list[str]:
    """``config[name]`` as a list of non-empty strings (absent: empty); ``ConfigError`` otherwise."""
    value = config.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value) or len(value) > 100:
        raise ConfigError(f"config.{name}", "must be a list of at most 100 non-empty strings")
    return list(value)


def text(config: Mapping[str, Any], name: str, *, required: bool = False, default: str = "", max_length: int = 2048) -> str:
    """``config[name]`` as a string; ``ConfigError`` naming it when missing or not a string."""
    value = config.get(name, None)
    if value is None or value == "":
        if required:
            raise ConfigError(f"config.{name}", "is required")
        return default
    if not isinstance(value, str) or len(value) > max_length or any(c in value for c in "\x00\r\n"):
        raise ConfigError(f"config.{name}", f"must be a one-line string of at most {max_length} characters")
    return value


def number(config: Mapping[str, Any], name: str, *, default: float, minimum: float, maximum: float) -> float:
    value = config.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value <= maximum:
        raise ConfigError(f"config.{name}", f"must be a number from {minimum:g} to {maximum:g}")
    return value


def refuse_unknown(config: Mapping[str, Any], allowed: Sequence[str]) -> None:
    extra = sorted(set(config) - set(allowed))
    if extra:
        raise ConfigError(f"config.{extra[0]}", f"not a setting of this kind (it takes {', '.join(allowed)})")


@dataclass(frozen=True)
class PathFilter:
    """Which relative paths a file-like source takes: ``include`` globs (default: files the knowledge
    base can read), minus ``exclude`` globs. Globs match the whole path (``docs/*.md``) or, without
    a ``/``, the file name (``*.md``)."""

    include: tuple[str, ...]
    exclude: tuple[str, ...]
    default_suffixes: tuple[str, ...]

    def wanted(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        if any(_glob(path, name, p) for p in self.exclude):
            return False
        if self.include:
            return any(_glob(path, name, p) for p in self.include)
        return name.lower().endswith(self.default_suffixes)


def _glob(path: str, name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(path if "/" in pattern else name, pattern)


def blocked_address(host: str | None) -> str | None:
    """The address of ``host`` (a name or an IP literal) that ``QUARRY_SOURCE_BLOCKED_NETWORKS`` refuses, or None.

    Every address the name resolves to is checked (a name may have several). A name that does not
    resolve is None here: the request then fails as any unreachable host does. The check runs before each
    connection, not during it: a name whose DNS answer changes in between can still slip through once.
    """
    networks = [ipaddress.ip_network(n, strict=False) for n in settings.QUARRY_SOURCE_BLOCKED_NETWORKS]
    if not host or not networks:
        return None
    try:
        addresses = {ipaddress.ip_address(host.strip("[]"))}
    except ValueError:
        try:
            addresses = {ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in socket.getaddrinfo(host, None)}
        except (OSError, UnicodeError, ValueError):
            return None
    # An IPv4 address written as IPv6 (::ffff:169.254.169.254) reaches the IPv4 host: it is checked as that.
    addresses |= {a.ipv4_mapped for a in addresses if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped}
    return next((str(a) for a in sorted(addresses, key=str) if any(a in n for n in networks)), None)


def refuse_blocked_url(url: str, field: str) -> None:
    """``ConfigError`` naming ``field`` when ``url``'s host is an address no source may reach."""
    host = urlsplit(url).hostname
    address = blocked_address(host)
    if address is not None:
        raise ConfigError(field, f"{host} is {address}, an address sources may not reach (QUARRY_SOURCE_BLOCKED_NETWORKS: "
                                 "link-local and cloud metadata addresses by default)")
