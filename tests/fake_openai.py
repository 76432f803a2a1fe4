"""A real, tiny OpenAI-compatible HTTP server for tests (the provider's network is the boundary).

``fake_openai_server()`` starts it on 127.0.0.1 in a thread for the duration of a
``with`` block and yields a ``FakeOpenAI``: ``base_url`` to hand to litellm
(``api_base``), ``requests`` as received, and the knobs below.

- ``/v1/embeddings`` answers with deterministic vectors (``hash_vector``) of
  ``dimension`` floats; set ``server.vectors`` to change what comes back, or
  replace the whole route for status codes and malformed bodies.
- ``/v1/chat/completions`` answers in OpenAI's shape, as JSON or (``stream: true``)
  as Server-Sent Events in small deltas, with ``usage`` (in the stream too when
  ``stream_options.include_usage`` asks for it). Knobs, changeable while it runs:
  ``chat_reply`` (text, or a function of the messages), ``chat_reasoning`` (sent
  as ``reasoning_content``), ``chat_failures`` (``{model: n}``: the next n requests
  for that model fail with ``chat_failure_status``; ``FAIL_ALWAYS`` for all of
  them), ``chat_delay`` (seconds before answering: slow mode), ``chat_chunk_delay``
  (seconds between stream chunks), ``chat_break_after`` (drop the connection
  after that many content chunks). ``streams_completed`` / ``streams_aborted`` /
  ``streams_broken`` count streams that ran to ``[DONE]`` / whose client went away
  mid-stream / that ``chat_break_after`` dropped.
- Scripted turns (the agent's tests): ``chat_script`` is a list consumed one item
  per chat request, first in first out, before ``chat_reply`` is consulted. An
  item is a ``Scripted`` (text, ``ToolCall``s, a failure status, a delay, a
  usage override) or a plain string (a text answer); ``chat_reply`` may also
  return a ``Scripted``. Tool calls go out in OpenAI's shape: streamed as
  ``delta.tool_calls`` pieces (name first, then the arguments in two parts),
  or as ``message.tool_calls``, with ``finish_reason: "tool_calls"``.
- More endpoints: pass ``routes={path: handler}`` or assign
  ``server.routes[path] = handler``. A handler takes the server and the
  ``ReceivedRequest`` and returns a ``Reply``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    """What a handler answers: a status and a JSON-serializable body (a str is sent as is).

    With ``stream`` set, the body is ignored and the pieces are sent as a chunked
    ``text/event-stream``, each flushed as it comes; a ``None`` piece drops the
    connection there (a provider failing mid-stream).
    """

    status: int = 200
    body: Any = field(default_factory=dict)
    stream: Iterable[bytes | None] | None = None


FAIL_ALWAYS = -1


@dataclass(frozen=True)
class ToolCall:
    """A tool call the fake model makes. ``arguments``: a dict is sent as JSON, a str as is (e.g. broken JSON)."""

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None  # default: call_<completion>_<index>

    def arguments_text(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Scripted:
    """One scripted reply of ``/v1/chat/completions``.

    ``status`` other than 200 fails the request with that status (the provider's
    error); ``delay`` waits before answering; ``usage`` overrides the counted
    ``prompt_tokens`` / ``completion_tokens``.
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    delay: float = 0.0
    usage: Mapping[str, int] | None = None


def tool_calls(*calls: ToolCall, text: str = "", usage: Mapping[str, int] | None = None) -> Scripted:
    """A reply that calls ``calls`` (in parallel when there are several)."""
    return Scripted(text=text, tool_calls=tuple(calls), usage=usage)


def failure(status: int = 500) -> Scripted:
    return Scripted(status=status)


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


def _words(text: str) -> int:
    return len(text.split())


def _message_text(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    parts = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):  # content parts
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict))
    return "\n".join(parts)


def _sse(payload: Any) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def chat_completions_route(server: FakeOpenAI, request: ReceivedRequest) -> Reply:
    """``POST /v1/chat/completions``: JSON or SSE, with usage, failures and delays per the knobs."""
    body = request.json or {}
    model = body.get("model", "")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return Reply(400, {"error": {"message": "messages must be a non-empty list", "type": "invalid_request_error"}})
    if server._take_failure(model):
        return Reply(server.chat_failure_status, {"error": {"message": f"fake upstream failure for {model}", "type": "server_error"}})
    scripted = server._next_scripted()
    if scripted is None:
        answer = server.chat_reply(messages) if callable(server.chat_reply) else server.chat_reply
        scripted = answer if isinstance(answer, Scripted) else Scripted(text=answer)
    if scripted.status != 200:
        return Reply(scripted.status, {"error": {"message": f"fake scripted failure for {model}", "type": "server_error"}})
    if server.chat_delay or scripted.delay:
        time.sleep(server.chat_delay or scripted.delay)
    reply = scripted.text
    reasoning = server.chat_reasoning
    prompt_tokens = _words(_message_text(messages))
    completion_tokens = _words(reply) + sum(_words(c.arguments_text()) for c in scripted.tool_calls)
    if scripted.usage is not None:
        prompt_tokens = scripted.usage.get("prompt_tokens", prompt_tokens)
        completion_tokens = scripted.usage.get("completion_tokens", completion_tokens)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens}
    number = server._next_id()
    completion_id = f"chatcmpl-fake-{number}"
    created = int(time.time())
    calls = [
        {"id": call.id or f"call_{number}_{index}", "type": "function",
         "function": {"name": call.name, "arguments": call.arguments_text()}}
        for index, call in enumerate(scripted.tool_calls)
    ]
    finish = "tool_calls" if calls else "stop"
    if not body.get("stream"):
        message: dict[str, Any] = {"role": "assistant", "content": reply if reply or not calls else None}
        if calls:
            message["tool_calls"] = calls
        if reasoning:
            message["reasoning_content"] = reasoning
        return Reply(200, {
            "id": completion_id, "object": "chat.completion", "created": created, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage,
        })

    include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return _sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    def pieces() -> Iterator[bytes | None]:
        yield chunk({"role": "assistant", "content": ""})
        if reasoning:
            yield chunk({"reasoning_content": reasoning})
        words = reply.split(" ") if reply or not calls else []
        for index, word in enumerate(words):
            if server.chat_break_after is not None and index >= server.chat_break_after:
                yield None
                return
            if server.chat_chunk_delay:
                time.sleep(server.chat_chunk_delay)
            yield chunk({"content": word if index == 0 else f" {word}"})
        for index, call in enumerate(calls):
            arguments = call["function"]["arguments"]
            half = len(arguments) // 2
            yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": call["function"]["name"], "arguments": ""}}]})
            for piece in (arguments[:half], arguments[half:]):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, finish)
        if include_usage:
            yield _sse({"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": model,
                        "choices": [], "usage": usage})
        yield b"data: [DONE]\n\n"

    return Reply(200, stream=pieces())


class FakeOpenAI:
    """State of one running fake server. Attributes may be changed while it runs."""

    def __init__(self, *, dimension: int = 8, routes: Mapping[str, Handler] | None = None) -> None:
        self.dimension = dimension
        self.requests: list[ReceivedRequest] = []
        self.routes: dict[str, Handler] = {
            "/v1/embeddings": embeddings_route, "/v1/chat/completions": chat_completions_route, **(routes or {}),
        }
        self.vectors: VectorsFn = lambda texts: [hash_vector(t, self.dimension) for t in texts]
        self.base_url = ""  # set once the server is listening, e.g. http://127.0.0.1:PORT/v1
        self._lock = threading.Lock()
        # Chat knobs (see the module docstring).
        self.chat_reply: str | Callable[[list[Any]], str | Scripted] = "The fake model answers from the passages [1]."
        self.chat_script: list[Scripted | str] = []
        self.chat_reasoning: str | None = None
        self.chat_failures: dict[str, int] = {}
        self.chat_failure_status = 500
        self.chat_delay = 0.0
        self.chat_chunk_delay = 0.0
        self.chat_break_after: int | None = None
        self.streams_completed = 0
        self.streams_aborted = 0
        self.streams_broken = 0
        self._ids = 0

    def received(self, path: str) -> list[ReceivedRequest]:
        """The requests received on ``path``, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path == path]

    def _record(self, request: ReceivedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _take_failure(self, model: str) -> bool:
        """Whether this request for ``model`` is one of the scheduled failures (and count it)."""
        with self._lock:
            remaining = self.chat_failures.get(model, 0)
            if remaining == FAIL_ALWAYS:
                return True
            if remaining > 0:
                self.chat_failures[model] = remaining - 1
                return True
            return False

    def _next_scripted(self) -> Scripted | None:
        """The next scripted reply, if any is left (a str is a text answer)."""
        with self._lock:
            if not self.chat_script:
                return None
            item = self.chat_script.pop(0)
        return item if isinstance(item, Scripted) else Scripted(text=item)

    def _next_id(self) -> int:
        with self._lock:
            self._ids += 1
            return self._ids

    def _count_stream(self, outcome: str) -> None:
        with self._lock:
            name = f"streams_{outcome}"
            setattr(self, name, getattr(self, name) + 1)


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
            if reply.stream is not None:
                self._send_stream(reply)
                return
            body = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            encoded = body.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def _send_stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for piece in reply.stream or ():
                    if piece is None:  # fail mid-stream: no terminating chunk, connection dropped
                        self.close_connection = True
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        state._count_stream("broken")
                        return
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
                state._count_stream("aborted")
                return
            state._count_stream("completed")

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
