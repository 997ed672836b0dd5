"""A small OpenAI-compatible chat server for tests: stdlib `http.server` on loopback, in a thread.

`StubServer(respond)` serves `POST /v1/chat/completions` and `GET /v1/models`; `respond(body,
headers)` returns `(status, payload)` where a dict payload is sent as JSON and bytes as they
are; it may sleep to play a slow server. Every request is kept in `requests` (body and
headers) for the test to inspect. `completion(texts)` builds a chat-completion answer. A
`Raw` payload is written to the socket as it is (status line and headers included), `every_s`
seconds between chunks of `chunk` bytes, then the connection is closed: a server that drips
its answer, or cuts it short.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Raw:
    """Bytes written to the socket as they are (see the module docstring)."""

    data: bytes
    every_s: float = 0.0
    chunk: int = 1 << 20


def raw_answer(body: bytes, *, length: int | None = None, status: str = "200 OK") -> bytes:
    """An HTTP/1.1 answer with `body` (and a Content-Length of `length`, default its own)."""
    n = len(body) if length is None else length
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {n}"
            "\r\nConnection: close\r\n\r\n").encode() + body


Respond = Callable[[dict[str, Any], dict[str, str]], tuple[int, Any]]


def completion(texts: list[str], *, finish: str = "stop", prompt_tokens: int = 17,
               completion_tokens: int = 9) -> dict[str, Any]:
    return {"id": "chatcmpl-stub", "object": "chat.completion", "model": "stub",
            "choices": [{"index": i, "finish_reason": finish,
                         "message": {"role": "assistant", "content": t}}
                        for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class StubServer:
    """A loopback OpenAI-compatible server whose answers a test decides (a context manager)."""

    def __init__(self, respond: Respond):
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, payload: Any) -> None:
                if isinstance(payload, Raw):
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
                        for i in range(0, len(payload.data), payload.chunk):
                            self.wfile.write(payload.data[i:i + payload.chunk])
                            self.wfile.flush()
                            time.sleep(payload.every_s)
                    self.close_connection = True
                    return
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(data)  # the client may have given up (a timeout test)

            def do_GET(self) -> None:  # noqa: N802 -- http.server's naming
                if self.path.rstrip("/").endswith("/models"):
                    self._send(200, {"object": "list", "data": [{"id": "stub-model"}]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                size = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(size) or b"{}")
                headers = {k.lower(): v for k, v in self.headers.items()}
                stub.requests.append({"path": self.path, "body": body, "headers": headers})
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": "not found"})
                    return
                status, payload = stub.respond(body, headers)
                self._send(status, payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def dead_url() -> str:
    """A loopback URL where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
