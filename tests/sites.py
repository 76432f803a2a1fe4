"""A real local web site for source tests and bench/sources.py: an HTTP server on 127.0.0.1 in a
thread, serving pages the caller sets and changes, with ETags (304 on If-None-Match), redirects,
and a log of every request so tests can count full fetches against conditional ones."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Page:
    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    etag: bool = True


@dataclass
class Site:
    base: str = ""
    pages: dict[str, Page] = field(default_factory=dict)
    log: list[tuple[str, str, int, str]] = field(default_factory=list)  # (method, path, status, user agent)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def html(self, path: str, title: str, text: str, links: tuple[str, ...] = (), head: str = "") -> None:
        anchors = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
        body = (f"<!doctype html><html><head><title>{title}</title>{head}</head><body><nav><ul>{anchors}</ul></nav>"
                f"<main><h1>{title}</h1><p>{text}</p></main></body></html>")
        self.pages[path] = Page(body.encode("utf-8"))

    def full_fetches(self) -> list[str]:
        """Paths answered 200 with a body to GET requests."""
        return [path for method, path, status, _ in self.log if method == "GET" and status == 200]


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet: the site keeps its own log
            pass

        def _answer(self, with_body: bool) -> None:
            page = site.pages.get(self.path)
            if page is None:
                page = Page(b"<html><body>Not found</body></html>", status=404, etag=False)
            tag = f'"{hashlib.sha1(page.body).hexdigest()}"' if page.etag and page.status == 200 else ""
            status = 304 if tag and self.headers.get("If-None-Match") == tag else page.status
            with site.lock:
                site.log.append((self.command, self.path, status, self.headers.get("User-Agent", "")))
            self.send_response(status)
            for name, value in page.headers.items():
                self.send_header(name, value)
            if tag:
                self.send_header("ETag", tag)
            if status == 304:
                self.end_headers()
                return
            self.send_header("Content-Type", page.content_type)
            self.send_header("Content-Length", str(len(page.body)))
            self.end_headers()
            if with_body:
                self.wfile.write(page.body)

        def do_GET(self) -> None:
            self._answer(True)

        def do_HEAD(self) -> None:
            self._answer(False)

    return Handler


@contextmanager
def local_site() -> Iterator[Site]:
    """A site on a free port of 127.0.0.1 for the duration of the block."""
    site = Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(site))
    server.daemon_threads = True
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
