"""Web sources: a site crawled politely from a start URL (and optional sitemaps).

Scope: pages on the start URL's host, or under the listed ``prefixes``; ``exclude`` patterns
(regular expressions searched in the URL) are never fetched, and with ``include`` patterns only
matching pages are indexed (the start URL is still read for its links). Politeness: one request
at a time per host with ``delay_seconds`` between them (or robots.txt's Crawl-delay when longer),
``robots.txt`` honoured for the User-Agent naming Quarry, ``noindex`` pages (meta robots or
X-Robots-Tag) not indexed and ``nofollow`` links not followed, at most ``max_pages`` pages and
``max_bytes`` per page.

Re-syncs ask conditionally (If-None-Match / If-Modified-Since from the last answer): a 304 costs
no body, and the page's links remembered from last time keep the crawl going. A page answering
404 or 410 is gone (its document is deleted), except the start URL: then the listing fails and
nothing is deleted; a 5xx or a network error is a failed item whose document stays until it
answers again.
"""

from __future__ import annotations

import hashlib
import mimetypes
import re
import time
import urllib.robotparser
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
import lxml.etree
import lxml.html

from knowledge.sources.connectors.base import (
    Content, Context, ConfigError, Item, ItemError, Known, ListingError, blocked_address, number, refuse_blocked_url, refuse_unknown,
    string_list, text,
)

TIMEOUT_SECONDS = 30.0
MAX_SITEMAP_URLS = 50_000
_HTML_TYPES = ("text/html", "application/xhtml+xml")


def _http_url(value: str, field: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(field, f"{value[:200]!r} is not an http(s) URL")
    refuse_blocked_url(value, field)
    return value


class BlockedAddress(httpx.ConnectError):
    """A request to an address ``QUARRY_SOURCE_BLOCKED_NETWORKS`` refuses (checked before each request:
    a name can resolve elsewhere at sync time than when the source was made)."""


def _refuse_blocked(request: httpx.Request) -> None:
    address = blocked_address(request.url.host)
    if address is not None:
        raise BlockedAddress(f"{request.url.host} is {address}, an address sources may not reach (QUARRY_SOURCE_BLOCKED_NETWORKS)",
                             request=request)


def _patterns(config: Mapping[str, Any], name: str) -> list[str]:
    values = string_list(config, name)
    for n, value in enumerate(values):
        try:
            re.compile(value)
        except re.error as exc:
            raise ConfigError(f"config.{name}[{n}]", f"is not a regular expression: {exc}") from None
    return values


class WebConnector:
    kind: ClassVar[str] = "web"
    secret_fields: ClassVar[tuple[str, ...]] = ("authorization",)  # an Authorization header for an internal site

    @classmethod
    def check_config(cls, config: Mapping[str, Any], secrets: Mapping[str, str]) -> dict[str, Any]:
        refuse_unknown(config, ("url", "sitemaps", "prefixes", "include", "exclude", "max_pages", "max_bytes", "delay_seconds",
                                "authorization"))
        url = _http_url(text(config, "url", required=True), "config.url")
        sitemaps = [_http_url(u, f"config.sitemaps[{n}]") for n, u in enumerate(string_list(config, "sitemaps"))]
        prefixes = [_http_url(u, f"config.prefixes[{n}]") for n, u in enumerate(string_list(config, "prefixes"))]
        return {
            "url": url, "sitemaps": sitemaps, "prefixes": prefixes,
            "include": _patterns(config, "include"), "exclude": _patterns(config, "exclude"),
            "max_pages": int(number(config, "max_pages", default=1000, minimum=1, maximum=100_000)),
            "max_bytes": int(number(config, "max_bytes", default=10 * 1024 * 1024, minimum=1024, maximum=1024**3)),
            "delay_seconds": float(number(config, "delay_seconds", default=0.5, minimum=0, maximum=60)),
        }

    def __init__(self, config: Mapping[str, Any], secrets: Mapping[str, str], context: Context) -> None:
        self.config = config
        self.start = urldefrag(config["url"])[0]
        self.prefixes = list(config.get("prefixes") or [])
        self.host = urlsplit(self.start).netloc.lower()
        self.include = [re.compile(p) for p in config.get("include") or []]
        self.exclude = [re.compile(p) for p in config.get("exclude") or []]
        self.max_pages = int(config.get("max_pages", 1000))
        self.max_bytes = min(int(config.get("max_bytes", context.max_item_bytes)), context.max_item_bytes)
        self.delay = float(config.get("delay_seconds", 0.5))
        headers = {"User-Agent": context.user_agent}
        if secrets.get("authorization"):
            headers["Authorization"] = secrets["authorization"]
        self.client = httpx.Client(headers=headers, timeout=TIMEOUT_SECONDS, follow_redirects=False,
                                   event_hooks={"request": [_refuse_blocked]})
        self.user_agent = context.user_agent
        self.robots: dict[str, urllib.robotparser.RobotFileParser] = {}
        self.last_request: dict[str, float] = {}
        self.truncated = False

    # --- Scope and politeness ---------------------------------------------------------------------

    def in_scope(self, url: str) -> bool:
        if urlsplit(url).scheme not in ("http", "https"):
            return False
        if self.prefixes:
            inside = any(url.startswith(p) for p in self.prefixes)
        else:
            inside = urlsplit(url).netloc.lower() == self.host
        return inside and not any(p.search(url) for p in self.exclude)

    def indexable(self, url: str) -> bool:
        return not self.include or any(p.search(url) for p in self.include)

    def _wait(self, url: str) -> None:
        host = urlsplit(url).netloc.lower()
        robots = self.robots.get(host)
        delay = max(self.delay, float((robots.crawl_delay(self.user_agent) if robots else None) or 0))
        earlier = self.last_request.get(host)
        if earlier is not None and (pause := earlier + delay - time.monotonic()) > 0:
            time.sleep(pause)
        self.last_request[host] = time.monotonic()

    def allowed(self, url: str) -> bool:
        """robots.txt's answer for our User-Agent (read once per host per sync)."""
        parts = urlsplit(url)
        host = parts.netloc.lower()
        if host not in self.robots:
            robots = urllib.robotparser.RobotFileParser()
            robots_url = f"{parts.scheme}://{parts.netloc}/robots.txt"
            self._wait(robots_url)
            try:
                answer = self.client.get(robots_url)
            except httpx.HTTPError as exc:
                raise ListingError(f"{robots_url} could not be read ({exc.__class__.__name__}: {str(exc)[:200]}); nothing was crawled") from None
            if answer.status_code >= 500:
                # RFC 9309: a server error on robots.txt means "assume complete disallow" for now.
                raise ListingError(f"{robots_url} answered {answer.status_code}; the site is not crawled until it answers")
            robots.parse(answer.text.splitlines() if answer.status_code == 200 else [])
            self.robots[host] = robots
        return self.robots[host].can_fetch(self.user_agent, url)

    def probe(self) -> None:
        try:
            answer = self.client.head(self.start)
        except httpx.HTTPError as exc:
            raise ConfigError("config.url", f"{self.start} cannot be reached ({exc.__class__.__name__}: {exc})") from None
        if answer.status_code >= 400 and answer.status_code not in (405, 501):  # some servers refuse HEAD
            raise ConfigError("config.url", f"{self.start} answered {answer.status_code}")

    # --- The crawl --------------------------------------------------------------------------------

    def list_items(self, known: Mapping[str, Known], cursor: Mapping[str, Any]) -> Iterator[Item]:
        queue: deque[str] = deque([self.start])
        seen = {self.start}
        for sitemap in self.config.get("sitemaps") or []:
            for url in self._sitemap_urls(sitemap):
                if url not in seen and self.in_scope(url):
                    seen.add(url)
                    queue.append(url)
        pages = 0
        while queue:
            url = queue.popleft()
            if not self.allowed(url):
                continue
            if url != self.start and not self.indexable(url):
                continue
            if pages >= self.max_pages:
                self.truncated = True
                break
            pages += 1
            item, links = self._visit(url, known.get(url), first=url == self.start)
            for link in links:
                if link not in seen and self.in_scope(link):
                    seen.add(link)
                    queue.append(link)
            if item is not None:
                yield item

    def _visit(self, url: str, previous: Known | None, *, first: bool) -> tuple[Item | None, list[str]]:
        """Read one page: its item (None when it is not to be indexed) and the links to follow."""
        headers = {}
        if previous is not None:
            if previous.extra.get("etag"):
                headers["If-None-Match"] = str(previous.extra["etag"])
            if previous.extra.get("last_modified"):
                headers["If-Modified-Since"] = str(previous.extra["last_modified"])
        remembered = list(previous.extra.get("links", [])) if previous is not None else []
        self._wait(url)
        try:
            with self.client.stream("GET", url, headers=headers) as answer:
                if answer.has_redirect_location:
                    # Not followed here: the target is a page of its own, queued (and asked for conditionally) like a link.
                    target = urldefrag(urljoin(url, answer.headers.get("location", "")))[0]
                    return None, [target] if target else []
                if answer.status_code == 304 and previous is not None:
                    return Item(path=url, version=previous.version, uri=url, extra=previous.extra), remembered
                if answer.status_code in (404, 410):
                    if first:
                        # The site moved or the source is misconfigured: a crawl that cannot start is
                        # not a site without pages, so nothing may be deleted on its word.
                        raise ListingError(f"the start URL {url} answered {answer.status_code}")
                    return None, []
                if answer.status_code >= 400:
                    if first and previous is None:
                        raise ListingError(f"the start URL {url} answered {answer.status_code}")
                    return self._failed(url, previous, f"HTTP {answer.status_code}"), remembered
                data = self._read(answer)
        except httpx.HTTPError as exc:
            if first:
                raise ListingError(f"the start URL {url} could not be read ({exc.__class__.__name__}: {str(exc)[:200]})") from None
            return self._failed(url, previous, f"{exc.__class__.__name__}: {str(exc)[:200]}"), remembered
        except ItemError as exc:
            return self._failed(url, previous, str(exc)), remembered
        mime = answer.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        robots_header = answer.headers.get("x-robots-tag", "").lower()
        links: list[str] = []
        noindex, nofollow = "noindex" in robots_header, "nofollow" in robots_header
        if mime in _HTML_TYPES:
            page_links, meta = _links(data, url)
            noindex, nofollow = noindex or "noindex" in meta, nofollow or "nofollow" in meta
            links = [] if nofollow else page_links
        if noindex or not self.indexable(url):
            return None, links
        etag, modified = answer.headers.get("etag", ""), answer.headers.get("last-modified", "")
        version = etag or modified or hashlib.sha256(data).hexdigest()
        extra = {"etag": etag, "last_modified": modified, "links": links[:2000]}
        return Item(path=url, version=version, uri=url, extra=extra, content=Content(data, _file_name(url, mime), mime)), links

    def _failed(self, url: str, previous: Known | None, reason: str) -> Item:
        return Item(path=url, version=previous.version if previous else "", uri=url,
                    extra=dict(previous.extra) if previous else {}, error=reason)

    def _read(self, answer: httpx.Response) -> bytes:
        declared = answer.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_bytes:
            raise ItemError(f"{int(declared):,} bytes, over max_bytes ({self.max_bytes:,})")
        body = bytearray()
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) > self.max_bytes:
                raise ItemError(f"over max_bytes ({self.max_bytes:,}); not read further")
        return bytes(body)

    def _sitemap_urls(self, sitemap: str, depth: int = 0) -> list[str]:
        """The page URLs of a sitemap (a sitemap index is followed, two levels at most)."""
        if not self.allowed(sitemap):
            return []
        self._wait(sitemap)
        try:
            answer = self.client.get(sitemap)
        except httpx.HTTPError as exc:
            raise ListingError(f"the sitemap {sitemap} could not be read ({exc.__class__.__name__}: {str(exc)[:200]})") from None
        if answer.status_code != 200:
            raise ListingError(f"the sitemap {sitemap} answered {answer.status_code}")
        try:
            root = lxml.etree.fromstring(answer.content, parser=lxml.etree.XMLParser(resolve_entities=False, no_network=True))
        except lxml.etree.XMLSyntaxError as exc:
            raise ListingError(f"the sitemap {sitemap} is not XML: {exc}") from None
        locs = [(el.text or "").strip() for el in root.iter("{*}loc")][:MAX_SITEMAP_URLS]
        if root.tag.endswith("sitemapindex") and depth < 2:
            return [url for child in locs for url in self._sitemap_urls(child, depth + 1)]
        return [urldefrag(u)[0] for u in locs if u]

    @property
    def warnings(self) -> list[str]:
        """Notes for the sync's errors list (``syncing`` reads this optional attribute)."""
        if self.truncated:
            return [f"stopped at max_pages ({self.max_pages}): pages past it are not indexed"]
        return []

    def fetch(self, item: Item) -> Content:
        if item.content is None:  # every page the crawl indexes carries its content
            raise ItemError("the page was not read")
        return item.content

    def cursor(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        self.client.close()


def _links(data: bytes, base: str) -> tuple[list[str], str]:
    """The page's followable links (absolute, no fragment, in order, once) and its meta robots value."""
    try:
        document = lxml.html.fromstring(data, base_url=base)
    except (lxml.etree.ParserError, ValueError):
        return [], ""
    meta = " ".join(m.get("content", "") for m in document.xpath('//meta[@name="robots" or @name="ROBOTS"]')).lower()
    found: dict[str, None] = {}
    for anchor in document.xpath("//a[@href]"):
        if "nofollow" in (anchor.get("rel") or "").lower():
            continue
        url = urldefrag(urljoin(base, anchor.get("href").strip()))[0]
        if url.startswith(("http://", "https://")):
            found[url] = None
    return list(found), meta


def _file_name(url: str, mime: str) -> str:
    """A name whose extension tells extraction the page's type (``/guide/`` served as HTML -> ``guide.html``)."""
    last = urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1] or "index"
    extension = ".html" if mime in _HTML_TYPES else (mimetypes.guess_extension(mime) or "")
    return last if extension and last.lower().endswith(extension) else f"{last}{extension}"
