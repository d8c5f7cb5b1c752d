"""Servers that are not model endpoints, on a free port each: one answers every request with a web
server's welcome page (HTTP 200, HTML), one with binary junk (not even HTTP). What a user meets who
points --base-url at the wrong port. And three whose tokenizer routes are not vLLM's: one answers as
llama.cpp's server does, one reads vLLM's fields but decodes without special tokens, one is
unavailable (HTTP 503) on every request."""

from __future__ import annotations

import json
import socket
import socketserver
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WELCOME = (
    b"<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head>"
    b"<body><h1>Welcome to nginx!</h1><p>If you see this page, the web server is working.</p></body></html>"
)
JUNK = bytes(range(256)) * 8


class _Welcome(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        self.send_response(200)
        self.send_header("content-type", "text/html")
        self.send_header("content-length", str(len(WELCOME)))
        self.end_headers()
        self.wfile.write(WELCOME)

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:  # a test's output stays its own
        pass


class _Quiet(BaseHTTPRequestHandler):
    """A handler that answers POSTs with JSON (``answer``) and keeps a test's output its own."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        status, answer = self.answer(body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        raise NotImplementedError

    def log_message(self, format: str, *args: object) -> None:
        pass


class _LlamaCppTokenizer(_Quiet):
    """llama.cpp's /tokenize reads ``content`` (a request without it gets no tokens, and no error), and
    its /detokenize answers ``content``; a token per whitespace-separated word here, decoded without
    special tokens."""

    field = "content"

    def answer(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        if self.path == "/tokenize":
            return 200, {"tokens": list(range(len(str(body.get(self.field, "")).split())))}
        tokens = body.get("tokens")
        return 200, {self.field: " ".join("word" for _ in (tokens if isinstance(tokens, list) else []))}


class _NoSpecialsTokenizer(_LlamaCppTokenizer):
    """vLLM's fields (``prompt`` in and out), but its decoded text lacks the special tokens it counted."""

    field = "prompt"


class _Unavailable(_Quiet):
    def answer(self, body: dict[str, object]) -> tuple[int, dict[str, object]]:
        return 503, {"error": {"message": "the service is unavailable", "type": "unavailable"}}


class _Junk(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        self.request.settimeout(2)
        try:
            self.request.recv(65536)
            self.request.sendall(JUNK)
        except OSError:
            pass
        self.request.shutdown(socket.SHUT_RDWR)


@contextmanager
def fake_endpoint(kind: str) -> Iterator[str]:
    """Serve ``kind`` ('html', 'junk', 'llama-cpp', 'no-specials' or 'unavailable'); yields the base URL
    a user would pass."""
    handlers = {
        "html": _Welcome,
        "llama-cpp": _LlamaCppTokenizer,
        "no-specials": _NoSpecialsTokenizer,
        "unavailable": _Unavailable,
    }
    server: socketserver.TCPServer = (
        ThreadingHTTPServer(("127.0.0.1", 0), handlers[kind])
        if kind in handlers
        else socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Junk)
    )
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
