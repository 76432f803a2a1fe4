"""A real, tiny OpenAI-compatible HTTP server for tests (the provider's network is the boundary).

``fake_openai_server()`` starts it on 127.0.0.1 in a thread for the duration of a
``with`` block and yields a ``FakeOpenAI``: ``base_url`` to hand to litellm
(``api_base``), ``requests`` as received, and the knobs below.

- ``/v1/embeddings`` answers with deterministic vectors (``hash_vector``) of
  ``dimension`` floats; set ``server.vectors`` to change what comes back, or
  replace the whole route for status codes and malformed bodies.
- More endpoints (e.g. ``/v1/chat/completions``): pass ``routes={path: handler}``
  or assign ``server.routes[path] = handler``. A handler takes the server and the
  ``ReceivedRequest`` and returns a ``Reply``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import struct
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ReceivedRequest:
    """One request as the server saw it; ``json`` is None when the body was not JSON."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any


@dataclass(frozen=True)
class Reply:
    """What a handler answers: a status and a JSON-serializable body (a str is sent as is)."""

    status: int = 200
    body: Any = field(default_factory=dict)


Handler = Callable[["FakeOpenAI", ReceivedRequest], Reply]
VectorsFn = Callable[[list[str]], list[list[float]]]


def hash_vector(text: str, dimension: int) -> list[float]:
    """A deterministic unit vector derived from sha256(text): same text, same vector."""
    raw: list[float] = []
    counter = 0
    while len(raw) < dimension:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        raw.extend((byte - 127.5) / 127.5 for byte in digest)
        counter += 1
    raw = raw[:dimension]
    norm = math.sqrt(sum(x * x for x in raw)) or 1.0
    return [x / norm for x in raw]


def embeddings_route(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
    """``POST /v1/embeddings`` in OpenAI's shape, float or base64 encoding as requested."""
    body = request.json or {}
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        return Reply(400, {"error": {"message": "input must be a string or a list of strings", "type": "invalid_request_error"}})
    vectors = server.vectors(texts)
    as_base64 = body.get("encoding_format") == "base64"
    data = [
        {
            "object": "embedding",
            "index": i,
            # The openai SDK asks for base64 (little-endian float32) unless told otherwise.
            "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v,
        }
        for i, v in enumerate(vectors)
    ]
    tokens = sum(len(t.split()) for t in texts)
    return Reply(200, {"object": "list", "data": data, "model": body.get("model", ""), "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


class FakeOpenAI:
    """State of one running fake server. Attributes may be changed while it runs."""

    def __init__(self, *, dimension: int = 8, routes: Mapping[str, Handler] | None = None) -> None:
        self.dimension = dimension
        self.requests: list[ReceivedRequest] = []
        self.routes: dict[str, Handler] = {"/v1/embeddings": embeddings_route, **(routes or {})}
        self.vectors: VectorsFn = lambda texts: [hash_vector(t, self.dimension) for t in texts]
        self.base_url = ""  # set once the server is listening, e.g. http://127.0.0.1:PORT/v1
        self._lock = threading.Lock()

    def received(self, path: str) -> list[ReceivedRequest]:
        """The requests received on ``path``, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)


def _handler_class(state: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real API; httpx pools connections

        def do_POST(self) -> None:
            self._serve()

        def do_GET(self) -> None:
            self._serve()

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                payload = json.loads(raw) if raw else None
            except ValueError:
                payload = None
            path = self.path.split("?", 1)[0]
            request = ReceivedRequest(self.command, path, {k.lower(): v for k, v in self.headers.items()}, payload)
            state._record(request)
            route = state.routes.get(path)
            reply = route(state, request) if route else Reply(404, {"error": {"message": f"no route {path}", "type": "not_found"}})
            body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            encoded = body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; the requests are in state.requests

    return _Handler


@contextmanager
def fake_openai_server(*, dimension: int = 8, routes: Mapping[str, Handler] | None = None) -> Iterator[FakeOpenAI]:
    """Run a fake OpenAI-compatible server on 127.0.0.1 (free port) for the block."""
    state = FakeOpenAI(dimension=dimension, routes=routes)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_class(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, name="fake-openai", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
